// randomk.cpp - k values at indices drawn from a seed every rank shares.
//
// Layout: u64 seed; u32 k; k x f32 values at random_indices(seed, n, k);
// u32 m; m x (u32 index, f32 value) for the inf/nan elements the draw
// missed, ascending. Only the values travel for the sampled indices (the
// receiver redraws them from the seed); the exceptions make sure an overflow
// is never dropped just because it was not sampled.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/codecs.hpp"
#include "codec/payload.hpp"

namespace zring::codec {
namespace {

inline bool is_nonfinite(float v) noexcept {
  return (std::bit_cast<std::uint32_t>(v) & 0x7f800000u) == 0x7f800000u;
}

// The view: the sorted union of the sampled and the exception indices.
void merge_view(const std::vector<std::uint32_t>& sampled, const std::vector<float>& sampled_values,
                const std::vector<std::uint32_t>& extra, const std::vector<float>& extra_values,
                CompressedGradient& g) {
  const std::size_t total = sampled.size() + extra.size();
  g.indices.resize(total);
  g.values.resize(total);
  std::size_t a = 0, b = 0;
  for (std::size_t j = 0; j < total; ++j) {
    const bool from_sampled = b == extra.size() || (a < sampled.size() && sampled[a] < extra[b]);
    g.indices[j] = from_sampled ? sampled[a] : extra[b];
    g.values[j] = from_sampled ? sampled_values[a++] : extra_values[b++];
  }
}

class RandomkCodec final : public Codec {
 public:
  explicit RandomkCodec(const CompressionMethod& method) : method_(method) {}

  const CompressionMethod& method() const noexcept override { return method_; }

  CompressedGradient compress(const float* x, std::size_t n,
                              const CodecContext& ctx) const override {
    detail::check_indexable(method_, n);
    CompressedGradient g = detail::start_gradient(method_, n);
    const std::size_t k = method_.kept_for(n);
    const std::vector<std::uint32_t> sampled = random_indices(ctx.seed, n, k);
    const std::vector<std::uint32_t> extra = unsampled_nonfinite(x, n, sampled);
    std::vector<float> sampled_values(k), extra_values(extra.size());
    for (std::size_t j = 0; j < k; ++j) sampled_values[j] = x[sampled[j]];
    for (std::size_t j = 0; j < extra.size(); ++j) extra_values[j] = x[extra[j]];

    g.payload.resize(8 + 4 + 4 * k + 4 + 8 * extra.size());
    std::uint8_t* p = g.payload.data();
    detail::store_u64(p, ctx.seed);
    detail::store_u32(p + 8, static_cast<std::uint32_t>(k));
    detail::store_f32s(sampled_values.data(), k, p + 12);
    p += 12 + 4 * k;
    detail::store_u32(p, static_cast<std::uint32_t>(extra.size()));
    for (std::size_t j = 0; j < extra.size(); ++j) {
      detail::store_u32(p + 4 + 8 * j, extra[j]);
      detail::store_f32(p + 8 + 8 * j, extra_values[j]);
    }
    merge_view(sampled, sampled_values, extra, extra_values, g);
    g.seed = ctx.seed;
    detail::finish_gradient(g, 32);
    return g;
  }

  void decode(CompressedGradient& g) const override;

 private:
  CompressionMethod method_;
};

void RandomkCodec::decode(CompressedGradient& g) const {
  detail::PayloadReader in(method_, g);
  const std::size_t n = g.original_size;
  if (static_cast<std::uint64_t>(n) > (std::uint64_t{1} << 32))
    in.fail("tensor too large for 32-bit indices");
  const std::uint64_t seed = in.u64("the seed");
  const std::uint32_t k = in.u32("the sample count");
  if (k != method_.kept_for(n)) {
    in.fail("sample count is " + std::to_string(k) + " but the method keeps " +
            std::to_string(method_.kept_for(n)));
  }
  // Every length is checked against the payload before anything is drawn.
  const std::uint8_t* value_bytes = in.take(std::size_t{4} * k, "the sampled values");
  const std::uint32_t m = in.u32("the exception count");
  const std::uint8_t* pair_bytes = in.take(std::size_t{8} * m, "the exceptions");
  in.expect_end();
  if (m > n - k) in.fail(std::to_string(m) + " exceptions exceed the unsampled elements");

  const std::vector<std::uint32_t> sampled = random_indices(seed, n, k);
  std::vector<float> sampled_values(k);
  detail::load_f32s(value_bytes, k, sampled_values.data());
  std::vector<std::uint32_t> extra(m);
  std::vector<float> extra_values(m);
  for (std::uint32_t j = 0; j < m; ++j) {
    extra[j] = detail::load_u32(pair_bytes + 8 * j);
    extra_values[j] = detail::load_f32(pair_bytes + 8 * j + 4);
    const auto bad = [&](const char* what) {
      in.fail("exception " + std::to_string(j) + " (index " + std::to_string(extra[j]) + ") " +
              what);
    };
    if (extra[j] >= n) bad("is out of range");
    if (j > 0 && extra[j] <= extra[j - 1]) bad("is not above the previous one");
    if (std::binary_search(sampled.begin(), sampled.end(), extra[j])) bad("was also sampled");
    if (!is_nonfinite(extra_values[j])) bad("carries a finite value");
  }
  merge_view(sampled, sampled_values, extra, extra_values, g);
  g.seed = seed;
  detail::finish_gradient(g, 32);
}

}  // namespace

std::vector<std::uint32_t> unsampled_nonfinite(const float* x, std::size_t n,
                                               const std::vector<std::uint32_t>& sampled) {
  std::vector<std::uint32_t> found;
  constexpr std::size_t kBlock = 1024;
  for (std::size_t at = 0; at < n; at += kBlock) {
    const std::size_t len = std::min(kBlock, n - at);
    // Overflow is rare: a branch-free test of the whole block first.
    bool any = false;
    for (std::size_t i = 0; i < len; ++i) any |= is_nonfinite(x[at + i]);
    if (!any) continue;
    for (std::size_t i = at; i < at + len; ++i) {
      const auto index = static_cast<std::uint32_t>(i);
      if (is_nonfinite(x[i]) && !std::binary_search(sampled.begin(), sampled.end(), index)) {
        found.push_back(index);
      }
    }
  }
  return found;
}

std::unique_ptr<Codec> detail::make_randomk_codec(const CompressionMethod& method) {
  return std::make_unique<RandomkCodec>(method);
}

}  // namespace zring::codec
