// test_topk_sparse.cpp - topk of mostly-zero tensors (averaged sparse
// gradients, embeddings) keeps the same set as on any other input: the k
// largest keys (|x| as a bit pattern, so nan above inf and +0 == -0), the
// lower index first among ties - which, when fewer than k values are
// nonzero, means every nonzero and then the first zeros in index order.
// Each value comes back with its own bits (a kept -0 stays -0).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "codec/codec.hpp"
#include "codec/sparse.hpp"
#include "codec_fixtures.hpp"
#include "support/reference.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

// n values, `nonzero` of them (at distinct random positions) normal, the
// rest zeros, each zero -0 with probability `negative`.
std::vector<float> sparse_values(std::size_t n, std::size_t nonzero, std::uint64_t seed,
                                 double negative = 0.0) {
  std::vector<float> x(n, 0.0f);
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution minus(negative);
  for (float& v : x) v = minus(rng) ? -0.0f : 0.0f;
  std::vector<std::uint32_t> at(n);
  std::iota(at.begin(), at.end(), 0u);
  std::shuffle(at.begin(), at.end(), rng);
  const std::vector<float> normal = t::normal_values(nonzero, seed + 1);
  for (std::size_t j = 0; j < nonzero; ++j) x[at[j]] = normal[j];
  return x;
}

void check(const std::vector<float>& x, std::size_t k, const char* what) {
  const CompressionMethod m = CompressionMethod::topk(k);
  const auto c = codec::make_codec(m);
  const CompressedGradient g = c->compress(x.data(), x.size(), {});
  // The brute-force reference (tests/support/reference.hpp).
  BOOST_TEST((g.indices == zring::testing::topk_by_bits(x, k)),
             what << ": n=" << x.size() << " k=" << k);
  std::vector<float> values(g.indices.size());
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = x[g.indices[j]];
  BOOST_TEST(t::same_bits(g.values, values), what << ": n=" << x.size() << " k=" << k);
  const CompressedGradient back = t::decoded_copy(*c, g);
  BOOST_TEST((back.indices == g.indices), what);
  BOOST_TEST(t::same_bits(back.values, g.values), what);
  // Error feedback's residual of a sparse gradient is mostly zeros too.
  t::check_corrected(x, sparse_values(x.size(), k / 3, k + 7, 0.5), m, what);
}

// Sizes where a sample picks the candidates (n = 300007: 1024 samples,
// 1 Mi: 2048) and one where the radix path does everything.
constexpr std::size_t kSizes[] = {1000, 300007, std::size_t{1} << 20};

}  // namespace

BOOST_AUTO_TEST_SUITE(topk_sparse)

BOOST_AUTO_TEST_CASE(ninety_nine_percent_zeros) {
  for (std::size_t n : kSizes) {
    const std::size_t k = CompressionMethod::topk_ratio(0.01).kept_for(n);
    // Fewer nonzeros than k, exactly k, and a few more (the k-th is nonzero).
    for (std::size_t nonzero : {n / 100 - n / 1000, k - 1, k, k + 1, n / 100 + n / 500}) {
      const std::vector<float> x = sparse_values(n, nonzero, n + nonzero);
      check(x, k, "99% zeros");
      for (std::size_t other : {std::size_t{1}, std::size_t{5}, n / 50})
        check(x, other, "99% zeros, other k");
    }
  }
}

BOOST_AUTO_TEST_CASE(all_zeros_keep_the_first_k_with_their_sign) {
  for (std::size_t n : kSizes) {
    for (double negative : {0.0, 0.5, 1.0}) {
      const std::vector<float> x = sparse_values(n, 0, 7, negative);
      for (std::size_t k : {std::size_t{1}, n / 100, n / 3, n - 1, n}) check(x, k, "all zeros");
    }
  }
}

BOOST_AUTO_TEST_CASE(negative_zeros_tie_with_positive_ones) {
  for (std::size_t n : kSizes) {
    const std::size_t k = n / 100;
    for (std::size_t nonzero : {std::size_t{0}, k / 2, k - 1, k}) {
      check(sparse_values(n, nonzero, 3 + nonzero, 0.5), k, "-0 and +0");
      check(sparse_values(n, nonzero, 4 + nonzero, 1.0), k, "-0 only");
    }
  }
}

BOOST_AUTO_TEST_CASE(tiny_and_nonfinite_values_among_zeros) {
  const float denormal = std::numeric_limits<float>::denorm_min();  // key 1
  for (std::size_t n : kSizes) {
    const std::size_t k = n / 100;
    std::vector<float> x = sparse_values(n, k / 2, 9, 0.25);
    x[n / 3] = denormal;
    x[n / 3 + 1] = -denormal;
    x[n / 2] = std::numeric_limits<float>::quiet_NaN();
    x[n - 1] = -std::numeric_limits<float>::infinity();
    x[0] = std::numeric_limits<float>::infinity();
    check(x, k, "denormals, nan, inf");
    check(x, 3, "nan and inf first");
    // Only denormals besides the zeros: the smallest nonzero keys still
    // beat every zero.
    std::vector<float> y = sparse_values(n, 0, 10, 0.5);
    for (std::size_t i = 5; i < n; i += 211) y[i] = (i % 2 ? -1.0f : 1.0f) * denormal;
    check(y, k, "denormals among zeros");
    check(y, n / 400, "denormals among zeros, fewer kept");
  }
}

// The positions a sample reads (every n / 1024-th for n = 300007) hold
// zeros while the rest are nonzero, or the other way round: the sample
// misleads and the radix path decides, with the same result.
BOOST_AUTO_TEST_CASE(zeros_where_the_sample_looks) {
  const std::size_t n = 300007;
  const std::size_t stride = n / 1024;
  std::vector<float> x = t::normal_values(n, 21);
  for (std::size_t i = 0; i < n; i += stride) x[i] = 0.0f;
  for (std::size_t k : {std::size_t{10}, n / 100, n / 20}) check(x, k, "sampled zeros");
  std::vector<float> y(n, 0.0f);
  for (std::size_t i = 0; i < n; i += stride) y[i] = 1.0f + static_cast<float>(i % 3);
  for (std::size_t k : {std::size_t{10}, n / 100, n / 20}) check(y, k, "only sampled nonzero");
}

// A range of a gradient's pairs (as the collective sends them, a frame at
// a time) is laid out as the pairs of the slice of the tensor where the
// range starts: the payload topk makes of that slice, which decodes back
// to the range's values.
BOOST_AUTO_TEST_CASE(a_range_of_pairs_is_the_payload_of_its_slice) {
  const std::size_t n = 50000, k = 2000;
  const std::vector<float> x = t::normal_values(n, 5);
  const auto c = codec::make_codec(CompressionMethod::topk(k));
  const CompressedGradient g = c->compress(x.data(), n, {});
  for (const std::size_t begin : {std::size_t{0}, std::size_t{12345}, std::size_t{40000}}) {
    const std::size_t end = begin + 10000;
    const auto first =
        std::lower_bound(g.indices.begin(), g.indices.end(), begin) - g.indices.begin();
    const auto last = std::lower_bound(g.indices.begin(), g.indices.end(), end) - g.indices.begin();
    const auto m = static_cast<std::size_t>(last - first);
    std::vector<std::uint8_t> range(codec::detail::sparse_bytes(g.indices.data() + first, m,
                                                                static_cast<std::uint32_t>(begin)));
    codec::detail::encode_sparse_range(g.indices.data() + first, g.values.data() + first, m,
                                       static_cast<std::uint32_t>(begin), range.data());
    const auto slice =
        codec::make_codec(CompressionMethod::topk(m))->compress(x.data() + begin, 10000, {});
    BOOST_TEST((range == slice.payload), "values from " << begin);
  }
}

BOOST_AUTO_TEST_SUITE_END()
