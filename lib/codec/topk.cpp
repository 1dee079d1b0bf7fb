// topk.cpp - the k largest magnitudes, as (index, value) pairs.
//
// Selection is O(n) radix selection on the bit pattern of |x|: for
// non-negative floats the pattern, read as an unsigned integer, orders like
// the value, and every nan pattern lies above inf, so nan and inf are always
// kept first. One histogram pass over the top 11 bits finds the bucket where
// the k-th largest lies; one more pass collects everything above that bucket
// (all kept) and the bucket's members (the candidates). Two more histogram
// levels over the candidates alone pin the exact k-th key. No sort. For
// large n and small k a sample of the keys usually finds a bound first that
// leaves only about 1.2 k candidates for one pass to collect
// (select_by_sample). A mostly-zero tensor (an averaged sparse gradient, an
// embedding's) has a sample bound of 0: the pass then collects the nonzero
// keys only, and if there are no more than k of them, they are kept with
// the first zeros (keep_with_zeros) - no radix pass over the zeros.
//
// Ties: among equal magnitudes the lower index wins, so the result depends
// only on the values, never on the algorithm's visiting order.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codec/codecs.hpp"
#include "codec/collect.hpp"
#include "codec/correction.hpp"
#include "codec/payload.hpp"
#include "codec/sparse.hpp"
#include "codec/vector_clones.hpp"

namespace zring::codec {
namespace {

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
// keys may be the values' bit patterns too: only bits 0-30 are read.
std::uint32_t exact_key(const std::uint32_t* keys, std::size_t count, std::uint32_t top,
                        std::size_t& need) {
  Histogram hist;
  std::uint32_t prefix = top << kLevels[0].shift;
  std::uint32_t prefix_mask = 0x7ffu << kLevels[0].shift;
  for (const Level& level : {kLevels[1], kLevels[2]}) {
    const std::uint32_t mask = (1u << level.bits) - 1;
    hist.fill(0);
    for (std::size_t c = 0; c < count; ++c) {  // branch-free: the filter is unpredictable
      const std::uint32_t key = keys[c];
      hist[(key >> level.shift) & mask] += (key & prefix_mask) == prefix ? 1 : 0;
    }
    const std::size_t bucket = find_bucket(hist, std::size_t{1} << level.bits, need);
    prefix |= static_cast<std::uint32_t>(bucket) << level.shift;
    prefix_mask |= mask << level.shift;
  }
  return prefix;
}

// The fast path for large n and small k: a strided sample of the keys
// gives a bound that about 1.2 k of the n keys should reach; one pass
// collects those (in index order) and the exact k-th key is found among
// them alone, their values with them. False when the sample misled (fewer
// than k reached the bound, or far more): the radix path then decides.
// Either way the result is the same set: the k largest keys, ties to the
// lower index. The sample is one key in 512, from 1024 to 16384 keys: a
// tensor of a few hundred thousand values (a model has many) pays for a
// sample of its own size, not of the largest.
constexpr std::size_t kMinSample = 1 << 10;
constexpr std::size_t kMaxSample = 1 << 14;

// Scratch of at least n elements, grown (never shrunk) without writing
// it: the room left for the candidates is about twice what they take, and
// only the pages the selection writes become resident, once, as the
// buffer is reused call after call.
class Room {
 public:
  std::uint32_t* at_least(std::size_t n) {
    if (size_ < n) {
      data_.reset(new std::uint32_t[n]);  // default-initialised: not written
      size_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<std::uint32_t[]> data_;
  std::size_t size_ = 0;
};

// The k-th largest key is 0 when no more than k keys are nonzero: all
// `count` nonzero ones (found, in index order, with their bit patterns) are
// kept, and of the zeros (+0 and -0 alike) the first k - count in index
// order, as the radix path keeps ties. Those lie in the first k indices
// plus the nonzero ones among them.
void keep_with_zeros(const float* x, const std::uint32_t* found, const std::uint32_t* bits,
                     std::size_t count, std::size_t k, std::vector<std::uint32_t>& kept,
                     std::vector<float>& values) {
  kept.resize(k);
  values.resize(k);
  std::size_t zeros = k - count, c = 0, j = 0;
  for (std::uint32_t i = 0; zeros > 0; ++i, ++j) {  // i < n: n - count >= k - count zeros exist
    kept[j] = i;
    values[j] = x[i];
    if (c < count && found[c] == i) {
      ++c;
    } else {
      --zeros;
    }
  }
  for (; c < count; ++c, ++j) {
    kept[j] = found[c];
    values[j] = std::bit_cast<float>(bits[c]);
  }
}

// The values may be made as they are read, block by block (error
// feedback's x + r): value_of(i) is value i before it is made (the same
// bits), make_block(begin, end) makes [begin, end) and says where value
// begin is, and `made` is where all n are once made. Every block is made
// before it returns, whatever it answers.
template <class ValueOf, class MakeBlock>
bool select_by_sample(const float* made, std::size_t n, std::size_t k, ValueOf value_of,
                      MakeBlock& make_block, std::vector<std::uint32_t>& kept,
                      std::vector<float>& values) {
  const std::size_t samples = std::clamp<std::size_t>(n / 512, kMinSample, kMaxSample);
  const std::size_t stride = n / samples;
  const double share = static_cast<double>(k) / static_cast<double>(n);
  const double expect = static_cast<double>(samples) * share;
  // 1.15 k expected above the bound, plus four standard deviations of the
  // sample count.
  const auto rank = static_cast<std::size_t>(1.15 * expect + 4.0 * std::sqrt(expect) + 8.0);
  if (stride < 2 || rank >= samples / 4) {
    make_blocks(make_block, n, 0);
    return false;
  }
  // Scratch kept by the thread: a daemon compresses tensors of the same
  // sizes op after op.
  thread_local Room sample_keys, found_at, found_bits;
  std::uint32_t* sample = sample_keys.at_least(samples);
  for (std::size_t j = 0; j < samples; ++j) sample[j] = magnitude_key(value_of(j * stride));
  std::nth_element(sample, sample + rank, sample + samples, std::greater<>());
  // A bound of 0 (most of the sample is exact zeros) would collect every
  // key; 1 collects the nonzero ones, about as many as the sample saw.
  const std::uint32_t bound = std::max<std::uint32_t>(sample[rank], 1);

  // A block at a time, with room for all of it, read right after it is
  // made (still in the cache).
  const std::size_t reach = (rank + 1) * stride;  // about how many keys reach the bound
  const std::size_t cap = 2 * std::max(k, reach) + 4096;
  std::uint32_t* found = found_at.at_least(cap + kCollectBlock);
  std::uint32_t* bits = found_bits.at_least(cap + kCollectBlock);
  std::size_t count = 0;
  for (std::size_t begin = 0; begin < n; begin += kCollectBlock) {
    if (count > cap) {
      make_blocks(make_block, n, begin);
      return false;
    }
    const std::size_t end = std::min(n, begin + kCollectBlock);
    const float* block = make_block(begin, end) - begin;
    count += collect(block, begin, end, bound, found + count, bits + count);
  }
  if (count > cap) return false;
  if (bound == 1 && count <= k) {  // every nonzero key is in, and the rest are zeros
    keep_with_zeros(made, found, bits, count, k, kept, values);
    return true;
  }
  if (count < k) return false;

  // The exact k-th key among the candidates: three radix levels, as
  // select_largest does over all keys (read from the bit patterns, no
  // array of keys of their own).
  Histogram hist{};
  for (std::size_t c = 0; c < count; ++c) ++hist[(bits[c] & 0x7fffffffu) >> kLevels[0].shift];
  std::size_t ties = k;  // becomes how many equal to the threshold are kept: the first ones
  const auto top = static_cast<std::uint32_t>(find_bucket(hist, 2048, ties));
  const std::uint32_t threshold = exact_key(bits, count, top, ties);
  // Branch-free (whether a candidate is kept is a coin toss): each one is
  // written at j, and j moves on only past those kept; one slot of room
  // past k takes the last write.
  kept.resize(k + 1);
  values.resize(k + 1);
  std::uint32_t* kept_at = kept.data();
  float* value_at = values.data();
  std::size_t j = 0;
  for (std::size_t c = 0; c < count; ++c) {
    const std::uint32_t key = bits[c] & 0x7fffffffu;
    const std::size_t tie = (key == threshold) & (ties > 0);
    kept_at[j] = found[c];
    value_at[j] = std::bit_cast<float>(bits[c]);
    j += static_cast<std::size_t>(key > threshold) | tie;
    ties -= tie;
  }
  kept.resize(k);
  values.resize(k);
  return true;
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
  const std::uint32_t threshold = exact_key(split.key.data(), split.key.size(), top, need);

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

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override {
    auto in_place = [x](std::size_t begin, std::size_t) { return x + begin; };
    return select(
        x, n, [x](std::size_t i) { return x[i]; }, in_place);
  }

  // x + r made into out block by block, each block collected from while
  // it is in the cache: one pass over the tensor fewer than making it first.
  CompressedGradient compress_corrected(const float* x, const float* r, std::size_t n, float* out,
                                        const CodecContext&, bool& finite) const override {
    CorrectedBlocks make(x, r, out);
    CompressedGradient g = select(
        out, n, [&make](std::size_t i) { return make.value_of(i); }, make);
    finite = make.finite();
    return g;
  }

  void decode(CompressedGradient& g) const override {
    detail::decode_sparse(method_, g);
    g.seed = 0;
    detail::finish_gradient(g, 32);
  }

 private:
  // The k largest of n values made by make_block (select_by_sample), all
  // of them at `made` once made.
  template <class ValueOf, class MakeBlock>
  CompressedGradient select(const float* made, std::size_t n, ValueOf value_of,
                            MakeBlock& make_block) const {
    detail::check_indexable(method_, n);
    CompressedGradient g = detail::start_gradient(method_, n);
    const std::size_t k = method_.kept_for(n);
    const bool sampled = k > 0 && k < n;
    if (!sampled) make_blocks(make_block, n, 0);
    if (k > 0 &&
        !(sampled && select_by_sample(made, n, k, value_of, make_block, g.indices, g.values))) {
      g.indices = select_largest(made, n, k);
      g.values.resize(k);
      for (std::size_t j = 0; j < k; ++j) g.values[j] = made[g.indices[j]];
    }
    detail::encode_sparse(g);
    detail::finish_gradient(g, 32);
    return g;
  }

  CompressionMethod method_;
};

}  // namespace

std::unique_ptr<Codec> detail::make_topk_codec(const CompressionMethod& method) {
  return std::make_unique<TopkCodec>(method);
}

}  // namespace zring::codec
