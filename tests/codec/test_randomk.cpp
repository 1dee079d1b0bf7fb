// test_randomk.cpp - randomk sends the values at the seed's indices, and
// inf/nan wherever they are.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

CompressedGradient compress(const CompressionMethod& m, const std::vector<float>& x,
                            std::uint64_t seed) {
  codec::CodecContext ctx;
  ctx.seed = seed;
  return codec::make_codec(m)->compress(x.data(), x.size(), ctx);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(randomk)

BOOST_AUTO_TEST_CASE(values_are_taken_at_the_seeds_indices) {
  const std::vector<float> x = t::normal_values(10000, 1);
  const CompressionMethod m = CompressionMethod::randomk_ratio(0.03);
  const CompressedGradient g = compress(m, x, 99);
  BOOST_TEST((g.indices == codec::random_indices(99, x.size(), 300)));
  for (std::size_t j = 0; j < g.indices.size(); ++j) BOOST_REQUIRE(g.values[j] == x[g.indices[j]]);
  BOOST_TEST(g.seed == 99u);
  // Layout: seed, k, k values, m = 0.
  BOOST_TEST(g.payload.size() == 8u + 4u + 4u * 300u + 4u);
  BOOST_TEST(g.payload[0] == 99u);
  BOOST_TEST(g.payload[8] == 300u % 256u);
  BOOST_TEST(g.payload[9] == 300u / 256u);
}

BOOST_AUTO_TEST_CASE(same_seed_same_indices_other_seed_other_indices) {
  const std::vector<float> x = t::normal_values(5000, 2);
  const std::vector<float> y = t::normal_values(5000, 3);
  const CompressionMethod m = CompressionMethod::randomk(50);
  BOOST_TEST((compress(m, x, 7).indices == compress(m, y, 7).indices));
  BOOST_TEST((compress(m, x, 7).payload == compress(m, x, 7).payload));
  BOOST_TEST((compress(m, x, 7).indices != compress(m, x, 8).indices));
}

BOOST_AUTO_TEST_CASE(unsampled_overflow_travels_as_exceptions) {
  std::vector<float> x = t::normal_values(1000, 4);
  const CompressionMethod m = CompressionMethod::randomk(10);
  const std::vector<std::uint32_t> sampled = codec::random_indices(5, x.size(), 10);
  // Non-finite values at two unsampled places and one sampled place.
  std::vector<std::uint32_t> unsampled;
  for (std::uint32_t i = 0; unsampled.size() < 2; ++i) {
    if (!std::binary_search(sampled.begin(), sampled.end(), i)) unsampled.push_back(i);
  }
  x[unsampled[0]] = std::numeric_limits<float>::infinity();
  x[unsampled[1]] = std::numeric_limits<float>::quiet_NaN();
  x[sampled[3]] = -std::numeric_limits<float>::infinity();
  const CompressedGradient g = compress(m, x, 5);
  BOOST_TEST(g.indices.size() == 12u);
  BOOST_TEST(g.payload.size() == 8u + 4u + 40u + 4u + 16u);
  const std::vector<float> dense = g.to_dense();
  BOOST_TEST(std::isinf(dense[unsampled[0]]));
  BOOST_TEST(std::isnan(dense[unsampled[1]]));
  BOOST_TEST(std::isinf(dense[sampled[3]]));
  std::vector<std::uint32_t> expected = sampled;
  expected.insert(expected.end(), unsampled.begin(), unsampled.end());
  std::sort(expected.begin(), expected.end());
  BOOST_TEST((g.indices == expected));
}

BOOST_AUTO_TEST_CASE(k_follows_the_method) {
  const std::vector<float> x = t::normal_values(7, 5);
  BOOST_TEST(compress(CompressionMethod::randomk(100), x, 1).indices.size() == 7u);
  BOOST_TEST(compress(CompressionMethod::randomk_ratio(0.01), x, 1).indices.size() == 1u);
  BOOST_TEST(compress(CompressionMethod::randomk(3), x, 1).indices.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
