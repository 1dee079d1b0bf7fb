// msgpack_io.hpp - the msgpack writer and the validating reader shared by the
// message files of lib/wire (wire.cpp, wire_ring.cpp, wire_ipc.cpp, wire_status.cpp,
// wire_manifest.cpp). Internal to lib/wire: nothing outside this folder
// includes it, so msgpack stays here.
//
// Decoding untrusted bytes goes through three steps, each bounding the next:
//   1. read_header: walks only [version, type] (the version is judged before
//      anything else, so other protocol versions get unsupported_version);
//   2. unpack_tree first scans the whole msgpack tree with a visitor that
//      builds nothing, checking depth, array, string and binary lengths and
//      the total number of objects against the message type's TreeLimits.
//      msgpack-c allocates every array for the element count it claims,
//      before reading the elements; this scan makes those claims safe;
//   3. unpack_tree then lets msgpack-c build the object tree (the same limits
//      again, as a second belt), with strings and binaries pointing into the
//      caller's buffer, and the type's decoder reads it through the checked
//      accessors below (as_array, as_uint, as_str, as_bin, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <msgpack.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/messages.hpp"
#include "wire/wire.hpp"

namespace zring::wire::detail {

// --- errors ------------------------------------------------------------------

// At most 64 characters of untrusted text, control bytes replaced, so an
// error message (and the log it lands in) stays readable.
[[nodiscard]] std::string printable(std::string_view text);

// Throws zring::Error(malformed_message, "wire: " + what).
[[noreturn]] void malformed(const std::string& what);

// Where a value sits in a message; formatted only when a check fails.
struct Where {
  static constexpr std::size_t kWhole = std::numeric_limits<std::size_t>::max();
  std::string_view context;  // "gradients message, tensor 'w'"
  std::string_view field;    // "shape"
  std::size_t index = kWhole;
};

// Throws malformed_message: "<context>: <field>[<index>]: <problem>".
[[noreturn]] void reject(const Where& where, const std::string& problem);

// --- writing -----------------------------------------------------------------

// The msgpack packer writes into any type with write(const char*, size_t).
class ByteSink {
 public:
  explicit ByteSink(std::vector<std::uint8_t>& out) : out_(out) {}
  void write(const char* data, std::size_t size) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(data);
    out_.insert(out_.end(), bytes, bytes + size);
  }

 private:
  std::vector<std::uint8_t>& out_;
};

using Packer = msgpack::packer<ByteSink>;

// n as a msgpack length (32 bits); throws invalid_argument naming `what`
// beyond that.
[[nodiscard]] std::uint32_t frame_length(std::size_t n, std::string_view what);

// The root array of body_items + 2 items and its [version, type].
void pack_header(Packer& p, MessageType type, std::size_t body_items);
void pack_text(Packer& p, std::string_view text, std::string_view what);
void pack_bytes(Packer& p, const void* data, std::size_t size, std::string_view what);

// text cut to at most max bytes, never inside a UTF-8 sequence; for
// human-readable texts that a decoder bounds.
[[nodiscard]] std::string_view clip_text(std::string_view text, std::size_t max);

// --- reading -----------------------------------------------------------------

// Step 1: the [version, type] of a message (see peek_message_type).
[[nodiscard]] MessageType read_header(const std::uint8_t* data, std::size_t size);
// Throws malformed_message unless got == want, naming both types.
void expect_type(MessageType got, MessageType want);

// The shape of one message type's msgpack tree.
struct TreeLimits {
  std::string_view message;     // "gradients message", for error messages
  std::size_t max_depth = 0;    // nested arrays, the root included
  std::size_t max_array = 0;    // items of any one array
  std::size_t max_objects = 0;  // items claimed by all arrays together
  std::size_t max_str = 0;      // bytes of any one string
  std::size_t max_bin = 0;      // bytes of any one binary
};

// An unpacked message. Its objects live in a zone that the thread takes
// again for its next message once this tree is gone, so a thread that
// decodes message after message (the ring thread: every ring header and
// summary) allocates nothing for their trees.
class Tree {
 public:
  Tree(const msgpack::object& root, std::unique_ptr<msgpack::zone> zone) noexcept
      : root_(root), zone_(std::move(zone)) {}
  Tree(Tree&&) noexcept = default;
  Tree& operator=(Tree&&) = delete;
  ~Tree();
  [[nodiscard]] const msgpack::object& get() const noexcept { return root_; }

 private:
  msgpack::object root_;
  std::unique_ptr<msgpack::zone> zone_;
};

// Steps 2 and 3: scans, then unpacks, the whole message (no trailing bytes).
// Strings and binaries of the tree point into data, which must outlive it.
[[nodiscard]] Tree unpack_tree(const std::uint8_t* data, std::size_t size,
                               const TreeLimits& limits);

// Checked accessors of an unpacked object; each throws malformed_message
// naming `where` when the object is of another type or beyond the bounds.
[[nodiscard]] std::span<const msgpack::object> as_array(const msgpack::object& o, std::size_t min,
                                                        std::size_t max, const Where& where);
[[nodiscard]] std::uint64_t as_uint(const msgpack::object& o, std::uint64_t max,
                                    const Where& where);
[[nodiscard]] std::uint64_t as_u64(const msgpack::object& o, const Where& where);
[[nodiscard]] std::uint32_t as_u32(const msgpack::object& o, const Where& where);
[[nodiscard]] std::string_view as_str(const msgpack::object& o, std::size_t max,
                                      const Where& where);
[[nodiscard]] std::span<const std::uint8_t> as_bin(const msgpack::object& o, const Where& where);
// The number of a kind enum whose values run 1..last.
[[nodiscard]] std::uint64_t as_kind(const msgpack::object& o, std::uint64_t last,
                                    const Where& where);
// A zring::ErrorCode (one of kErrorCodes), as its number.
[[nodiscard]] std::uint32_t as_error_code(const msgpack::object& o, const Where& where);

// The body of a message: the root array's items after [version, type];
// exactly `items` of them.
[[nodiscard]] std::span<const msgpack::object> body(const msgpack::object& root, std::size_t items,
                                                    std::string_view context);

// --- parts several messages share (wire_manifest.cpp) ---------------------------

// A tensor name: a string of 1..max bytes.
[[nodiscard]] std::string_view read_tensor_name(const msgpack::object& o, std::size_t max,
                                                std::string_view context);

// A shape: an array of at most max_rank extents, each at most max_extent,
// holding exactly numel elements (a zero extent makes the product 0 whatever
// the others are; a product that overflows 64 bits never matches). A mismatch
// names numel_field, the field numel was read from.
[[nodiscard]] std::vector<std::uint64_t> read_shape(const msgpack::object& o, std::uint64_t numel,
                                                    std::size_t max_rank, std::uint64_t max_extent,
                                                    std::string_view context,
                                                    std::string_view numel_field);

void pack_manifest(Packer& p, const Manifest& manifest);
// Checks every rule of the manifest layout in wire.hpp.
[[nodiscard]] Manifest read_manifest(const msgpack::object& o, std::string_view context);

// --- the status report (wire_status.cpp) ----------------------------------------

void pack_daemon_status(Packer& p, const DaemonStatus& status);
// Checks every field of the layout in wire.hpp.
[[nodiscard]] DaemonStatus read_daemon_status(const msgpack::object& o, std::string_view context);

// The TreeLimits of a message whose root holds root_items items (version and
// type included), one of them a manifest, its other strings at most max_text
// bytes, its binaries at most max_bin bytes.
[[nodiscard]] TreeLimits manifest_message_tree(std::string_view message, std::size_t root_items,
                                               std::size_t max_text, std::size_t max_bin);

}  // namespace zring::wire::detail
