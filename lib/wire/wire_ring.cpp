// wire_ring.cpp - what zringd nodes send each other around the ring: ring
// headers, the node summary of every op, and payload lists (layouts in
// wire.hpp).
#include <cstring>
#include <limits>
#include <string>
#include <zring/error.hpp>

#include "wire/msgpack_io.hpp"
#include "wire/wire.hpp"

namespace zring::wire {

using namespace detail;

namespace {

// --- ring header: 19 flat body items -------------------------------------------

constexpr std::size_t kRingItems = 19;
constexpr std::size_t kMaxMembersBytes = kMaxRingNodes / 8;
constexpr std::string_view kRing = "ring header";
constexpr TreeLimits kRingTree{.message = kRing,
                               .max_depth = 1,
                               .max_array = 2 + kRingItems,
                               .max_objects = 2 + kRingItems,
                               .max_str = kMaxRingTextBytes,
                               .max_bin = kMaxMembersBytes};

// --- summary -------------------------------------------------------------------

constexpr std::size_t kSummaryItems = 6;
constexpr std::string_view kSummary = "summary message";
// Statistics can be large (per-block, per rank): bounded like a gradients message.
constexpr std::size_t kMaxSummaryBytes = DecodeLimits{}.max_message_bytes;
constexpr std::size_t kNonFiniteBytes = 12;  // u32 tensor, u32 index, float32 value

std::vector<std::uint8_t> pack_nonfinite(const std::vector<NonFinite>& entries) {
  std::vector<std::uint8_t> bytes(entries.size() * kNonFiniteBytes);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::uint8_t* at = bytes.data() + kNonFiniteBytes * i;
    std::memcpy(at, &entries[i].tensor, 4);
    std::memcpy(at + 4, &entries[i].index, 4);
    std::memcpy(at + 8, &entries[i].value, 4);
  }
  return bytes;
}

std::vector<float> read_stats(const msgpack::object& o) {
  const auto bytes = as_bin(o, Where{kSummary, "stats"});
  if (bytes.size() % sizeof(float) != 0)
    reject(Where{kSummary, "stats"},
           std::to_string(bytes.size()) + " bytes, not a whole number of float32 values");
  std::vector<float> stats(bytes.size() / sizeof(float));
  if (!bytes.empty()) std::memcpy(stats.data(), bytes.data(), bytes.size());
  return stats;
}

std::vector<NonFinite> read_nonfinite(const msgpack::object& o) {
  const auto bytes = as_bin(o, Where{kSummary, "nonfinite"});
  if (bytes.size() % kNonFiniteBytes != 0)
    reject(Where{kSummary, "nonfinite"},
           std::to_string(bytes.size()) + " bytes, not a whole number of 12-byte entries");
  std::vector<NonFinite> entries(bytes.size() / kNonFiniteBytes);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint8_t* at = bytes.data() + kNonFiniteBytes * i;
    std::memcpy(&entries[i].tensor, at, 4);
    std::memcpy(&entries[i].index, at + 4, 4);
    std::memcpy(&entries[i].value, at + 8, 4);
  }
  return entries;
}

// --- payload lists ---------------------------------------------------------------

std::uint32_t list_length(std::size_t n, const char* what) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw Error(ErrorCode::invalid_argument, "wire: cannot encode a payload list with " +
                                                 std::string(what) + " of " + std::to_string(n) +
                                                 " (at most 2^32 - 1)");
  return static_cast<std::uint32_t>(n);
}

std::uint32_t read_u32(const std::uint8_t* at) {
  std::uint32_t v;
  std::memcpy(&v, at, 4);
  return v;
}

}  // namespace

// --- ring header ---------------------------------------------------------------

std::vector<std::uint8_t> encode_ring_header(const RingHeader& h) {
  const std::string_view text = clip_text(h.text, kMaxRingTextBytes);
  std::vector<std::uint8_t> out;
  out.reserve(64 + text.size());
  ByteSink sink(out);
  Packer p(sink);
  pack_header(p, MessageType::ring, kRingItems);
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
  pack_text(p, text, "a ring header text");
  std::vector<std::uint8_t> bitmap;
  for (const std::uint32_t n : h.members) {
    if (n >= kMaxRingNodes)
      throw Error(ErrorCode::invalid_argument, "wire: a ring header cannot name node #" +
                                                   std::to_string(n) + " (at most " +
                                                   std::to_string(kMaxRingNodes) + " nodes)");
    if (bitmap.size() <= n / 8) bitmap.resize(n / 8 + 1);
    bitmap[n / 8] = static_cast<std::uint8_t>(bitmap[n / 8] | (1u << (n % 8)));
  }
  pack_bytes(p, bitmap.data(), bitmap.size(), "a ring header's members");
  p.pack_uint32(h.data_port);
  p.pack_uint64(h.settings.nodes);
  p.pack_uint32(h.settings.local_ranks);
  p.pack_uint32(h.settings.min_nodes);
  p.pack_uint64(h.settings.chunk_bytes);
  p.pack_uint64(h.settings.gather_bytes);
  p.pack_uint64(h.settings.direct_bytes);
  return out;
}

RingHeader decode_ring_header(const std::uint8_t* data, std::size_t size) {
  expect_type(read_header(data, size), MessageType::ring);
  const Tree tree = unpack_tree(data, size, kRingTree);
  const auto f = body(tree.get(), kRingItems, kRing);
  RingHeader h;
  h.kind = static_cast<RingKind>(
      as_kind(f[0], static_cast<std::uint64_t>(RingKind::data_via_zmq), Where{kRing, "kind"}));
  h.generation = as_u64(f[1], Where{kRing, "generation"});
  h.op = as_u64(f[2], Where{kRing, "op"});
  h.sender = as_u32(f[3], Where{kRing, "sender"});
  const std::uint64_t phase =
      as_uint(f[4], static_cast<std::uint64_t>(Phase::stats), Where{kRing, "phase"});
  if (h.kind == RingKind::data && phase == 0)
    reject(Where{kRing, "phase"}, "a data message needs a phase (1..8)");
  h.tag.phase = static_cast<Phase>(phase);
  h.tag.segment = as_u32(f[5], Where{kRing, "segment"});
  h.tag.chunk = as_u32(f[6], Where{kRing, "chunk"});
  h.tag.hop = as_u32(f[7], Where{kRing, "hop"});
  h.origin = as_u32(f[8], Where{kRing, "origin"});
  h.error_code = as_error_code(f[9], Where{kRing, "error_code"});
  h.text = std::string(as_str(f[10], kMaxRingTextBytes, Where{kRing, "text"}));
  const auto bitmap = as_bin(f[11], Where{kRing, "members"});
  if (bitmap.size() > kMaxMembersBytes)
    reject(Where{kRing, "members"}, std::to_string(bitmap.size()) + " bytes (at most " +
                                        std::to_string(kMaxMembersBytes) + ")");
  if (!bitmap.empty() && bitmap.back() == 0)
    reject(Where{kRing, "members"}, "a trailing zero byte");
  for (std::size_t i = 0; i < bitmap.size() * 8; ++i)
    if (bitmap[i / 8] & (1u << (i % 8))) h.members.push_back(static_cast<std::uint32_t>(i));
  h.data_port = static_cast<std::uint32_t>(as_uint(f[12], 65535, Where{kRing, "data_port"}));
  h.settings.nodes = as_u64(f[13], Where{kRing, "nodes"});
  h.settings.local_ranks = as_u32(f[14], Where{kRing, "local_ranks"});
  h.settings.min_nodes = as_u32(f[15], Where{kRing, "min_nodes"});
  h.settings.chunk_bytes = as_u64(f[16], Where{kRing, "chunk_bytes"});
  h.settings.gather_bytes = as_u64(f[17], Where{kRing, "gather_bytes"});
  h.settings.direct_bytes = as_u64(f[18], Where{kRing, "direct_bytes"});
  return h;
}

std::string settings_difference(const RingSettings& here, const RingSettings& there) {
  std::string text;
  const auto differ = [&text](const char* key, std::uint64_t h, std::uint64_t t) {
    if (h == t) return;
    if (!text.empty()) text += "; ";
    text += std::string(key) + " " + std::to_string(t) + " there, " + std::to_string(h) + " here";
  };
  if (here.nodes != there.nodes) text = "another node list (names or addresses)";
  differ("local_ranks", here.local_ranks, there.local_ranks);
  differ("min_nodes", here.min_nodes, there.min_nodes);
  differ("chunk_bytes", here.chunk_bytes, there.chunk_bytes);
  differ("gather_bytes", here.gather_bytes, there.gather_bytes);
  differ("direct_bytes", here.direct_bytes, there.direct_bytes);
  return text;
}

// --- summary -------------------------------------------------------------------

std::vector<std::uint8_t> encode_summary(const NodeSummary& s) {
  std::vector<std::uint8_t> out;
  ByteSink sink(out);
  Packer p(sink);
  pack_header(p, MessageType::summary, kSummaryItems);
  pack_manifest(p, s.manifest);
  // A failure says why; text with nothing to say still fails the op.
  const std::string why =
      s.failure ? (s.failure->text.empty() ? "(no reason given)" : s.failure->text) : "";
  pack_text(p, clip_text(why, kMaxRingTextBytes), "a summary's error text");
  p.pack_uint8(s.failure ? static_cast<std::uint8_t>(s.failure->code) : 0);
  pack_bytes(p, s.stats.data(), s.stats.size() * sizeof(float), "a summary's statistics");
  const std::vector<std::uint8_t> nonfinite = pack_nonfinite(s.nonfinite);
  pack_bytes(p, nonfinite.data(), nonfinite.size(), "a summary's non-finite values");
  p.pack_uint64(s.blob_bytes);
  return out;
}

NodeSummary decode_summary(const std::uint8_t* data, std::size_t size) {
  expect_type(read_header(data, size), MessageType::summary);
  if (size > kMaxSummaryBytes)
    malformed("summary message of " + std::to_string(size) + " bytes (at most " +
              std::to_string(kMaxSummaryBytes) + ")");
  const Tree tree = unpack_tree(
      data, size,
      manifest_message_tree(kSummary, 2 + kSummaryItems, kMaxRingTextBytes, kMaxSummaryBytes));
  const auto f = body(tree.get(), kSummaryItems, kSummary);
  NodeSummary s;
  s.manifest = read_manifest(f[0], kSummary);
  const std::string why(as_str(f[1], kMaxRingTextBytes, Where{kSummary, "error"}));
  const auto code = static_cast<ErrorCode>(as_error_code(f[2], Where{kSummary, "error_code"}));
  if (!why.empty()) s.failure = Status{code, why};
  s.stats = read_stats(f[3]);
  s.nonfinite = read_nonfinite(f[4]);
  s.blob_bytes = as_uint(f[5], kMaxBlobBytes, Where{kSummary, "blob_bytes"});
  return s;
}

// --- payload lists ---------------------------------------------------------------

std::vector<std::uint8_t> encode_payload_list(
    const std::vector<std::vector<std::uint8_t>>& payloads) {
  const std::uint32_t count = list_length(payloads.size(), "a count");
  std::size_t bytes = 0;
  for (const auto& payload : payloads) bytes += payload.size();
  const std::size_t total = payload_list_bytes(payloads.size(), bytes);
  std::vector<std::uint8_t> out(total);
  std::memcpy(out.data(), &count, 4);
  std::size_t at = 4 + 4 * payloads.size();
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    const std::uint32_t n = list_length(payloads[i].size(), "a payload length");
    std::memcpy(out.data() + 4 + 4 * i, &n, 4);
    if (n != 0) std::memcpy(out.data() + at, payloads[i].data(), n);
    at += n;
  }
  return out;
}

std::vector<Span> decode_payload_list(const std::uint8_t* data, std::size_t size,
                                      std::size_t expected_count) {
  if (data == nullptr || size < 4)
    malformed("payload list: " + std::to_string(size) + " bytes, shorter than its 4-byte count");
  const std::uint32_t count = read_u32(data);
  if (count != expected_count)
    malformed("payload list: " + std::to_string(count) + " payloads, expected " +
              std::to_string(expected_count));
  if ((size - 4) / 4 < count)
    malformed("payload list: " + std::to_string(size) + " bytes, shorter than its " +
              std::to_string(count) + " lengths");
  std::vector<Span> spans(count);
  std::size_t at = 4 + 4 * static_cast<std::size_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t n = read_u32(data + 4 + 4 * i);
    if (n > size - at)
      malformed("payload list: payload " + std::to_string(i) + " of " + std::to_string(n) +
                " bytes runs past the end of the list");
    spans[i] = Span{data + at, n};
    at += n;
  }
  if (at != size)
    malformed("payload list: " + std::to_string(size - at) + " bytes after the last payload");
  return spans;
}

}  // namespace zring::wire
