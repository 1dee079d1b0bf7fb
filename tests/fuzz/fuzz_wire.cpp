// fuzz_wire.cpp - libFuzzer target for the wire decoders (lib/wire/wire.hpp,
// tcp_frames.hpp, bell.hpp), which face bytes from the network and from
// local clients.
//
// Every input goes to every decoder: each msgpack decoder judges the
// [version, type] header first, so the wrong ones reject it at once, and the
// payload-list decoder (not msgpack) gets the count the input itself claims.
// A decoder either throws zring::Error or returns a message that keeps every
// promise of wire.hpp; encoding that message and decoding the result gives
// the same message again.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "codec/codec.hpp"
#include "fuzz_check.hpp"
#include "wire/bell.hpp"
#include "wire/tcp_frames.hpp"
#include "wire/wire.hpp"

namespace {

namespace wire = zring::wire;
namespace fuzz = zring::fuzz;
using zring::CompressedGradient;
using zring::CompressedMap;
using Bytes = std::vector<std::uint8_t>;

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// A product of extents that overflows never equals a valid element count.
bool holds(const std::vector<std::uint64_t>& shape, std::uint64_t numel) {
  std::uint64_t product = 1;
  for (std::uint64_t extent : shape) {
    if (extent == 0) return numel == 0;
    if (__builtin_mul_overflow(product, extent, &product)) return false;
  }
  return product == numel;
}

// --- gradients -------------------------------------------------------------------

void check_valid(const CompressedMap& m, const wire::DecodeLimits& limits) {
  ZRING_FUZZ_CHECK(m.size() <= limits.max_tensors);
  std::size_t total = 0;
  for (const auto& [name, g] : m) {
    ZRING_FUZZ_CHECK(!name.empty() && name.size() <= limits.max_name_bytes);
    ZRING_FUZZ_CHECK(!g.method.has_error_feedback());
    ZRING_FUZZ_CHECK(g.original_size <= limits.max_elements);
    total += g.original_size;
    ZRING_FUZZ_CHECK(g.shape.size() <= limits.max_rank);
    ZRING_FUZZ_CHECK(
        holds(std::vector<std::uint64_t>(g.shape.begin(), g.shape.end()), g.original_size));
    if (g.indices.empty()) {
      ZRING_FUZZ_CHECK(g.values.size() == g.original_size || g.values.empty());
    } else {
      ZRING_FUZZ_CHECK(g.indices.size() == g.values.size());
      for (std::size_t j = 0; j < g.indices.size(); ++j) {
        ZRING_FUZZ_CHECK(g.indices[j] < g.original_size);
        ZRING_FUZZ_CHECK(j == 0 || g.indices[j - 1] < g.indices[j]);
      }
    }
  }
  ZRING_FUZZ_CHECK(total <= limits.max_total_elements);
}

bool same(const CompressedGradient& a, const CompressedGradient& b) {
  return a.method == b.method && a.original_size == b.original_size && a.shape == b.shape &&
         a.payload == b.payload && a.indices == b.indices && same_bits(a.values, b.values) &&
         a.seed == b.seed && a.value_bits == b.value_bits &&
         a.compression_ratio == b.compression_ratio;
}

bool same(const CompressedMap& a, const CompressedMap& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || !same(i->second, j->second)) return false;
  return true;
}

// Bounds far tighter than the defaults: what they accept, the defaults
// accept too, and decode alike.
wire::DecodeLimits tight_limits() {
  wire::DecodeLimits limits;
  limits.max_message_bytes = 4096;
  limits.max_tensors = 4;
  limits.max_elements = 5000;
  limits.max_total_elements = 6000;
  limits.max_name_bytes = 16;
  limits.max_rank = 3;
  return limits;
}

// Returns whether the input decoded with the default limits.
bool fuzz_gradients(const std::uint8_t* data, std::size_t size) {
  CompressedMap m;
  const bool ok = fuzz::accepted([&] { m = wire::decode_gradients(data, size); });
  if (ok) {
    check_valid(m, {});
    const Bytes again = wire::encode_gradients(m);
    CompressedMap m2;
    ZRING_FUZZ_CHECK(
        fuzz::accepted([&] { m2 = wire::decode_gradients(again.data(), again.size()); }));
    ZRING_FUZZ_CHECK(same(m, m2));
  }
  const wire::DecodeLimits tight = tight_limits();
  CompressedMap t;
  if (fuzz::accepted([&] { t = wire::decode_gradients(data, size, tight); })) {
    check_valid(t, tight);
    ZRING_FUZZ_CHECK(ok && same(t, m));
  }
  return ok;
}

// --- manifests, ring headers, summaries, IPC messages, traces ----------------------

void check_valid(const wire::Manifest& m) {
  ZRING_FUZZ_CHECK(m.method.size() <= wire::kMaxMethodBytes);
  ZRING_FUZZ_CHECK(m.tensors.size() <= wire::kMaxManifestTensors);
  ZRING_FUZZ_CHECK(m.kind == wire::OpKind::all_reduce || m.kind == wire::OpKind::broadcast);
  ZRING_FUZZ_CHECK(m.kind == wire::OpKind::broadcast || m.root == 0);
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    const wire::TensorSpec& t = m.tensors[i];
    ZRING_FUZZ_CHECK(!t.name.empty() && t.name.size() <= wire::kMaxManifestNameBytes);
    ZRING_FUZZ_CHECK(i == 0 || m.tensors[i - 1].name < t.name);
    ZRING_FUZZ_CHECK(t.shape.size() <= wire::kMaxManifestRank);
    for (std::uint64_t extent : t.shape) ZRING_FUZZ_CHECK(extent <= 0xFFFFFFFFu);
    ZRING_FUZZ_CHECK(t.numel <= 0xFFFFFFFFu);
    ZRING_FUZZ_CHECK(holds(t.shape, t.numel));
  }
}

void check_valid(const wire::RingHeader& h) {
  const auto kind = static_cast<unsigned>(h.kind);
  const auto phase = static_cast<unsigned>(h.tag.phase);
  ZRING_FUZZ_CHECK(kind >= 1 && kind <= static_cast<unsigned>(wire::RingKind::data_via_zmq));
  ZRING_FUZZ_CHECK(h.data_port <= 65535);
  ZRING_FUZZ_CHECK(phase <= static_cast<unsigned>(wire::Phase::stats));
  ZRING_FUZZ_CHECK(h.kind != wire::RingKind::data || phase >= 1);
  ZRING_FUZZ_CHECK(zring::is_error_code(h.error_code));
  ZRING_FUZZ_CHECK(h.text.size() <= wire::kMaxRingTextBytes);
}

bool same(const wire::RingHeader& a, const wire::RingHeader& b) {
  return a.kind == b.kind && a.generation == b.generation && a.op == b.op && a.sender == b.sender &&
         a.tag == b.tag && a.origin == b.origin && a.error_code == b.error_code &&
         a.text == b.text && a.data_port == b.data_port;
}

void check_valid(const wire::NodeSummary& s) {
  check_valid(s.manifest);
  if (s.failure) {
    ZRING_FUZZ_CHECK(!s.failure->text.empty());
    ZRING_FUZZ_CHECK(s.failure->text.size() <= wire::kMaxRingTextBytes);
    ZRING_FUZZ_CHECK(zring::is_error_code(static_cast<std::uint32_t>(s.failure->code)));
  }
  ZRING_FUZZ_CHECK(s.blob_bytes <= wire::kMaxBlobBytes);
}

bool same(const wire::NodeSummary& a, const wire::NodeSummary& b) {
  if (a.nonfinite.size() != b.nonfinite.size()) return false;
  for (std::size_t i = 0; i < a.nonfinite.size(); ++i) {
    const wire::NonFinite& x = a.nonfinite[i];
    const wire::NonFinite& y = b.nonfinite[i];
    if (x.tensor != y.tensor || x.index != y.index || std::memcmp(&x.value, &y.value, 4) != 0)
      return false;
  }
  return a.manifest == b.manifest && a.failure == b.failure && same_bits(a.stats, b.stats) &&
         a.blob_bytes == b.blob_bytes;
}

void check_valid(const wire::IpcMessage& m) {
  const auto kind = static_cast<unsigned>(wire::kind_of(m));
  ZRING_FUZZ_CHECK(kind >= 1 && kind <= static_cast<unsigned>(wire::IpcKind::trace_reply));
  if (const auto* submit = std::get_if<wire::Submit>(&m)) check_valid(submit->manifest);
  if (const auto* welcome = std::get_if<wire::Welcome>(&m))
    ZRING_FUZZ_CHECK(welcome->node.size() <= wire::kMaxNodeNameBytes);
  if (const auto* reply = std::get_if<wire::TraceReply>(&m))
    ZRING_FUZZ_CHECK(reply->node.size() <= wire::kMaxNodeNameBytes);
  if (const auto* error = std::get_if<wire::ErrorReply>(&m)) {
    ZRING_FUZZ_CHECK(error->text.size() <= wire::kMaxIpcTextBytes);
    ZRING_FUZZ_CHECK(zring::is_error_code(static_cast<std::uint32_t>(error->code)));
  }
  if (const auto* report = std::get_if<wire::StatusReport>(&m)) {
    const wire::DaemonStatus& s = report->status;
    ZRING_FUZZ_CHECK(s.members.size() <= wire::kMaxStatusMembers &&
                     s.ring_members.size() <= wire::kMaxStatusMembers &&
                     s.methods.size() <= wire::kMaxStatusMethods &&
                     s.errors.size() <= wire::kMaxStatusErrors);
    for (const wire::MemberStatus& member : s.members) {
      const auto state = static_cast<unsigned>(member.state);
      ZRING_FUZZ_CHECK(state >= 1 && state <= 6);
      ZRING_FUZZ_CHECK(member.name.size() <= wire::kMaxStatusTextBytes &&
                       member.mismatch.size() <= wire::kMaxStatusTextBytes);
    }
    ZRING_FUZZ_CHECK(s.last_error.size() <= wire::kMaxStatusTextBytes);
  }
  if (const auto* attached = std::get_if<wire::Attached>(&m))
    ZRING_FUZZ_CHECK(attached->path.size() <= wire::kMaxIpcTextBytes);
}

// A Submit's block statistics may be nan (a block holding inf or nan has
// nan statistics): compared by their bits, the rest as the wire has it.
bool same(const wire::IpcMessage& a, const wire::IpcMessage& b) {
  const auto* x = std::get_if<wire::Submit>(&a);
  const auto* y = std::get_if<wire::Submit>(&b);
  if (!x || !y) return a == b;
  if (!same_bits(x->block_stats, y->block_stats)) return false;
  wire::Submit x_rest = *x, y_rest = *y;
  x_rest.block_stats.clear();
  y_rest.block_stats.clear();
  return x_rest == y_rest;
}

void check_valid(const wire::Trace& t) {
  ZRING_FUZZ_CHECK(t.node.size() <= wire::kMaxNodeNameBytes);
  ZRING_FUZZ_CHECK(t.records.size() <= wire::kMaxTraceRecords);
  for (const wire::TraceRecord& r : t.records) {
    ZRING_FUZZ_CHECK(r.method.size() <= wire::kMaxMethodBytes);
    ZRING_FUZZ_CHECK(r.tensors <= wire::kMaxManifestTensors);
    ZRING_FUZZ_CHECK(!r.error || zring::is_error_code(*r.error));
  }
}

bool same(const wire::Trace& a, const wire::Trace& b) {
  return a.node == b.node && a.records == b.records;
}

// Decodes with decode; on success checks the message and its round trip
// through encode. Returns whether it decoded.
template <typename Message, typename Decode, typename Encode>
bool fuzz_message(const std::uint8_t* data, std::size_t size, Decode decode, Encode encode) {
  Message message;
  if (!fuzz::accepted([&] { message = decode(data, size); })) return false;
  check_valid(message);
  const Bytes again = encode(message);
  Message decoded_again;
  ZRING_FUZZ_CHECK(fuzz::accepted([&] { decoded_again = decode(again.data(), again.size()); }));
  ZRING_FUZZ_CHECK(same(message, decoded_again));
  return true;
}

// --- payload lists -------------------------------------------------------------

void fuzz_payload_list(const std::uint8_t* data, std::size_t size) {
  std::uint32_t claimed = 0;
  if (size >= 4) std::memcpy(&claimed, data, 4);
  std::vector<wire::Span> spans;
  if (fuzz::accepted([&] { spans = wire::decode_payload_list(data, size, claimed); })) {
    // The spans tile the bytes after the lengths, in order, and encoding
    // them again gives back the very same bytes.
    ZRING_FUZZ_CHECK(spans.size() == claimed);
    std::size_t at = 4 + 4 * spans.size();
    std::vector<Bytes> payloads;
    for (const wire::Span& s : spans) {
      ZRING_FUZZ_CHECK(s.data == data + at && s.size <= size - at);
      at += s.size;
      payloads.emplace_back(s.data, s.data + s.size);
    }
    ZRING_FUZZ_CHECK(at == size);
    ZRING_FUZZ_CHECK(wire::encode_payload_list(payloads) == Bytes(data, data + size));
  }
  // Any other count is refused.
  ZRING_FUZZ_CHECK(!fuzz::accepted(
      [&] { (void)wire::decode_payload_list(data, size, std::size_t{claimed} + 1); }));
}

}  // namespace

// --- a TCP data connection's bytes ---------------------------------------------------

// The input as what a connection brings: a hello, then frames, read in pieces
// of every size from 1 byte up. Each frame the reader cuts keeps its
// promises, and its bytes written again are the bytes it was cut from.
void fuzz_tcp_stream(const std::uint8_t* data, std::size_t size) {
  if (size < wire::kTcpHelloBytes) return;
  std::optional<wire::TcpHello> hello;
  if (fuzz::accepted([&] { hello = wire::decode_tcp_hello(data, wire::kTcpHelloBytes); })) {
    const auto again = wire::encode_tcp_hello(*hello);
    ZRING_FUZZ_CHECK(std::memcmp(again.data(), data, again.size()) == 0);
  }
  constexpr std::size_t kMaxPayload = 1 << 20;
  wire::TcpFrameReader reader(kMaxPayload);
  std::size_t at = wire::kTcpHelloBytes, piece = 1, framed = at;
  (void)fuzz::accepted([&] {
    while (at < size) {
      const auto [room, space] = reader.room();
      ZRING_FUZZ_CHECK(space != 0);
      const std::size_t n = std::min({space, size - at, piece++});
      std::memcpy(room, data + at, n);
      at += n;
      reader.filled(n);
      while (std::optional<wire::TcpFrame> frame = reader.next()) {
        ZRING_FUZZ_CHECK(!frame->header.empty() &&
                         frame->header.size() <= wire::kMaxTcpHeaderBytes);
        ZRING_FUZZ_CHECK(frame->payload_bytes <= kMaxPayload);
        ZRING_FUZZ_CHECK(frame->has_payload || frame->payload_bytes == 0);
        ZRING_FUZZ_CHECK((frame->payload != nullptr) == (frame->payload_bytes != 0));
        const auto prefix =
            wire::encode_tcp_prefix(frame->header.size(), frame->has_payload, frame->payload_bytes);
        Bytes again(prefix.begin(), prefix.end());
        again.insert(again.end(), frame->header.begin(), frame->header.end());
        again.insert(again.end(), frame->payload.get(),
                     frame->payload.get() + frame->payload_bytes);
        ZRING_FUZZ_CHECK(framed + again.size() <= at);
        ZRING_FUZZ_CHECK(std::memcmp(again.data(), data + framed, again.size()) == 0);
        framed += again.size();
      }
    }
  });
}

// --- the bell --------------------------------------------------------------------

// A datagram on zringd's bell: its routing id and message, which encode
// back to the very same bytes, and the message then as decode_ipc takes it.
void fuzz_bell(const std::uint8_t* data, std::size_t size) {
  wire::BellRequest request;
  if (!fuzz::accepted([&] { request = wire::decode_bell(data, size); })) return;
  ZRING_FUZZ_CHECK(!request.client.empty() && request.client.size() <= 255);
  ZRING_FUZZ_CHECK(!request.message.empty() && size <= wire::kMaxBellBytes);
  const Bytes message(request.message.begin(), request.message.end());
  const Bytes again = wire::encode_bell(request.client, message);
  ZRING_FUZZ_CHECK(again.size() == size && std::memcmp(again.data(), data, size) == 0);
  (void)fuzz_message<wire::IpcMessage>(message.data(), message.size(), wire::decode_ipc,
                                       wire::encode_ipc);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<wire::MessageType> type;
  fuzz::accepted([&] { type = wire::peek_message_type(data, size); });
  // Every decoder judges the header as peek_message_type does: a message
  // decodes only as the type it announces.
  const auto decodes_as = [&](wire::MessageType t) { ZRING_FUZZ_CHECK(type == t); };

  if (fuzz_gradients(data, size)) decodes_as(wire::MessageType::gradients);
  if (fuzz_message<wire::RingHeader>(data, size, wire::decode_ring_header,
                                     wire::encode_ring_header))
    decodes_as(wire::MessageType::ring);
  if (fuzz_message<wire::NodeSummary>(data, size, wire::decode_summary, wire::encode_summary))
    decodes_as(wire::MessageType::summary);
  if (fuzz_message<wire::IpcMessage>(data, size, wire::decode_ipc, wire::encode_ipc))
    decodes_as(wire::MessageType::ipc);
  if (fuzz_message<wire::Trace>(data, size, wire::decode_trace, wire::encode_trace))
    decodes_as(wire::MessageType::trace);
  fuzz_payload_list(data, size);
  fuzz_tcp_stream(data, size);
  fuzz_bell(data, size);
  return 0;
}
