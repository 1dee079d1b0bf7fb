// test_rng.cpp - the portable generator behind randomk, random_indices and
// tensor_seed. Every rank must draw the same indices, so the exact outputs
// are pinned: a change here breaks mixed-version rings.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <set>
#include <vector>
#include <zring/error.hpp>

#include "codec/codec.hpp"
#include "codec/rng.hpp"
#include "codec_fixtures.hpp"

namespace codec = zring::codec;
using codec::detail::Xoshiro256;

BOOST_AUTO_TEST_SUITE(rng)

BOOST_AUTO_TEST_CASE(splitmix64_matches_the_published_sequence) {
  std::uint64_t state = 0;
  BOOST_TEST(codec::detail::splitmix64(state) == 0xe220a8397b1dcdafull);
  BOOST_TEST(codec::detail::splitmix64(state) == 0x6e789e6aa1b965f4ull);
  BOOST_TEST(codec::detail::splitmix64(state) == 0x06c45d188009454full);
}

BOOST_AUTO_TEST_CASE(mul_high64_is_the_top_of_the_product) {
  std::uint64_t low = 0;
  BOOST_TEST(codec::detail::mul_high64(~0ull, ~0ull, low) == 0xfffffffffffffffeull);
  BOOST_TEST(low == 1u);
  BOOST_TEST(codec::detail::mul_high64(1ull << 63, 4, low) == 2u);
  BOOST_TEST(low == 0u);
}

BOOST_AUTO_TEST_CASE(bounded_draws_stay_in_range_and_spread_evenly) {
  Xoshiro256 rng(99);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = rng.below(10);
    BOOST_REQUIRE(v < 10u);
    ++counts[v];
  }
  for (int c : counts) BOOST_TEST((c > 9500 && c < 10500), c);  // ~16 sigma margin
  BOOST_TEST(rng.below(1) == 0u);
  const std::uint64_t big = (1ull << 63) + 12345;
  for (int i = 0; i < 1000; ++i) BOOST_REQUIRE(rng.below(big) < big);
}

BOOST_AUTO_TEST_CASE(random_indices_are_pinned) {
  // Golden values of this implementation (xoshiro256** seeded by
  // splitmix64, Lemire draws, Floyd's algorithm).
  const std::vector<std::uint32_t> expected = {83, 375, 583, 675, 717, 760, 766, 848, 919, 986};
  BOOST_TEST((codec::random_indices(42, 1000, 10) == expected));
  BOOST_TEST(codec::tensor_seed(1, "layer.weight") == 0xc0b20149cf4a28f5ull);
}

BOOST_AUTO_TEST_CASE(random_indices_are_sorted_distinct_and_in_range) {
  for (std::size_t n : {1, 2, 10, 64, 65, 1000, 100000}) {
    for (std::size_t k : {std::size_t{0}, std::size_t{1}, n / 3, n / 2 + 1, n - 1, n}) {
      if (k > n) continue;
      const std::vector<std::uint32_t> idx = codec::random_indices(n * 31 + k, n, k);
      BOOST_REQUIRE(idx.size() == k);
      BOOST_TEST(std::is_sorted(idx.begin(), idx.end()));
      BOOST_TEST((std::adjacent_find(idx.begin(), idx.end()) == idx.end()));
      BOOST_TEST((k == 0 || idx.back() < n));
    }
  }
  const std::vector<std::uint32_t> all = codec::random_indices(5, 100, 100);
  for (std::uint32_t i = 0; i < 100; ++i) BOOST_TEST(all[i] == i);
}

BOOST_AUTO_TEST_CASE(random_indices_depend_on_the_seed_only) {
  BOOST_TEST((codec::random_indices(7, 100000, 1000) == codec::random_indices(7, 100000, 1000)));
  BOOST_TEST((codec::random_indices(7, 100000, 1000) != codec::random_indices(8, 100000, 1000)));
}

BOOST_AUTO_TEST_CASE(random_indices_cover_the_range_evenly) {
  // Every index is drawn with probability k/n; over many seeds each tenth of
  // the range gets about a tenth of the draws (not a stride, not a cluster).
  std::vector<int> tenths(10, 0);
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    for (std::uint32_t i : codec::random_indices(seed, 1000, 50)) ++tenths[i / 100];
  }
  for (int c : tenths) BOOST_TEST((c > 850 && c < 1150), c);  // expected 1000
  const auto idx = codec::random_indices(3, 1000, 10);
  std::set<std::uint32_t> gaps;
  for (std::size_t j = 1; j < idx.size(); ++j) gaps.insert(idx[j] - idx[j - 1]);
  BOOST_TEST(gaps.size() > 1u);
}

BOOST_AUTO_TEST_CASE(random_indices_reject_impossible_draws) {
  using zring::codec::test::throws_code;
  BOOST_TEST(throws_code([] { (void)codec::random_indices(1, 5, 6); },
                         zring::ErrorCode::invalid_argument));
  BOOST_TEST(codec::random_indices(1, 0, 0).empty());
}

BOOST_AUTO_TEST_CASE(tensor_seed_mixes_op_and_name) {
  BOOST_TEST(codec::tensor_seed(1, "a") == codec::tensor_seed(1, "a"));
  BOOST_TEST(codec::tensor_seed(1, "a") != codec::tensor_seed(1, "b"));
  BOOST_TEST(codec::tensor_seed(1, "a") != codec::tensor_seed(2, "a"));
  BOOST_TEST(codec::tensor_seed(0, "") != codec::tensor_seed(0, std::string_view("\0", 1)));
}

BOOST_AUTO_TEST_SUITE_END()
