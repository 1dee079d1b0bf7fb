// msgpack_io.cpp - the msgpack writer and validating reader of lib/wire (see
// msgpack_io.hpp for the three steps of decoding).
#include "wire/msgpack_io.hpp"

#include <cctype>
#include <limits>
#include <optional>
#include <zring/error.hpp>

namespace zring::wire::detail {

// --- errors ------------------------------------------------------------------

std::string printable(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (char c : text.substr(0, kShown))
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (text.size() > kShown) out += "...";
  return out;
}

void malformed(const std::string& what) {
  throw Error(ErrorCode::malformed_message, "wire: " + what);
}

void reject(const Where& where, const std::string& problem) {
  std::string text(where.context);
  if (!where.field.empty()) text += std::string(": ") + std::string(where.field);
  if (where.index != Where::kWhole) text += "[" + std::to_string(where.index) + "]";
  malformed(text + ": " + problem);
}

// --- writing -----------------------------------------------------------------

std::uint32_t frame_length(std::size_t n, std::string_view what) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw Error(ErrorCode::invalid_argument, "wire: cannot encode " + std::string(what) + " of " +
                                                 std::to_string(n) +
                                                 " (msgpack frames at most 2^32 - 1)");
  return static_cast<std::uint32_t>(n);
}

void pack_header(Packer& p, MessageType type, std::size_t body_items) {
  p.pack_array(frame_length(2 + body_items, "a message body"));
  p.pack_uint32(kWireVersion);
  p.pack_uint32(static_cast<std::uint32_t>(type));
}

void pack_text(Packer& p, std::string_view text, std::string_view what) {
  const std::uint32_t n = frame_length(text.size(), what);
  p.pack_str(n);
  p.pack_str_body(text.data(), n);
}

void pack_bytes(Packer& p, const void* data, std::size_t size, std::string_view what) {
  const std::uint32_t n = frame_length(size, what);
  p.pack_bin(n);
  p.pack_bin_body(static_cast<const char*>(data), n);
}

std::string_view clip_text(std::string_view text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t n = max;
  // Step back over continuation bytes (10xxxxxx) to the start of the sequence.
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// --- reading: 1. the header --------------------------------------------------

namespace {

// Reads the root array's first two items, [version, type], and stops there.
class HeaderScan : public msgpack::null_visitor {
 public:
  bool start_array(std::uint32_t items) {
    if (depth_ > 0) return other();
    depth_ = 1;
    return items > 0 || fail("a message needs [version, type, ...]");
  }
  bool visit_positive_integer(std::uint64_t v) {
    if (depth_ == 0) return not_an_array();
    fields_[count_++] = v;
    return count_ < 2;  // stop the parse once version and type are read
  }
  bool end_array() {
    if (count_ < 2) return fail("a message needs [version, type, ...]");
    return true;
  }
  // Every other kind of object where version or type should be:
  bool visit_nil() { return other(); }
  bool visit_boolean(bool) { return other(); }
  bool visit_negative_integer(std::int64_t) { return other(); }
  bool visit_float32(float) { return other(); }
  bool visit_float64(double) { return other(); }
  bool visit_str(const char*, std::uint32_t) { return other(); }
  bool visit_bin(const char*, std::uint32_t) { return other(); }
  bool visit_ext(const char*, std::uint32_t) { return other(); }
  bool start_map(std::uint32_t) { return other(); }
  void parse_error(std::size_t, std::size_t offset) {
    problem_ = "not msgpack (invalid byte at offset " + std::to_string(offset) + ")";
  }
  void insufficient_bytes(std::size_t, std::size_t) { problem_ = "truncated message header"; }

  [[nodiscard]] std::optional<std::uint64_t> version() const {
    return count_ >= 1 ? std::optional(fields_[0]) : std::nullopt;
  }
  [[nodiscard]] std::uint64_t type() const { return fields_[1]; }
  [[nodiscard]] bool complete() const { return count_ == 2; }
  [[nodiscard]] const std::string& problem() const { return problem_; }

 private:
  bool fail(std::string problem) {
    if (problem_.empty()) problem_ = std::move(problem);
    return false;
  }
  bool not_an_array() { return fail("a message must be a msgpack array [version, type, ...]"); }
  bool other() {
    return depth_ == 0 ? not_an_array() : fail("the version and type must be unsigned integers");
  }

  std::size_t depth_ = 0;
  std::size_t count_ = 0;
  std::uint64_t fields_[2] = {0, 0};
  std::string problem_;
};

// Message types are numbered 1..5 without gaps.
bool is_known(std::uint64_t type) {
  return type >= static_cast<std::uint64_t>(MessageType::gradients) &&
         type <= static_cast<std::uint64_t>(MessageType::trace);
}

}  // namespace

MessageType read_header(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size == 0) malformed("empty message");
  HeaderScan scan;
  std::size_t offset = 0;
  msgpack::parse(reinterpret_cast<const char*>(data), size, offset, scan);
  if (scan.version() && *scan.version() != kWireVersion)
    throw Error(ErrorCode::unsupported_version,
                "wire: message of protocol version " + std::to_string(*scan.version()) +
                    ", this zring speaks version " + std::to_string(kWireVersion) +
                    "; run the same zring release on every node and client");
  if (!scan.complete())
    malformed(scan.problem().empty() ? "a message needs [version, type, ...]" : scan.problem());
  if (!is_known(scan.type())) malformed("unknown message type " + std::to_string(scan.type()));
  return static_cast<MessageType>(scan.type());
}

namespace {

// "2 (ring header)"
std::string describe(MessageType type) {
  const char* name = "?";
  switch (type) {
    case MessageType::gradients:
      name = "gradients";
      break;
    case MessageType::ring:
      name = "ring header";
      break;
    case MessageType::summary:
      name = "summary";
      break;
    case MessageType::ipc:
      name = "IPC message";
      break;
    case MessageType::trace:
      name = "trace";
      break;
  }
  return std::to_string(static_cast<std::uint32_t>(type)) + " (" + name + ")";
}

}  // namespace

void expect_type(MessageType got, MessageType want) {
  if (got != want)
    malformed("expected a message of type " + describe(want) + ", got type " + describe(got));
}

// --- reading: 2. the tree scan -----------------------------------------------

namespace {

// Walks a whole message without building it; throws on the first claim
// beyond limits, before msgpack-c would allocate for it.
class TreeScan : public msgpack::null_visitor {
 public:
  explicit TreeScan(const TreeLimits& limits) : limits_(limits) {}

  bool start_array(std::uint32_t items) {
    if (depth_ >= limits_.max_depth)
      fail("arrays nested deeper than " + std::to_string(limits_.max_depth));
    if (items > limits_.max_array)
      fail("an array claims " + std::to_string(items) + " items (at most " +
           std::to_string(limits_.max_array) + ")");
    objects_ += items;
    if (objects_ > limits_.max_objects)
      fail("the arrays claim more than " + std::to_string(limits_.max_objects) +
           " items together, more than any valid message of these limits");
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool visit_str(const char*, std::uint32_t size) {
    return bounded(size, limits_.max_str, "string");
  }
  bool visit_bin(const char*, std::uint32_t size) {
    return bounded(size, limits_.max_bin, "binary");
  }
  bool visit_ext(const char*, std::uint32_t) { fail("unexpected msgpack ext object"); }
  bool start_map(std::uint32_t) { fail("unexpected msgpack map (messages are arrays)"); }
  void parse_error(std::size_t, std::size_t offset) {
    fail("not msgpack (invalid byte at offset " + std::to_string(offset) + ")");
  }
  void insufficient_bytes(std::size_t, std::size_t) {
    fail("truncated (an object runs past the end of the message)");
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    malformed(std::string(limits_.message) + ": " + problem);
  }
  bool bounded(std::size_t size, std::size_t max, const char* kind) const {
    if (size > max)
      fail(std::string("a ") + kind + " of " + std::to_string(size) + " bytes (at most " +
           std::to_string(max) + ")");
    return true;
  }

  TreeLimits limits_;
  std::size_t depth_ = 0;
  std::size_t objects_ = 0;
};

void scan_tree(const char* data, std::size_t size, const TreeLimits& limits) {
  TreeScan scan(limits);
  std::size_t offset = 0;
  if (!msgpack::parse(data, size, offset, scan))
    malformed(std::string(limits.message) + ": does not parse");
  if (offset != size)
    malformed(std::string(limits.message) + ": " + std::to_string(size - offset) +
              " trailing bytes after the message");
}

// Strings and binaries keep pointing into the caller's buffer (zero-copy).
bool reference_in_place(msgpack::type::object_type, std::size_t, void*) { return true; }

}  // namespace

// --- reading: 3. the object tree ---------------------------------------------

namespace {

// The zones of this thread's trees that are gone, cleared: each keeps its
// first chunk (msgpack-c's default, 8 KiB), so a few cost little memory
// and a message whose tree fits takes no allocation.
constexpr std::size_t kSpareZones = 4;
std::vector<std::unique_ptr<msgpack::zone>>& spare_zones() {
  thread_local std::vector<std::unique_ptr<msgpack::zone>> zones;
  return zones;
}

}  // namespace

Tree::~Tree() {
  if (!zone_) return;  // moved from
  zone_->clear();
  std::vector<std::unique_ptr<msgpack::zone>>& spare = spare_zones();
  if (spare.size() < kSpareZones) spare.push_back(std::move(zone_));
}

Tree unpack_tree(const std::uint8_t* data, std::size_t size, const TreeLimits& limits) {
  const auto* bytes = reinterpret_cast<const char*>(data);
  scan_tree(bytes, size, limits);
  const msgpack::unpack_limit belt(limits.max_array, 0, limits.max_str, limits.max_bin, 0,
                                   limits.max_depth);
  std::vector<std::unique_ptr<msgpack::zone>>& spare = spare_zones();
  std::unique_ptr<msgpack::zone> zone;
  if (spare.empty()) {
    zone = std::make_unique<msgpack::zone>();
  } else {
    zone = std::move(spare.back());
    spare.pop_back();
  }
  try {
    std::size_t offset = 0;
    const msgpack::object root =
        msgpack::unpack(*zone, bytes, size, offset, reference_in_place, nullptr, belt);
    return Tree(root, std::move(zone));
  } catch (const msgpack::unpack_error& e) {
    malformed(std::string(limits.message) + ": msgpack: " + e.what());
  }
}

std::span<const msgpack::object> as_array(const msgpack::object& o, std::size_t min,
                                          std::size_t max, const Where& where) {
  if (o.type != msgpack::type::ARRAY) reject(where, "not an array");
  const std::size_t n = o.via.array.size;
  if (n < min || n > max) {
    const std::string expected =
        min == max ? std::to_string(min) : std::to_string(min) + ".." + std::to_string(max);
    reject(where, "array of " + std::to_string(n) + " items, expected " + expected);
  }
  return {o.via.array.ptr, n};
}

std::uint64_t as_uint(const msgpack::object& o, std::uint64_t max, const Where& where) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) reject(where, "not an unsigned integer");
  if (o.via.u64 > max)
    reject(where, std::to_string(o.via.u64) + " exceeds the limit " + std::to_string(max));
  return o.via.u64;
}

std::uint64_t as_u64(const msgpack::object& o, const Where& where) {
  return as_uint(o, std::numeric_limits<std::uint64_t>::max(), where);
}

std::uint32_t as_u32(const msgpack::object& o, const Where& where) {
  return static_cast<std::uint32_t>(as_uint(o, std::numeric_limits<std::uint32_t>::max(), where));
}

std::string_view as_str(const msgpack::object& o, std::size_t max, const Where& where) {
  if (o.type != msgpack::type::STR) reject(where, "not a string");
  if (o.via.str.size > max)
    reject(where, "string of " + std::to_string(o.via.str.size) + " bytes (at most " +
                      std::to_string(max) + ")");
  return {o.via.str.ptr, o.via.str.size};
}

std::span<const std::uint8_t> as_bin(const msgpack::object& o, const Where& where) {
  if (o.type != msgpack::type::BIN) reject(where, "not a binary");
  if (o.via.bin.size == 0) return {};
  return {reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr), o.via.bin.size};
}

std::uint64_t as_kind(const msgpack::object& o, std::uint64_t last, const Where& where) {
  const std::uint64_t kind = as_uint(o, last, where);
  if (kind == 0) reject(where, "0 is not a kind (kinds run 1.." + std::to_string(last) + ")");
  return kind;
}

std::uint32_t as_error_code(const msgpack::object& o, const Where& where) {
  const std::uint64_t number = as_uint(o, std::numeric_limits<std::uint32_t>::max(), where);
  if (!is_error_code(number))
    reject(where,
           std::to_string(number) + " is not a zring error code (docs/errors.md lists them)");
  return static_cast<std::uint32_t>(number);
}

std::span<const msgpack::object> body(const msgpack::object& root, std::size_t items,
                                      std::string_view context) {
  return as_array(root, 2 + items, 2 + items, Where{context, ""}).subspan(2);
}

}  // namespace zring::wire::detail
