// wire_manifest.cpp - the parts several messages share: tensor names, shapes
// (gradients, manifests) and manifests (summaries, IPC submits).
#include <algorithm>
#include <string>

#include "wire/msgpack_io.hpp"

namespace zring::wire::detail {
namespace {

constexpr std::size_t kManifestItems = 4;                  // method, tensors, kind, root
constexpr std::size_t kTensorItems = 3;                    // name, shape, numel
constexpr std::uint64_t kMaxManifestExtent = 0xFFFFFFFFu;  // indices travel as uint32

std::string format_shape(const std::vector<std::uint64_t>& shape) {
  std::string text;
  for (std::uint64_t extent : shape) text += (text.empty() ? "" : "x") + std::to_string(extent);
  return "[" + text + "]";
}

}  // namespace

std::string_view read_tensor_name(const msgpack::object& o, std::size_t max,
                                  std::string_view context) {
  const std::string_view name = as_str(o, max, Where{context, "name"});
  if (name.empty()) reject(Where{context, "name"}, "empty tensor name");
  return name;
}

std::vector<std::uint64_t> read_shape(const msgpack::object& o, std::uint64_t numel,
                                      std::size_t max_rank, std::uint64_t max_extent,
                                      std::string_view context, std::string_view numel_field) {
  const auto extents = as_array(o, 0, max_rank, Where{context, "shape"});
  std::vector<std::uint64_t> shape;
  shape.reserve(extents.size());
  std::uint64_t product = 1;
  bool overflow = false;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    shape.push_back(as_uint(extents[i], max_extent, Where{context, "shape", i}));
    overflow = overflow || __builtin_mul_overflow(product, shape.back(), &product);
  }
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  if (empty) product = 0;
  if ((overflow && !empty) || product != numel)
    reject(Where{context, "shape"},
           format_shape(shape) +
               (overflow && !empty ? " overflows 64 bits"
                                   : " holds " + std::to_string(product) + " elements") +
               " but " + std::string(numel_field) + " is " + std::to_string(numel));
  return shape;
}

void pack_manifest(Packer& p, const Manifest& manifest) {
  p.pack_array(kManifestItems);
  pack_text(p, manifest.method, "a manifest method");
  p.pack_array(frame_length(manifest.tensors.size(), "a manifest's tensor count"));
  for (const TensorSpec& t : manifest.tensors) {
    p.pack_array(kTensorItems);
    pack_text(p, t.name, "a tensor name");
    p.pack_array(frame_length(t.shape.size(), "a shape"));
    for (std::uint64_t extent : t.shape) p.pack_uint64(extent);
    p.pack_uint64(t.numel);
  }
  p.pack_uint8(static_cast<std::uint8_t>(manifest.kind));
  p.pack_uint32(manifest.root);
}

Manifest read_manifest(const msgpack::object& o, std::string_view context) {
  const std::string where = std::string(context) + ", manifest";
  const auto fields = as_array(o, kManifestItems, kManifestItems, Where{context, "manifest"});
  Manifest m;
  m.method = std::string(as_str(fields[0], kMaxMethodBytes, Where{where, "method"}));
  const auto tensors = as_array(fields[1], 0, kMaxManifestTensors, Where{where, "tensors"});
  m.tensors.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::string tensor = where + ", tensor #" + std::to_string(i);
    const auto t = as_array(tensors[i], kTensorItems, kTensorItems, Where{tensor, ""});
    TensorSpec spec;
    spec.name = std::string(read_tensor_name(t[0], kMaxManifestNameBytes, tensor));
    tensor += " '" + printable(spec.name) + "'";
    if (!m.tensors.empty() && !(m.tensors.back().name < spec.name))
      reject(Where{tensor, "name"}, m.tensors.back().name == spec.name
                                        ? std::string("duplicate tensor name")
                                        : "after '" + printable(m.tensors.back().name) +
                                              "' (a manifest is sorted by name)");
    spec.numel = as_uint(t[2], kMaxManifestExtent, Where{tensor, "numel"});
    spec.shape =
        read_shape(t[1], spec.numel, kMaxManifestRank, kMaxManifestExtent, tensor, "numel");
    m.tensors.push_back(std::move(spec));
  }
  m.kind = static_cast<OpKind>(
      as_kind(fields[2], static_cast<std::uint64_t>(OpKind::broadcast), Where{where, "kind"}));
  m.root = as_u32(fields[3], Where{where, "root"});
  if (m.kind != OpKind::broadcast && m.root != 0)
    reject(Where{where, "root"},
           "root " + std::to_string(m.root) + " in an all-reduce (only a broadcast has a root)");
  return m;
}

TreeLimits manifest_message_tree(std::string_view message, std::size_t root_items,
                                 std::size_t max_text, std::size_t max_bin) {
  TreeLimits tree;
  tree.message = message;
  tree.max_depth = 5;  // root, manifest, tensors, tensor, shape
  tree.max_array = std::max({root_items, kMaxManifestTensors, kTensorItems, kMaxManifestRank});
  // The root's items, the manifest's, then per tensor its slot in the list,
  // its items and its extents.
  tree.max_objects =
      root_items + kManifestItems + kMaxManifestTensors * (1 + kTensorItems + kMaxManifestRank);
  tree.max_str = std::max({max_text, kMaxManifestNameBytes, kMaxMethodBytes});
  tree.max_bin = max_bin;
  return tree;
}

}  // namespace zring::wire::detail
