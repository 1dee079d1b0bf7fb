#include "mlp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ring_demo {

Task::Task(std::uint64_t seed) : centers_(2 * kClasses * kInputs) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& c : centers_) c = normal(rng) * 0.45f;  // close enough to confuse
}

Batch Task::sample(std::mt19937_64& rng, std::size_t n) const {
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, static_cast<int>(kClasses) - 1), half(0, 1);
  Batch b;
  b.x.resize(n * kInputs);
  for (std::size_t i = 0; i < n; ++i) {
    const int y = label(rng);
    const float* c = &centers_[(2 * y + half(rng)) * kInputs];
    for (std::size_t j = 0; j < kInputs; ++j) b.x[i * kInputs + j] = c[j] + noise(rng);
    b.y.push_back(y);
  }
  return b;
}

Mlp::Mlp(std::uint64_t seed)
    : w1_(kInputs * kHidden), b1_(kHidden, 0.0f), w2_(kHidden * kClasses), b2_(kClasses, 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n1(0.0f, std::sqrt(2.0f / kInputs)),
      n2(0.0f, std::sqrt(1.0f / kHidden));
  for (float& w : w1_) w = n1(rng);
  for (float& w : w2_) w = n2(rng);
}

std::size_t Mlp::parameters() const { return w1_.size() + b1_.size() + w2_.size() + b2_.size(); }

void Mlp::forward(const float* x, std::vector<float>& hidden, std::vector<float>& probs) const {
  hidden.assign(b1_.begin(), b1_.end());
  for (std::size_t i = 0; i < kInputs; ++i)
    for (std::size_t h = 0; h < kHidden; ++h) hidden[h] += x[i] * w1_[i * kHidden + h];
  for (float& v : hidden) v = std::max(v, 0.0f);  // ReLU
  probs.assign(b2_.begin(), b2_.end());
  for (std::size_t h = 0; h < kHidden; ++h)
    for (std::size_t c = 0; c < kClasses; ++c) probs[c] += hidden[h] * w2_[h * kClasses + c];
  const float top = *std::max_element(probs.begin(), probs.end());
  float sum = 0;
  for (float& p : probs) sum += (p = std::exp(p - top));
  for (float& p : probs) p /= sum;
}

zring::TensorMap Mlp::gradients(const Batch& batch, double* loss) const {
  std::vector<float> gw1(w1_.size(), 0.0f), gb1(b1_.size(), 0.0f), gw2(w2_.size(), 0.0f),
      gb2(b2_.size(), 0.0f), hidden, probs, dh(kHidden);
  const float scale = 1.0f / static_cast<float>(batch.size());
  double total = 0;
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const float* x = &batch.x[s * kInputs];
    forward(x, hidden, probs);
    total -= std::log(std::max(probs[batch.y[s]], 1e-12f));
    probs[batch.y[s]] -= 1.0f;  // d loss / d logits
    std::fill(dh.begin(), dh.end(), 0.0f);
    for (std::size_t h = 0; h < kHidden; ++h)
      for (std::size_t c = 0; c < kClasses; ++c) {
        gw2[h * kClasses + c] += hidden[h] * probs[c] * scale;
        dh[h] += w2_[h * kClasses + c] * probs[c];
      }
    for (std::size_t c = 0; c < kClasses; ++c) gb2[c] += probs[c] * scale;
    for (std::size_t h = 0; h < kHidden; ++h) {
      if (hidden[h] <= 0) continue;
      gb1[h] += dh[h] * scale;
      for (std::size_t i = 0; i < kInputs; ++i) gw1[i * kHidden + h] += x[i] * dh[h] * scale;
    }
  }
  if (loss) *loss = total / static_cast<double>(batch.size());
  zring::TensorMap g;
  g.emplace("fc1.weight", zring::Tensor(std::move(gw1), {kInputs, kHidden}));
  g.emplace("fc1.bias", zring::Tensor(std::move(gb1)));
  g.emplace("fc2.weight", zring::Tensor(std::move(gw2), {kHidden, kClasses}));
  g.emplace("fc2.bias", zring::Tensor(std::move(gb2)));
  return g;
}

void Mlp::step(const zring::TensorMap& g, float lr) {
  auto apply = [lr](std::vector<float>& w, const zring::Tensor& grad) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * grad[i];
  };
  apply(w1_, g.at("fc1.weight"));
  apply(b1_, g.at("fc1.bias"));
  apply(w2_, g.at("fc2.weight"));
  apply(b2_, g.at("fc2.bias"));
}

Metrics Mlp::evaluate(const Batch& batch) const {
  std::vector<float> hidden, probs;
  Metrics m;
  for (std::size_t s = 0; s < batch.size(); ++s) {
    forward(&batch.x[s * kInputs], hidden, probs);
    m.loss -= std::log(std::max(probs[batch.y[s]], 1e-12f));
    const auto best = std::max_element(probs.begin(), probs.end()) - probs.begin();
    m.accuracy += (best == batch.y[s]) ? 1.0 : 0.0;
  }
  m.loss /= static_cast<double>(batch.size());
  m.accuracy /= static_cast<double>(batch.size());
  return m;
}

std::uint64_t Mlp::checksum() const {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto* v : {&w1_, &b1_, &w2_, &b2_})
    for (float f : *v) {
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      h = (h ^ bits) * 1099511628211ull;
    }
  return h;
}

}  // namespace ring_demo
