// tensor_views.cpp - checking TensorViews and ordering them for fusion.
#include "client/tensor_views.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <zring/error.hpp>

#include "collective/manifest.hpp"

namespace zring::client {
namespace {

Error bad(const char* op, const std::string& name, const std::string& what) {
  return Error(ErrorCode::invalid_argument, std::string(op) + ": tensor '" + name + "' " + what);
}

std::size_t checked_numel(const TensorView& v, const char* op) {
  std::size_t n = 1;
  for (std::size_t extent : v.shape) {
    if (extent != 0 && n > std::numeric_limits<std::uint32_t>::max() / extent)
      throw bad(op, v.name,
                "has more than 2^32 - 1 values; zring addresses at most that per tensor, "
                "split it");
    n *= extent;
  }
  return n;
}

}  // namespace

std::vector<FusedView> fuse_order(const TensorViews& views, const char* op) {
  std::vector<FusedView> fused;
  fused.reserve(views.size());
  for (const TensorView& v : views) {
    const std::size_t n = checked_numel(v, op);
    if (n != 0 && v.data == nullptr) throw bad(op, v.name, "has no data (a null pointer)");
    fused.push_back({&v, n, 0});
  }
  std::sort(fused.begin(), fused.end(),
            [](const FusedView& a, const FusedView& b) { return a.view->name < b.view->name; });
  std::size_t at = 0;
  for (std::size_t i = 0; i < fused.size(); ++i) {
    if (i > 0 && fused[i].view->name == fused[i - 1].view->name)
      throw bad(op, fused[i].view->name,
                "is named twice; every tensor of an op needs its own name");
    fused[i].offset = at;
    at += fused[i].numel;
  }
  return fused;
}

std::vector<const TensorView*> outputs_for(const std::vector<FusedView>& fused,
                                           const TensorViews& outputs, const char* op) {
  const std::vector<FusedView> out = fuse_order(outputs, op);
  std::vector<const TensorView*> paired;
  paired.reserve(fused.size());
  // Both in name order: one pass pairs them.
  std::size_t o = 0;
  for (const FusedView& in : fused) {
    if (o < out.size() && out[o].view->name < in.view->name)
      throw bad(op, out[o].view->name, "is an output without an input of its name");
    if (o == out.size() || out[o].view->name != in.view->name)
      throw bad(op, in.view->name, "has no output of its name");
    if (out[o].view->shape != in.view->shape)
      throw bad(op, in.view->name,
                "has an output of another shape (" + collective::shape_text(out[o].view->shape) +
                    " for an input of " + collective::shape_text(in.view->shape) + ")");
    paired.push_back(out[o++].view);
  }
  if (o < out.size()) throw bad(op, out[o].view->name, "is an output without an input of its name");
  // The bytes of every view with values, [begin, end), outputs marked: an
  // output may overlap nothing else (inputs may overlap each other: they
  // are only read).
  struct Span {
    std::uintptr_t begin, end;
    const TensorView* view;
    bool output;
  };
  std::vector<Span> spans;
  const auto add = [&](const TensorView* v, std::size_t n, bool output) {
    if (n == 0) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(v->data);
    spans.push_back({begin, begin + n * sizeof(float), v, output});
  };
  for (std::size_t i = 0; i < fused.size(); ++i) {
    add(fused[i].view, fused[i].numel, false);
    add(paired[i], fused[i].numel, true);
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  // Sweep: the output reaching furthest so far, and the input, against each next span.
  const Span* last_out = nullptr;
  const Span* last_in = nullptr;
  for (const Span& s : spans) {
    const Span* other = nullptr;
    if (last_out && last_out->end > s.begin)
      other = last_out;
    else if (s.output && last_in && last_in->end > s.begin)
      other = last_in;
    if (other) {
      const Span& output = s.output ? s : *other;
      const Span& with = s.output ? *other : s;
      throw bad(op, output.view->name,
                std::string("has an output that shares memory with ") +
                    (with.output ? "the output" : "the input") + " of '" + with.view->name +
                    "'; every output needs memory of its own (all_reduce_in_place writes the "
                    "averages over the inputs)");
    }
    if (s.output) {
      if (!last_out || s.end > last_out->end) last_out = &s;
    } else if (!last_in || s.end > last_in->end) {
      last_in = &s;
    }
  }
  return paired;
}

TensorMap map_of(const std::vector<FusedView>& fused) {
  TensorMap copy;
  for (const FusedView& f : fused)
    copy.emplace(f.view->name,
                 Tensor(std::vector<float>(f.view->data, f.view->data + f.numel), f.view->shape));
  return copy;
}

TensorShapes shapes_of(const std::vector<FusedView>& fused) {
  TensorShapes shapes;
  for (const FusedView& f : fused) shapes.emplace(f.view->name, f.view->shape);
  return shapes;
}

}  // namespace zring::client
