// test_topk.cpp - topk keeps exactly the k largest magnitudes, lower index
// first among ties, checked against a full sort.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

// The brute-force reference: order every index by (nan first, then |x|
// descending, then index ascending), keep k, sort the kept indices.
std::vector<std::uint32_t> reference_topk(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
    if (na != nb) return na;
    const float ma = std::fabs(x[a]), mb = std::fabs(x[b]);
    if (!na && ma != mb) return ma > mb;
    return a < b;
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void check_against_reference(const std::vector<float>& x, const CompressionMethod& m) {
  const auto c = codec::make_codec(m);
  const CompressedGradient g = c->compress(x.data(), x.size(), {});
  const std::vector<std::uint32_t> expected = reference_topk(x, m.kept_for(x.size()));
  BOOST_TEST((g.indices == expected), m.to_string() << " n=" << x.size());
  std::vector<float> values(g.indices.size());
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = x[g.indices[j]];
  BOOST_TEST(t::same_bits(g.values, values));
  t::check_corrected(x, t::normal_values(x.size(), x.size() + 99, 0.5f), m, "normal residual");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(topk)

BOOST_AUTO_TEST_CASE(keeps_the_k_largest_of_random_data) {
  for (std::size_t n : {1, 2, 7, 100, 4097, 50000}) {
    const std::vector<float> x = t::normal_values(n, n);
    for (std::size_t k :
         {std::size_t{1}, std::size_t{2}, n / 100 + 1, n / 2 + 1, n - 1, n, n + 5}) {
      if (k >= 1) check_against_reference(x, CompressionMethod::topk(k));
    }
    check_against_reference(x, CompressionMethod::topk_ratio(0.01));
  }
}

// From n = 2048 on, a sample of the keys (one in 512, 1024 to 16384 of them)
// picks the candidates
// (select_by_sample); ties, nan and inputs built to mislead the sample
// (which fall back to the radix path) must give the same result.
BOOST_AUTO_TEST_CASE(large_inputs_through_the_sample_give_the_same_set) {
  const std::size_t n = 300007;
  std::vector<float> x = t::normal_values(n, 11);
  for (std::size_t k : {std::size_t{1}, std::size_t{10}, n / 100, n / 20, n / 3})
    check_against_reference(x, CompressionMethod::topk(k));
  x[77] = std::numeric_limits<float>::quiet_NaN();
  x[150000] = -std::numeric_limits<float>::infinity();
  check_against_reference(x, CompressionMethod::topk(2));
  check_against_reference(x, CompressionMethod::topk_ratio(0.01));
  // Huge tie groups.
  std::mt19937 rng(5);
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
  for (std::size_t k : {std::size_t{1}, std::size_t{500}, n / 100, n / 9})
    check_against_reference(x, CompressionMethod::topk(k));
  // The sampled positions (every n / samples-th) hold the largest values
  // and nothing else is near them: the sample's bound is too high.
  const std::size_t samples = std::clamp<std::size_t>(n / 512, 1024, 16384);
  const std::size_t stride = n / samples;
  for (std::size_t i = 0; i < n; ++i)
    x[i] =
        i % stride == 0 ? 100.0f + static_cast<float>(i % 7) : 1e-3f * static_cast<float>(i % 13);
  for (std::size_t k : {std::size_t{100}, n / 100, n / 10})
    check_against_reference(x, CompressionMethod::topk(k));
  // And the opposite: the sampled positions hold the smallest values.
  for (std::size_t i = 0; i < n; ++i)
    x[i] = i % stride == 0 ? 0.0f : 1.0f + static_cast<float>(i % 5);
  for (std::size_t k : {std::size_t{100}, n / 100})
    check_against_reference(x, CompressionMethod::topk(k));
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_lower_index) {
  // Small integers: huge tie groups at every magnitude, and +x / -x tie too.
  std::mt19937 rng(8);
  std::vector<float> x(20000);
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 11) - 5);
  for (std::size_t k : {1, 5, 100, 1817, 3000, 9999, 10000, 19999}) {
    check_against_reference(x, CompressionMethod::topk(k));
  }
  const std::vector<float> equal(1000, 0.5f);  // all tied: the first k win
  const auto g =
      codec::make_codec(CompressionMethod::topk(10))->compress(equal.data(), equal.size(), {});
  for (std::uint32_t j = 0; j < 10; ++j) BOOST_TEST(g.indices[j] == j);
  const std::vector<float> zeros(300, 0.0f);
  check_against_reference(zeros, CompressionMethod::topk(7));
}

BOOST_AUTO_TEST_CASE(keys_that_differ_only_in_low_bits) {
  // Values within one top-level radix bucket, so the later levels decide.
  std::vector<float> x(5000);
  std::mt19937 rng(2);
  for (float& v : x)
    v = std::bit_cast<float>(static_cast<std::uint32_t>(0x3f800000u | (rng() & 0x7ffu))) *
        (rng() % 2 ? 1.0f : -1.0f);
  for (std::size_t k : {1, 3, 250, 2500, 4999})
    check_against_reference(x, CompressionMethod::topk(k));
  for (float& v : x)
    v = std::bit_cast<float>(
        static_cast<std::uint32_t>(0x3f800000u | (rng() & 0x3u)));  // 4 distinct keys
  for (std::size_t k : {1, 1200, 1300, 2600, 4000})
    check_against_reference(x, CompressionMethod::topk(k));
}

BOOST_AUTO_TEST_CASE(nan_and_inf_are_kept_first) {
  std::vector<float> x = t::normal_values(1000, 3);
  x[500] = std::numeric_limits<float>::infinity();
  x[10] = std::numeric_limits<float>::quiet_NaN();
  x[999] = -std::numeric_limits<float>::infinity();
  x[20] = 3e38f;
  check_against_reference(x, CompressionMethod::topk(1));
  check_against_reference(x, CompressionMethod::topk(3));
  check_against_reference(x, CompressionMethod::topk(4));
  check_against_reference(x, CompressionMethod::topk(50));
  const auto g = codec::make_codec(CompressionMethod::topk(1))->compress(x.data(), x.size(), {});
  BOOST_TEST(g.indices == std::vector<std::uint32_t>{10}, boost::test_tools::per_element());
  BOOST_TEST(std::isnan(g.values[0]));
}

BOOST_AUTO_TEST_CASE(indices_travel_as_delta_varints) {
  std::vector<float> x(100000, 0.0f);
  x[5] = 1.0f;
  x[200] = -2.0f;
  x[99999] = 3.0f;
  const auto g = codec::make_codec(CompressionMethod::topk(3))->compress(x.data(), x.size(), {});
  // u32 3; three f32; varints 5 (1 byte), 195 (2 bytes), 99799 (3 bytes).
  const std::vector<std::uint8_t> tail(g.payload.end() - 6, g.payload.end());
  BOOST_TEST(tail == (std::vector<std::uint8_t>{0x05, 0xc3, 0x01, 0xd7, 0x8b, 0x06}),
             boost::test_tools::per_element());
  BOOST_TEST(g.payload.size() == 4u + 12u + 6u);
  BOOST_TEST(g.payload[0] == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
