// wire.cpp - the gradients message, and the header every message starts with.
// The reader and writer machinery is in msgpack_io.cpp; ring and IPC messages
// are in wire_ring.cpp and wire_ipc.cpp.
#include "wire/wire.hpp"

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <zring/error.hpp>

#include "codec/codec.hpp"
#include "wire/msgpack_io.hpp"

namespace zring::wire {

using namespace detail;

namespace {

constexpr std::size_t kEntryItems = 5;  // name, method, shape, original_size, payload

TreeLimits gradient_tree(const DecodeLimits& limits) {
  TreeLimits tree;
  tree.message = "gradients message";
  tree.max_depth = 4;  // root, entries, entry, shape
  tree.max_array = std::max({limits.max_tensors, kEntryItems, limits.max_rank, std::size_t{3}});
  // root (3 items) + the tensors array + per entry its 5 items and its shape;
  // saturating, so absurd limits cannot wrap into tiny ones.
  const std::size_t per_tensor = 1 + kEntryItems + limits.max_rank;
  if (per_tensor < limits.max_rank ||
      __builtin_mul_overflow(limits.max_tensors, per_tensor, &tree.max_objects) ||
      __builtin_add_overflow(tree.max_objects, std::size_t{3}, &tree.max_objects))
    tree.max_objects = std::numeric_limits<std::size_t>::max();
  tree.max_str = std::max(limits.max_name_bytes, kMaxMethodBytes);
  tree.max_bin = std::min<std::size_t>(limits.max_message_bytes, 0xFFFFFFFFu);
  return tree;
}

void pack_gradient(Packer& p, const std::string& name, const CompressedGradient& g) {
  if (g.method.has_error_feedback())
    throw Error(ErrorCode::invalid_argument,
                "wire: tensor '" + name + "' carries method " + g.method.to_string() +
                    "; a compressed gradient's method never has error feedback");
  p.pack_array(kEntryItems);
  pack_text(p, name, "a tensor name");
  pack_text(p, g.method.to_string(), "a method");
  p.pack_array(frame_length(g.shape.size(), "a shape"));
  for (std::size_t extent : g.shape) p.pack_uint64(extent);
  p.pack_uint64(g.original_size);
  pack_bytes(p, g.payload.data(), g.payload.size(), "a payload");
}

CompressionMethod read_method(const msgpack::object& o, const Where& where) {
  const std::string_view text = as_str(o, kMaxMethodBytes, where);
  CompressionMethod method;
  try {
    method = CompressionMethod::parse(text);
  } catch (const Error& e) {
    reject(where, "'" + printable(text) + "' is not a compression method (" + e.what() + ")");
  }
  if (method.has_error_feedback())
    reject(where, "'" + printable(text) + "' has error feedback, which never travels");
  return method;
}

// Rebuilds the view from the payload; the codec validates every byte.
void decode_payload(CompressedGradient& g, std::string_view context) {
  try {
    codec::make_codec(g.method)->decode(g);
  } catch (const Error& e) {
    reject(Where{context, "payload"}, e.what());
  }
}

// elements_left: what max_total_elements still allows; checked before the
// codec allocates the view.
CompressedGradient read_gradient(std::span<const msgpack::object> entry, const DecodeLimits& limits,
                                 std::size_t& elements_left, std::string_view context) {
  CompressedGradient g;
  g.method = read_method(entry[1], Where{context, "method"});
  g.original_size = as_uint(entry[3], limits.max_elements, Where{context, "original_size"});
  if (g.original_size > elements_left)
    reject(Where{context, "original_size"}, "the tensors of the message hold more than " +
                                                std::to_string(limits.max_total_elements) +
                                                " elements together");
  elements_left -= g.original_size;
  const std::vector<std::uint64_t> shape = read_shape(
      entry[2], g.original_size, limits.max_rank, limits.max_elements, context, "original_size");
  g.shape.assign(shape.begin(), shape.end());
  const auto payload = as_bin(entry[4], Where{context, "payload"});
  g.payload.assign(payload.begin(), payload.end());
  decode_payload(g, context);
  return g;
}

}  // namespace

MessageType peek_message_type(const std::uint8_t* data, std::size_t size) {
  return read_header(data, size);
}

std::vector<std::uint8_t> encode_gradients(const CompressedMap& gradients) {
  std::size_t estimate = 16;
  for (const auto& [name, g] : gradients) estimate += 64 + name.size() + g.payload.size();
  std::vector<std::uint8_t> out;
  out.reserve(estimate);
  ByteSink sink(out);
  Packer p(sink);
  pack_header(p, MessageType::gradients, 1);
  p.pack_array(frame_length(gradients.size(), "a tensor count"));
  for (const auto& [name, g] : gradients) pack_gradient(p, name, g);
  return out;
}

CompressedMap decode_gradients(const std::uint8_t* data, std::size_t size,
                               const DecodeLimits& limits) {
  expect_type(read_header(data, size), MessageType::gradients);
  if (size > limits.max_message_bytes)
    malformed("gradients message of " + std::to_string(size) + " bytes (at most " +
              std::to_string(limits.max_message_bytes) + ")");
  const Tree tree = unpack_tree(data, size, gradient_tree(limits));
  const auto entries = as_array(body(tree.get(), 1, "gradients message")[0], 0, limits.max_tensors,
                                Where{"gradients message", "tensors"});
  CompressedMap out;
  std::size_t elements_left = limits.max_total_elements;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string context = "gradients message, tensor #" + std::to_string(i);
    const auto entry = as_array(entries[i], kEntryItems, kEntryItems, Where{context, ""});
    std::string name(read_tensor_name(entry[0], limits.max_name_bytes, context));
    context += " '" + printable(name) + "'";
    if (out.count(name) != 0) reject(Where{context, "name"}, "duplicate tensor name");
    CompressedGradient g = read_gradient(entry, limits, elements_left, context);
    out.emplace_hint(out.end(), std::move(name), std::move(g));
  }
  return out;
}

}  // namespace zring::wire
