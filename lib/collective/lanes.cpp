#include "collective/lanes.hpp"

#include <vector>

namespace zring::collective {
namespace {
constexpr std::size_t kBatch = 1024;  // convert through a small stack buffer
}

void HalfLane::encode(const float* acc, std::size_t n, std::uint8_t* out) const noexcept {
  std::uint16_t tmp[kBatch];
  for (std::size_t i = 0; i < n; i += kBatch) {
    const std::size_t m = std::min(kBatch, n - i);
    words.encode(acc + i, m, tmp);
    std::memcpy(out + 2 * i, tmp, 2 * m);
  }
}

void HalfLane::decode(const std::uint8_t* in, std::size_t n, float* out) const noexcept {
  std::uint16_t tmp[kBatch];
  for (std::size_t i = 0; i < n; i += kBatch) {
    const std::size_t m = std::min(kBatch, n - i);
    std::memcpy(tmp, in + 2 * i, 2 * m);
    words.decode(tmp, m, out + i);
  }
}

void HalfLane::decode_add(const std::uint8_t* in, std::size_t n, const float* local,
                          float* out) const noexcept {
  if (!round_local) {
    decode(in, n, out);
    for (std::size_t i = 0; i < n; ++i) out[i] += local[i];
    return;
  }
  // Batch by batch, each batch's local values read before its sums are
  // written: out may be the local values themselves (an op in place).
  std::uint16_t tmp[kBatch];
  float rounded[kBatch];
  for (std::size_t i = 0; i < n; i += kBatch) {
    const std::size_t m = std::min(kBatch, n - i);
    words.encode(local + i, m, tmp);
    words.decode(tmp, m, rounded);
    decode(in + 2 * i, m, out + i);
    for (std::size_t j = 0; j < m; ++j) out[i + j] += rounded[j];
  }
}

}  // namespace zring::collective
