// ring_wire.cpp - ring and IPC messages (to be folded into wire.cpp).
#include "wire/ring_wire.hpp"

#include <cstring>
#include <limits>
#include <string_view>

#include <msgpack.hpp>

#include <zring/error.hpp>

#include "wire/wire.hpp"

namespace zring::wire {
namespace {

constexpr std::uint32_t kRingType = 2, kSummaryType = 3, kIpcType = 4;

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::malformed_message, "wire: " + what);
}

class Sink {
 public:
  explicit Sink(std::vector<std::uint8_t>& out) : out_(out) {}
  void write(const char* d, std::size_t n) {
    out_.insert(out_.end(), reinterpret_cast<const std::uint8_t*>(d),
                reinterpret_cast<const std::uint8_t*>(d) + n);
  }

 private:
  std::vector<std::uint8_t>& out_;
};
using Packer = msgpack::packer<Sink>;

void pack_str(Packer& p, std::string_view s) {
  p.pack_str(static_cast<std::uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_bin(Packer& p, const void* data, std::size_t n) {
  p.pack_bin(static_cast<std::uint32_t>(n));
  p.pack_bin_body(static_cast<const char*>(data), static_cast<std::uint32_t>(n));
}

bool in_place(msgpack::type::object_type, std::size_t, void*) { return true; }

// Unpacks a message with every size bounded, and checks [version, type, ...].
msgpack::object_handle unpack(const std::uint8_t* data, std::size_t size, std::uint32_t type,
                              std::size_t items, std::size_t max_array, std::size_t max_bin) {
  if (data == nullptr || size == 0) bad("empty message");
  msgpack::object_handle h;
  try {
    std::size_t offset = 0;
    h = msgpack::unpack(reinterpret_cast<const char*>(data), size, offset, in_place, nullptr,
                        msgpack::unpack_limit(max_array, 0, 1 << 16, max_bin, 0, 6));
    if (offset != size) bad("trailing bytes after the message");
  } catch (const msgpack::unpack_error& e) {
    bad(std::string("msgpack: ") + e.what());
  } catch (const std::bad_alloc&) {
    bad("message too large");
  }
  const msgpack::object& root = h.get();
  if (root.type != msgpack::type::ARRAY || root.via.array.size < 2) bad("not [version, type, ...]");
  const msgpack::object* f = root.via.array.ptr;
  if (f[0].type != msgpack::type::POSITIVE_INTEGER) bad("version is not an unsigned integer");
  if (f[0].via.u64 != kWireVersion)
    throw Error(ErrorCode::unsupported_version,
                "wire: message of protocol version " + std::to_string(f[0].via.u64) +
                    ", this zring speaks version " + std::to_string(kWireVersion));
  if (f[1].type != msgpack::type::POSITIVE_INTEGER || f[1].via.u64 != type)
    bad("unexpected message type");
  if (root.via.array.size != 2 + items)
    bad("message of " + std::to_string(root.via.array.size) + " items, expected " +
        std::to_string(2 + items));
  return h;
}

std::uint64_t uint_of(const msgpack::object& o, std::uint64_t max, const char* what) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) bad(std::string(what) + " is not an unsigned integer");
  if (o.via.u64 > max) bad(std::string(what) + " is out of range");
  return o.via.u64;
}

std::string str_of(const msgpack::object& o, std::size_t max, const char* what) {
  if (o.type != msgpack::type::STR) bad(std::string(what) + " is not a string");
  if (o.via.str.size > max) bad(std::string(what) + " is too long");
  return std::string(o.via.str.ptr, o.via.str.size);
}

std::pair<const std::uint8_t*, std::size_t> bin_of(const msgpack::object& o, const char* what) {
  if (o.type != msgpack::type::BIN) bad(std::string(what) + " is not binary");
  return {reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr), o.via.bin.size};
}

const msgpack::object* array_of(const msgpack::object& o, std::size_t min, std::size_t max,
                                const char* what, std::size_t* n) {
  if (o.type != msgpack::type::ARRAY) bad(std::string(what) + " is not an array");
  *n = o.via.array.size;
  if (*n < min || *n > max) bad(std::string(what) + " has a wrong number of items");
  return o.via.array.ptr;
}

constexpr std::size_t kMaxTensors = 1 << 16;
constexpr std::size_t kMaxRank = 8;
constexpr std::size_t kMaxText = 4096;

void pack_manifest(Packer& p, const collective::Manifest& m) {
  p.pack_array(2);
  pack_str(p, m.method);
  p.pack_array(static_cast<std::uint32_t>(m.tensors.size()));
  for (const auto& t : m.tensors) {
    p.pack_array(3);
    pack_str(p, t.name);
    p.pack_array(static_cast<std::uint32_t>(t.shape.size()));
    for (auto e : t.shape) p.pack_uint64(e);
    p.pack_uint64(t.numel);
  }
}

collective::Manifest read_manifest(const msgpack::object& o) {
  std::size_t n = 0;
  const msgpack::object* f = array_of(o, 2, 2, "manifest", &n);
  collective::Manifest m;
  m.method = str_of(f[0], 64, "manifest method");
  const msgpack::object* ts = array_of(f[1], 0, kMaxTensors, "manifest tensors", &n);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t k = 0;
    const msgpack::object* t = array_of(ts[i], 3, 3, "manifest tensor", &k);
    collective::TensorSpec spec;
    spec.name = str_of(t[0], 1024, "tensor name");
    if (spec.name.empty()) bad("empty tensor name in a manifest");
    if (!m.tensors.empty() && !(m.tensors.back().name < spec.name))
      bad("manifest tensors not sorted by name or duplicated: '" + spec.name + "'");
    std::size_t rank = 0;
    const msgpack::object* shape = array_of(t[1], 0, kMaxRank, "tensor shape", &rank);
    std::uint64_t product = 1;
    bool overflow = false, zero = false;
    for (std::size_t d = 0; d < rank; ++d) {
      const std::uint64_t e = uint_of(shape[d], 0xFFFFFFFFu, "shape extent");
      spec.shape.push_back(e);
      zero = zero || e == 0;
      overflow = overflow || __builtin_mul_overflow(product, e, &product);
    }
    if (zero) product = 0;
    spec.numel = uint_of(t[2], 0xFFFFFFFFu, "tensor size");
    if ((overflow && !zero) || product != spec.numel)
      bad("tensor '" + spec.name + "': shape does not hold its size");
    m.tensors.push_back(std::move(spec));
  }
  return m;
}

}  // namespace

// --- ring header -------------------------------------------------------------------

std::vector<std::uint8_t> encode_ring_header(const RingHeader& h) {
  std::vector<std::uint8_t> out;
  out.reserve(64 + h.text.size());
  Sink sink(out);
  Packer p(sink);
  p.pack_array(2 + 11);
  p.pack_uint32(kWireVersion);
  p.pack_uint32(kRingType);
  p.pack_uint8(static_cast<std::uint8_t>(h.kind));
  p.pack_uint64(h.generation);
  p.pack_uint64(h.op);
  p.pack_uint32(h.sender);
  p.pack_uint8(static_cast<std::uint8_t>(h.tag.phase));
  p.pack_uint32(h.tag.segment);
  p.pack_uint32(h.tag.chunk);
  p.pack_uint32(h.tag.hop);
  p.pack_uint32(h.origin);
  p.pack_uint32(h.error_code);
  pack_str(p, h.text);
  return out;
}

RingHeader decode_ring_header(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) bad("ring header of " + std::to_string(size) + " bytes");
  const auto h = unpack(data, size, kRingType, 11, 16, 0);
  const msgpack::object* f = h.get().via.array.ptr + 2;
  RingHeader r;
  const auto kind = uint_of(f[0], 6, "ring message kind");
  if (kind == 0) bad("ring message kind 0");
  r.kind = static_cast<RingKind>(kind);
  r.generation = uint_of(f[1], std::numeric_limits<std::uint64_t>::max(), "generation");
  r.op = uint_of(f[2], std::numeric_limits<std::uint64_t>::max(), "op");
  r.sender = static_cast<std::uint32_t>(uint_of(f[3], 0xFFFFFFFFu, "sender"));
  const auto phase = uint_of(f[4], 4, "phase");
  if (r.kind == RingKind::data && phase == 0) bad("data message without a phase");
  r.tag.phase = static_cast<collective::Phase>(phase);
  r.tag.segment = static_cast<std::uint32_t>(uint_of(f[5], 0xFFFFFFFFu, "segment"));
  r.tag.chunk = static_cast<std::uint32_t>(uint_of(f[6], 0xFFFFFFFFu, "chunk"));
  r.tag.hop = static_cast<std::uint32_t>(uint_of(f[7], 0xFFFFFFFFu, "hop"));
  r.origin = static_cast<std::uint32_t>(uint_of(f[8], 0xFFFFFFFFu, "origin"));
  r.error_code = static_cast<std::uint32_t>(
      uint_of(f[9], static_cast<std::uint64_t>(ErrorCode::internal), "error code"));
  r.text = str_of(f[10], kMaxText, "text");
  return r;
}

// --- summary -----------------------------------------------------------------------

std::vector<std::uint8_t> encode_summary(const collective::NodeSummary& s) {
  std::vector<std::uint8_t> out;
  Sink sink(out);
  Packer p(sink);
  p.pack_array(2 + 6);
  p.pack_uint32(kWireVersion);
  p.pack_uint32(kSummaryType);
  pack_manifest(p, s.manifest);
  pack_str(p, s.error.substr(0, kMaxText));
  p.pack_uint8(s.error_code);
  pack_bin(p, s.stats.data(), s.stats.size() * sizeof(float));
  std::vector<std::uint8_t> nf(s.nonfinite.size() * 12);
  for (std::size_t i = 0; i < s.nonfinite.size(); ++i) {
    std::memcpy(&nf[12 * i], &s.nonfinite[i].tensor, 4);
    std::memcpy(&nf[12 * i + 4], &s.nonfinite[i].index, 4);
    std::memcpy(&nf[12 * i + 8], &s.nonfinite[i].value, 4);
  }
  pack_bin(p, nf.data(), nf.size());
  p.pack_uint64(s.blob_bytes);
  return out;
}

collective::NodeSummary decode_summary(const std::uint8_t* data, std::size_t size) {
  const auto h = unpack(data, size, kSummaryType, 6, kMaxTensors, std::size_t{1} << 30);
  const msgpack::object* f = h.get().via.array.ptr + 2;
  collective::NodeSummary s;
  s.manifest = read_manifest(f[0]);
  s.error = str_of(f[1], kMaxText, "error text");
  s.error_code = static_cast<std::uint8_t>(
      uint_of(f[2], static_cast<std::uint64_t>(ErrorCode::internal), "error code"));
  auto [stats, stats_size] = bin_of(f[3], "statistics");
  if (stats_size % sizeof(float) != 0) bad("statistics of a size that is not whole floats");
  s.stats.resize(stats_size / sizeof(float));
  if (stats_size) std::memcpy(s.stats.data(), stats, stats_size);
  auto [nf, nf_size] = bin_of(f[4], "non-finite entries");
  if (nf_size % 12 != 0) bad("non-finite entries of a size that is not whole entries");
  s.nonfinite.resize(nf_size / 12);
  for (std::size_t i = 0; i < s.nonfinite.size(); ++i) {
    std::memcpy(&s.nonfinite[i].tensor, nf + 12 * i, 4);
    std::memcpy(&s.nonfinite[i].index, nf + 12 * i + 4, 4);
    std::memcpy(&s.nonfinite[i].value, nf + 12 * i + 8, 4);
  }
  s.blob_bytes = uint_of(f[5], std::uint64_t{1} << 40, "payload size");
  return s;
}

// --- payload lists -----------------------------------------------------------------

std::vector<std::uint8_t> encode_payload_list(const std::vector<std::vector<std::uint8_t>>& payloads) {
  std::size_t total = 4 + 4 * payloads.size();
  for (const auto& p : payloads) total += p.size();
  std::vector<std::uint8_t> out(total);
  const auto count = static_cast<std::uint32_t>(payloads.size());
  std::memcpy(out.data(), &count, 4);
  std::size_t at = 4 + 4 * payloads.size();
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    const auto n = static_cast<std::uint32_t>(payloads[i].size());
    std::memcpy(out.data() + 4 + 4 * i, &n, 4);
    if (n) std::memcpy(out.data() + at, payloads[i].data(), n);
    at += n;
  }
  return out;
}

std::vector<Span> decode_payload_list(const std::uint8_t* data, std::size_t size,
                                      std::size_t expected_count) {
  if (size < 4) bad("payload list shorter than its count");
  std::uint32_t count;
  std::memcpy(&count, data, 4);
  if (count != expected_count)
    bad("payload list of " + std::to_string(count) + " payloads, expected " +
        std::to_string(expected_count));
  if ((size - 4) / 4 < count) bad("payload list shorter than its lengths");
  std::vector<Span> spans(count);
  std::size_t at = 4 + 4 * static_cast<std::size_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t n;
    std::memcpy(&n, data + 4 + 4 * i, 4);
    if (n > size - at) bad("payload " + std::to_string(i) + " runs past the end of the list");
    spans[i] = Span{data + at, n};
    at += n;
  }
  if (at != size) bad(std::to_string(size - at) + " bytes after the last payload");
  return spans;
}

// --- IPC -----------------------------------------------------------------------------

std::vector<std::uint8_t> encode_ipc_header(const IpcHeader& h) {
  std::vector<std::uint8_t> out;
  Sink sink(out);
  Packer p(sink);
  p.pack_array(2 + 15);
  p.pack_uint32(kWireVersion);
  p.pack_uint32(kIpcType);
  p.pack_uint8(static_cast<std::uint8_t>(h.kind));
  p.pack_uint64(h.request);
  p.pack_uint32(h.local_rank);
  pack_manifest(p, h.manifest);
  p.pack_uint32(h.world_size);
  p.pack_uint32(h.rank);
  p.pack_uint32(h.local_ranks);
  p.pack_uint32(h.timeout_ms);
  p.pack_uint32(h.heartbeat_ms);
  pack_str(p, h.node);
  p.pack_uint64(h.op);
  p.pack_uint64(h.wire_bytes);
  p.pack_uint64(h.dense_bytes);
  p.pack_uint32(h.error_code);
  pack_str(p, h.text);
  return out;
}

IpcHeader decode_ipc_header(const std::uint8_t* data, std::size_t size) {
  const auto h = unpack(data, size, kIpcType, 15, kMaxTensors, 0);
  const msgpack::object* f = h.get().via.array.ptr + 2;
  IpcHeader r;
  const auto kind = uint_of(f[0], 7, "IPC message kind");
  if (kind == 0) bad("IPC message kind 0");
  r.kind = static_cast<IpcKind>(kind);
  r.request = uint_of(f[1], std::numeric_limits<std::uint64_t>::max(), "request id");
  r.local_rank = static_cast<std::uint32_t>(uint_of(f[2], 0xFFFFFFFFu, "local rank"));
  r.manifest = read_manifest(f[3]);
  r.world_size = static_cast<std::uint32_t>(uint_of(f[4], 0xFFFFFFFFu, "world size"));
  r.rank = static_cast<std::uint32_t>(uint_of(f[5], 0xFFFFFFFFu, "rank"));
  r.local_ranks = static_cast<std::uint32_t>(uint_of(f[6], 0xFFFFFFFFu, "local ranks"));
  r.timeout_ms = static_cast<std::uint32_t>(uint_of(f[7], 0xFFFFFFFFu, "timeout"));
  r.heartbeat_ms = static_cast<std::uint32_t>(uint_of(f[8], 0xFFFFFFFFu, "heartbeat"));
  r.node = str_of(f[9], 256, "node name");
  r.op = uint_of(f[10], std::numeric_limits<std::uint64_t>::max(), "op");
  r.wire_bytes = uint_of(f[11], std::numeric_limits<std::uint64_t>::max(), "wire bytes");
  r.dense_bytes = uint_of(f[12], std::numeric_limits<std::uint64_t>::max(), "dense bytes");
  r.error_code = static_cast<std::uint32_t>(
      uint_of(f[13], static_cast<std::uint64_t>(ErrorCode::internal), "error code"));
  r.text = str_of(f[14], 1 << 16, "text");
  return r;
}

}  // namespace zring::wire
