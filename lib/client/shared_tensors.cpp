#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "client/shared_storage.hpp"

namespace zring {
namespace {

std::size_t elements_of(const std::string& name, const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t extent : shape) {
    if (extent != 0 && n > std::numeric_limits<std::size_t>::max() / 4 / extent)
      throw Error(ErrorCode::invalid_argument,
                  "make_shared_tensors: tensor '" + name + "' has too many values");
    n *= extent;
  }
  return n;
}

SharedTensors::Storage& need(const std::shared_ptr<SharedTensors::Storage>& s) {
  static SharedTensors::Storage empty;
  return s ? *s : empty;
}

}  // namespace

std::shared_ptr<SharedTensors::Storage> SharedTensors::Storage::lay_out(
    const TensorShapes& shapes) {
  auto s = std::make_shared<Storage>();
  s->shapes = shapes;
  for (const auto& [name, shape] : shapes) {
    const std::size_t n = elements_of(name, shape);
    if (s->elements > std::numeric_limits<std::size_t>::max() / 4 - n)
      throw Error(ErrorCode::invalid_argument, "make_shared_tensors: too many values in all");
    s->offsets.emplace(name, s->elements);
    s->elements += n;
  }
  return s;
}

TensorMap SharedTensors::Storage::tensors() const {
  TensorMap out;
  for (const auto& [name, shape] : shapes) {
    const float* v = data + offsets.at(name);
    out.emplace(name, Tensor(std::vector<float>(v, v + elements_of(name, shape)), shape));
  }
  return out;
}

void SharedTensors::Storage::set(const TensorMap& tensors) {
  for (const auto& [name, tensor] : tensors)
    std::ranges::copy(tensor.data(), data + offsets.at(name));
}

void SharedTensors::Storage::allocate_private() {
  // Aligned like the daemon's buffers, so the compiler's vector loops see
  // the same alignment either way.
  constexpr std::align_val_t kAlign{64};
  auto* p = static_cast<float*>(::operator new(std::max<std::size_t>(elements, 1) * 4, kAlign));
  std::fill(p, p + elements, 0.0f);
  memory = std::shared_ptr<void>(p, [](void* q) { ::operator delete (q, std::align_val_t{64}); });
  data = p;
  region.reset();
}

void SharedTensors::Storage::place_in(std::shared_ptr<transport::SharedRegion> r) {
  data = reinterpret_cast<float*>(r->data());
  std::fill(data, data + elements, 0.0f);
  memory = r;
  region = std::move(r);
  current = true;
}

void SharedTensors::Storage::give_up() {
  if (!region) return;
  region->make_private(elements * 4);
  region.reset();  // private memory now; `memory` still keeps it alive
  current = false;
}

Span<float> SharedTensors::operator[](const std::string& name) {
  Storage& s = need(storage_);
  auto at = s.offsets.find(name);
  if (at == s.offsets.end())
    throw Error(ErrorCode::missing_tensor, "SharedTensors: no tensor named '" + name + "'");
  return {s.data + at->second, elements_of(name, s.shapes.at(name))};
}

Span<const float> SharedTensors::operator[](const std::string& name) const {
  return const_cast<SharedTensors&>(*this)[name];
}

const std::vector<std::size_t>& SharedTensors::shape(const std::string& name) const {
  const Storage& s = need(storage_);
  auto at = s.shapes.find(name);
  if (at == s.shapes.end())
    throw Error(ErrorCode::missing_tensor, "SharedTensors: no tensor named '" + name + "'");
  return at->second;
}

Span<float> SharedTensors::values() noexcept {
  return storage_ ? Span<float>(storage_->data, storage_->elements) : Span<float>();
}

Span<const float> SharedTensors::values() const noexcept {
  return storage_ ? Span<const float>(storage_->data, storage_->elements) : Span<const float>();
}

std::size_t SharedTensors::numel() const noexcept { return storage_ ? storage_->elements : 0; }

const TensorShapes& SharedTensors::shapes() const noexcept { return need(storage_).shapes; }

TensorMap SharedTensors::to_tensors() const { return need(storage_).tensors(); }

void SharedTensors::assign(const TensorMap& tensors) {
  const TensorShapes& mine = shapes();
  for (const auto& [name, tensor] : tensors)
    if (!mine.count(name))
      throw Error(ErrorCode::missing_tensor,
                  "SharedTensors::assign: no tensor named '" + name + "' here");
  for (const auto& [name, shape] : mine) {
    auto it = tensors.find(name);
    if (it == tensors.end())
      throw Error(ErrorCode::missing_tensor,
                  "SharedTensors::assign: tensor '" + name + "' is missing");
    if (it->second.numel() != (*this)[name].size())
      throw Error(ErrorCode::size_mismatch, "SharedTensors::assign: tensor '" + name + "' has " +
                                                std::to_string(it->second.numel()) +
                                                " values, not " +
                                                std::to_string((*this)[name].size()));
  }
  need(storage_).set(tensors);
}

bool SharedTensors::zero_copy() const noexcept {
  return storage_ && storage_->current && storage_->elements != 0;
}

}  // namespace zring
