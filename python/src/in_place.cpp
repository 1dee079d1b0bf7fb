#include "in_place.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <zring/error.hpp>

namespace py = pybind11;

namespace zring::python {
namespace {

[[noreturn]] void refuse(const char* op, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, std::string(op) + ": " + what);
}

// What an in-place op writes over the values, for its messages.
std::string results_of(const char* op) {
  return std::string(op) == "broadcast" ? "root's values" : "averages";
}

// The bytes an array's elements occupy, [low, high).
struct Bounds {
  std::uintptr_t low = 0;
  std::uintptr_t high = 0;
};

Bounds bounds_of(const ArrayRef& a) {
  auto low = static_cast<std::ptrdiff_t>(reinterpret_cast<std::uintptr_t>(a.data));
  std::ptrdiff_t high = low + static_cast<std::ptrdiff_t>(sizeof(float));
  for (std::size_t d = 0; d < a.shape.size(); ++d) {
    const std::ptrdiff_t reach = static_cast<std::ptrdiff_t>(a.shape[d] - 1) * a.strides[d];
    (reach < 0 ? low : high) += reach;
  }
  return {static_cast<std::uintptr_t>(low), static_cast<std::uintptr_t>(high)};
}

// Whether the strides keep every element apart: sorted by stride, each
// stride must step over everything the smaller ones reach. (Sufficient, and
// true of every view numpy or torch makes by slicing and transposing.)
bool elements_apart(const ArrayRef& a) {
  std::vector<std::pair<std::size_t, std::size_t>> dims;  // |stride|, extent
  for (std::size_t d = 0; d < a.shape.size(); ++d)
    if (a.shape[d] > 1)
      dims.emplace_back(static_cast<std::size_t>(std::abs(a.strides[d])), a.shape[d]);
  std::sort(dims.begin(), dims.end());
  std::size_t reach = sizeof(float);
  for (const auto& [stride, extent] : dims) {
    if (stride < reach) return false;
    reach += stride * (extent - 1);
  }
  return true;
}

void check_each_can_hold_its_averages(const std::vector<ArrayRef>& arrays, const char* op) {
  for (const ArrayRef& a : arrays) {
    if (!a.writeable)
      refuse(op, "tensor '" + a.name +
                     "' is read-only (a numpy array whose flags.writeable is False); the " +
                     results_of(op) +
                     " are written over the values: pass a writeable array (e.g. a copy)" +
                     (results_of(op) == "averages" ? ", or use all_reduce, which returns new arrays"
                                                   : ""));
    if (a.numel() > 1 && !elements_apart(a))
      refuse(op, "tensor '" + a.name +
                     "' has elements that share memory (a stride of 0, as numpy.broadcast_to or "
                     "torch.expand make, or overlapping strides); each element needs its own "
                     "memory to hold its result: pass a copy" +
                     (results_of(op) == "averages" ? ", or use all_reduce" : ""));
  }
}

// Two arrays of one op may not share an element: each one's averages are
// written over it while the others may still be read. Arrays whose bytes
// merely interleave (x[:, :2] and x[:, 2:]) are fine: numpy.shares_memory
// decides for those, and one it cannot decide cheaply is refused too.
void check_apart(const std::vector<ArrayRef>& arrays, const char* op) {
  std::vector<std::pair<Bounds, const ArrayRef*>> spans;
  for (const ArrayRef& a : arrays)
    if (a.numel() != 0) spans.emplace_back(bounds_of(a), &a);
  std::sort(spans.begin(), spans.end(),
            [](const auto& x, const auto& y) { return x.first.low < y.first.low; });
  py::object shares_memory;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    for (std::size_t j = i + 1; j < spans.size() && spans[j].first.low < spans[i].first.high; ++j) {
      const ArrayRef& a = *spans[i].second;
      const ArrayRef& b = *spans[j].second;
      if (a.contiguous() && b.contiguous()) {
        // Both are intervals that intersect.
      } else {
        if (!shares_memory) shares_memory = py::module_::import("numpy").attr("shares_memory");
        try {
          if (!shares_memory(numpy_view(a), numpy_view(b), py::arg("max_work") = 100000)
                   .cast<bool>())
            continue;
        } catch (const py::error_already_set& e) {
          if (!e.matches(py::module_::import("numpy").attr("TooHardError"))) throw;
        }
      }
      refuse(op, "tensors '" + a.name + "' and '" + b.name +
                     "' share memory (views of one array?); each tensor's " + results_of(op) +
                     " are written over it, so each needs memory of its own: pass copies" +
                     (results_of(op) == "averages" ? ", or use all_reduce" : ""));
    }
  }
}

}  // namespace

InPlaceDict InPlaceDict::from_dict(const py::dict& tensors, const char* op) {
  InPlaceDict in;
  in.arrays_ = array_refs(tensors, op);
  check_each_can_hold_its_averages(in.arrays_, op);
  check_apart(in.arrays_, op);
  return in;
}

template <class Op>
void InPlaceDict::over_views(Op&& op) const {
  TensorViews views;
  views.reserve(arrays_.size());
  std::vector<std::unique_ptr<float[]>> gathered(arrays_.size());
  for (std::size_t i = 0; i < arrays_.size(); ++i)
    views.push_back(
        {arrays_[i].name, arrays_[i].shape, contiguous_values(arrays_[i], gathered[i])});
  op(views);
  for (std::size_t i = 0; i < arrays_.size(); ++i)
    if (gathered[i]) copy_in(gathered[i].get(), arrays_[i]);
}

void InPlaceDict::reduce(CompressedAllReduce& ar) const {
  over_views([&](const TensorViews& views) { ar.all_reduce_in_place(views); });
}

void InPlaceDict::broadcast(CompressedAllReduce& ar, std::size_t root) const {
  over_views([&](const TensorViews& views) { ar.broadcast(views, root); });
}

PackedBuffer PackedBuffer::from(const py::handle& buffer, const py::handle& layout,
                                const char* op) {
  PackedBuffer packed;
  packed.buffer_ = array_ref("buffer", buffer, op);
  const ArrayRef& b = packed.buffer_;
  if (!b.writeable) refuse(op, "the buffer is read-only; the averages are written over it");
  if (!b.contiguous())
    refuse(op,
           "the buffer must be C-contiguous and float-aligned (use .contiguous() or "
           "numpy.ascontiguousarray)");
  if (!py::isinstance<py::sequence>(layout) || py::isinstance<py::str>(layout))
    refuse(op, "layout must be a sequence of (name, shape) pairs");
  float* at = reinterpret_cast<float*>(b.data);
  std::size_t used = 0;
  for (const py::handle entry : py::reinterpret_borrow<py::sequence>(layout)) {
    if (!py::isinstance<py::sequence>(entry) || py::len(entry) != 2 ||
        !py::isinstance<py::str>(entry[py::int_(0)]))
      refuse(op, "layout must be a sequence of (name, shape) pairs, not one with " +
                     py::repr(entry).cast<std::string>());
    TensorView view;
    view.name = entry[py::int_(0)].cast<std::string>();
    view.shape = shape_from(entry[py::int_(1)], view.name, op);
    const std::size_t n = shape_numel(view.shape);
    if (n > b.numel() - used)
      refuse(op, "the layout does not fit the buffer of " + std::to_string(b.numel()) +
                     " values: tensor '" + view.name + "' ends past it");
    view.data = at + used;
    used += n;
    packed.views_.push_back(std::move(view));
  }
  if (used != b.numel())
    refuse(op, "the layout covers " + std::to_string(used) + " values but the buffer has " +
                   std::to_string(b.numel()));
  return packed;
}

}  // namespace zring::python
