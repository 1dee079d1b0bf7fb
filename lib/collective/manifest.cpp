#include "collective/manifest.hpp"

#include <algorithm>

namespace zring::collective {
std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text + "]";
}

namespace {

std::string op_text(const Manifest& m) {
  return m.kind == OpKind::broadcast ? "a broadcast from rank " + std::to_string(m.root)
                                     : std::string("an all-reduce");
}

}  // namespace

std::string manifest_difference(const Manifest& a, const std::string& a_who, const Manifest& b,
                                const std::string& b_who) {
  if (a.kind != b.kind || a.root != b.root)
    return op_text(a) + " on " + a_who + " but " + op_text(b) + " on " + b_who;
  if (a.method != b.method) {
    return "method '" + a.method + "' on " + a_who + " but '" + b.method + "' on " + b_who;
  }
  const std::size_t common = std::min(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < common; ++i) {
    const TensorSpec& x = a.tensors[i];
    const TensorSpec& y = b.tensors[i];
    if (x.name != y.name) {
      // Names are sorted: the smaller one is missing on the other side.
      const bool a_has = x.name < y.name;
      const std::string& name = a_has ? x.name : y.name;
      return "tensor '" + name + "' is submitted by " + (a_has ? a_who : b_who) + " but not by " +
             (a_has ? b_who : a_who);
    }
    if (x.numel != y.numel || x.shape != y.shape) {
      return "tensor '" + x.name + "' has shape " + shape_text(x.shape) + " (" +
             std::to_string(x.numel) + " elements) on " + a_who + " but " + shape_text(y.shape) +
             " (" + std::to_string(y.numel) + " elements) on " + b_who;
    }
  }
  if (a.tensors.size() != b.tensors.size()) {
    const bool a_longer = a.tensors.size() > b.tensors.size();
    const std::string& name = (a_longer ? a.tensors : b.tensors)[common].name;
    return "tensor '" + name + "' is submitted by " + (a_longer ? a_who : b_who) + " but not by " +
           (a_longer ? b_who : a_who);
  }
  return "";
}

}  // namespace zring::collective
