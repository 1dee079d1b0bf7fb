// tensor_views.cpp - checking TensorViews and ordering them for fusion.
#include "client/tensor_views.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <zring/error.hpp>

namespace zring::client {
namespace {

Error bad(const std::string& name, const std::string& what) {
  return Error(ErrorCode::invalid_argument, "all_reduce_in_place: tensor '" + name + "' " + what);
}

std::size_t checked_numel(const TensorView& v) {
  std::size_t n = 1;
  for (std::size_t extent : v.shape) {
    if (extent != 0 && n > std::numeric_limits<std::uint32_t>::max() / extent)
      throw bad(v.name,
                "has more than 2^32 - 1 values; zring addresses at most that per tensor, "
                "split it");
    n *= extent;
  }
  return n;
}

}  // namespace

std::vector<FusedView> fuse_order(const TensorViews& views) {
  std::vector<FusedView> fused;
  fused.reserve(views.size());
  for (const TensorView& v : views) {
    const std::size_t n = checked_numel(v);
    if (n != 0 && v.data == nullptr) throw bad(v.name, "has no data (a null pointer)");
    fused.push_back({&v, n, 0});
  }
  std::sort(fused.begin(), fused.end(),
            [](const FusedView& a, const FusedView& b) { return a.view->name < b.view->name; });
  std::size_t at = 0;
  for (std::size_t i = 0; i < fused.size(); ++i) {
    if (i > 0 && fused[i].view->name == fused[i - 1].view->name)
      throw bad(fused[i].view->name, "is named twice; every tensor of an op needs its own name");
    fused[i].offset = at;
    at += fused[i].numel;
  }
  return fused;
}

TensorShapes shapes_of(const std::vector<FusedView>& fused) {
  TensorShapes shapes;
  for (const FusedView& f : fused) shapes.emplace(f.view->name, f.view->shape);
  return shapes;
}

}  // namespace zring::client
