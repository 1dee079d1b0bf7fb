// test_threshold.cpp - threshold keeps exactly the pairs with |x| > t.
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

BOOST_AUTO_TEST_SUITE(threshold)

BOOST_AUTO_TEST_CASE(keeps_exactly_the_values_above_t) {
  for (float th : {0.0f, 0.5f, 1.0f, 2.5f, 100.0f}) {
    std::vector<float> x = t::normal_values(9000, 6);
    x[1] = th;                        // equal to t: dropped
    x[2] = -th;                       // equal magnitude: dropped
    x[3] = std::nextafter(th, 1e9f);  // just above: kept
    const auto g =
        codec::make_codec(CompressionMethod::threshold(th))->compress(x.data(), x.size(), {});
    std::vector<std::uint32_t> expected;
    std::vector<float> values;
    for (std::uint32_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) > th) {
        expected.push_back(i);
        values.push_back(x[i]);
      }
    }
    BOOST_TEST((g.indices == expected), "t=" << th);
    BOOST_TEST(t::same_bits(g.values, values));
    BOOST_TEST(g.indices.size() > 0u);
  }
}

BOOST_AUTO_TEST_CASE(zero_threshold_drops_only_zeros) {
  const std::vector<float> x = {0.0f, -0.0f, 1e-45f, -1.0f, 0.0f};
  const auto g =
      codec::make_codec(CompressionMethod::threshold(0.0f))->compress(x.data(), x.size(), {});
  BOOST_TEST(g.indices == (std::vector<std::uint32_t>{2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(nothing_above_gives_an_empty_sparse_view) {
  const std::vector<float> x(1000, 0.25f);
  const auto c = codec::make_codec(CompressionMethod::threshold(1.0f));
  const CompressedGradient g = c->compress(x.data(), x.size(), {});
  BOOST_TEST(g.indices.empty());
  BOOST_TEST(g.values.empty());
  BOOST_TEST(g.payload.size() == 4u);
  BOOST_TEST((g.to_dense() == std::vector<float>(1000, 0.0f)));
}

BOOST_AUTO_TEST_CASE(nan_and_inf_are_always_kept) {
  std::vector<float> x(100, 0.0f);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[8] = -std::numeric_limits<float>::infinity();
  const auto g =
      codec::make_codec(CompressionMethod::threshold(1e30f))->compress(x.data(), x.size(), {});
  BOOST_TEST(g.indices == (std::vector<std::uint32_t>{7, 8}), boost::test_tools::per_element());
  BOOST_TEST(std::isnan(g.values[0]));
  BOOST_TEST(std::isinf(g.values[1]));
}

// Against the plain test !(|x| <= t), at lengths around the vector width
// and the collecting block, with nan, inf, -0, denormals and t itself
// among the values; and error feedback's compress_corrected against
// making the corrected values first.
BOOST_AUTO_TEST_CASE(matches_the_plain_test_at_every_length) {
  const float largest = std::numeric_limits<float>::max();
  for (std::size_t n : {0, 1, 7, 8, 9, 4095, 4096, 4097, 12289, 70001}) {
    for (float th : {0.0f, 1.0f, largest}) {
      std::vector<float> x = t::normal_values(n, n + 3, 2.0f);
      for (std::size_t i = 0; i < n; ++i) {
        if (i % 97 == 5) x[i] = std::numeric_limits<float>::quiet_NaN();
        if (i % 89 == 6) x[i] = -std::numeric_limits<float>::infinity();
        if (i % 83 == 7) x[i] = -0.0f;
        if (i % 79 == 8) x[i] = std::numeric_limits<float>::denorm_min();
        if (i % 73 == 9) x[i] = i % 2 ? th : -th;
        if (i % 71 == 10) x[i] = largest;
      }
      const CompressionMethod m = CompressionMethod::threshold(th);
      const CompressedGradient g = codec::make_codec(m)->compress(x.data(), n, {});
      std::vector<std::uint32_t> expected;
      std::vector<float> values;
      for (std::uint32_t i = 0; i < n; ++i) {
        if (!(std::fabs(x[i]) <= th)) {
          expected.push_back(i);
          values.push_back(x[i]);
        }
      }
      BOOST_TEST((g.indices == expected), "n=" << n << " t=" << th);
      BOOST_TEST(t::same_bits(g.values, values), "n=" << n << " t=" << th);
      t::check_corrected(x, t::normal_values(n, n + 4, 0.5f), m, "threshold");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
