// topk.cpp - the k largest magnitudes, as (index, value) pairs.
//
// Selection is O(n) radix selection on the bit pattern of |x|: for
// non-negative floats the pattern, read as an unsigned integer, orders like
// the value, and every nan pattern lies above inf, so nan and inf are always
// kept first. One histogram pass over the top 11 bits finds the bucket where
// the k-th largest lies; one more pass collects everything above that bucket
// (all kept) and the bucket's members (the candidates). Two more histogram
// levels over the candidates alone pin the exact k-th key. No sort.
//
// Ties: among equal magnitudes the lower index wins, so the result depends
// only on the values, never on the algorithm's visiting order.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <numeric>
#include <vector>

#include "codec/codecs.hpp"
#include "codec/payload.hpp"
#include "codec/sparse.hpp"

namespace zring::codec {
namespace {

inline std::uint32_t magnitude_key(float v) noexcept {
  return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu;
}

// The three radix levels over the 31 key bits: 11 + 11 + 9.
struct Level {
  unsigned shift;
  unsigned bits;
};
constexpr Level kLevels[3] = {{20, 11}, {9, 11}, {0, 9}};

using Histogram = std::array<std::size_t, 2048>;

// The bucket, counting from the top, that holds the need-th largest key;
// need becomes that key's rank inside the bucket.
std::size_t find_bucket(const Histogram& hist, std::size_t buckets, std::size_t& need) {
  for (std::size_t b = buckets; b-- > 0;) {
    if (hist[b] >= need) return b;
    need -= hist[b];
  }
  return 0;  // not reached while need <= the histogram's total
}

// The elements of the top-level bucket `top` (the candidates, with their
// keys) and those above it (all kept), each list in index order.
struct Split {
  std::vector<std::uint32_t> above;
  std::vector<std::uint32_t> index;
  std::vector<std::uint32_t> key;
};

Split split_at(const float* x, std::size_t n, std::uint32_t top, std::size_t n_above,
               std::size_t n_cand) {
  Split s{std::vector<std::uint32_t>(n_above), std::vector<std::uint32_t>(n_cand),
          std::vector<std::uint32_t>(n_cand)};
  std::size_t a = 0, c = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t key = magnitude_key(x[i]);
    const std::uint32_t bucket = key >> kLevels[0].shift;
    if (bucket > top) {
      s.above[a++] = static_cast<std::uint32_t>(i);
    } else if (bucket == top) {
      s.index[c] = static_cast<std::uint32_t>(i);
      s.key[c++] = key;
    }
  }
  return s;
}

// The exact key of the need-th largest candidate (all in bucket `top`),
// from the two lower radix levels; need becomes its rank among equal keys.
std::uint32_t exact_key(const std::vector<std::uint32_t>& keys, std::uint32_t top,
                        std::size_t& need) {
  Histogram hist;
  std::uint32_t prefix = top << kLevels[0].shift;
  std::uint32_t prefix_mask = 0x7ffu << kLevels[0].shift;
  for (const Level& level : {kLevels[1], kLevels[2]}) {
    const std::uint32_t mask = (1u << level.bits) - 1;
    hist.fill(0);
    for (std::uint32_t key : keys) {
      if ((key & prefix_mask) == prefix) ++hist[(key >> level.shift) & mask];
    }
    const std::size_t bucket = find_bucket(hist, std::size_t{1} << level.bits, need);
    prefix |= static_cast<std::uint32_t>(bucket) << level.shift;
    prefix_mask |= mask << level.shift;
  }
  return prefix;
}

// Indices (ascending) of the k largest |x|, 1 <= k <= n.
std::vector<std::uint32_t> select_largest(const float* x, std::size_t n, std::size_t k) {
  std::vector<std::uint32_t> kept(k);
  if (k == n) {
    std::iota(kept.begin(), kept.end(), 0u);
    return kept;
  }
  Histogram hist{};
  for (std::size_t i = 0; i < n; ++i) ++hist[magnitude_key(x[i]) >> kLevels[0].shift];
  std::size_t need = k;
  const auto top = static_cast<std::uint32_t>(find_bucket(hist, 2048, need));
  const Split split = split_at(x, n, top, k - need, hist[top]);
  const std::uint32_t threshold = exact_key(split.key, top, need);

  // Candidates above the threshold are kept, and of those equal to it the
  // first `need` in index order.
  std::vector<std::uint32_t> chosen;
  chosen.reserve(k - split.above.size());
  for (std::size_t c = 0; c < split.index.size(); ++c) {
    const bool tie = split.key[c] == threshold && need > 0;
    if (split.key[c] > threshold || tie) chosen.push_back(split.index[c]);
    if (tie) --need;
  }
  std::merge(split.above.begin(), split.above.end(), chosen.begin(), chosen.end(), kept.begin());
  return kept;
}

class TopkCodec final : public Codec {
 public:
  explicit TopkCodec(const CompressionMethod& method) : method_(method) {}

  const CompressionMethod& method() const noexcept override { return method_; }
  Summation summation() const noexcept override { return Summation::sparse; }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override {
    detail::check_indexable(method_, n);
    CompressedGradient g = detail::start_gradient(method_, n);
    const std::size_t k = method_.kept_for(n);
    if (k > 0) g.indices = select_largest(x, n, k);
    g.values.resize(k);
    for (std::size_t j = 0; j < k; ++j) g.values[j] = x[g.indices[j]];
    detail::encode_sparse(g);
    detail::finish_gradient(g, 32);
    return g;
  }

  void decode(CompressedGradient& g) const override {
    detail::decode_sparse(method_, g);
    g.seed = 0;
    detail::finish_gradient(g, 32);
  }

 private:
  CompressionMethod method_;
};

}  // namespace

std::unique_ptr<Codec> detail::make_topk_codec(const CompressionMethod& method) {
  return std::make_unique<TopkCodec>(method);
}

}  // namespace zring::codec
