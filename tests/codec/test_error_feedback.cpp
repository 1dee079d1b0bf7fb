// test_error_feedback.cpp - the residual: what compression dropped is sent
// later, nothing is lost for good, and one overflow does not poison it.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "codec/codec.hpp"
#include "codec/error_feedback.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

BOOST_AUTO_TEST_SUITE(error_feedback)

BOOST_AUTO_TEST_CASE(starts_from_zero_and_adds_the_residual) {
  codec::ErrorFeedback ef;
  BOOST_TEST(ef.residual("w") == nullptr);
  BOOST_TEST(ef.size() == 0u);
  const std::vector<float> x = {1.0f, 2.0f, 3.0f};
  std::vector<float> out(3);
  ef.corrected("w", x.data(), 3, out.data());
  BOOST_TEST(out == x, boost::test_tools::per_element());
  const std::vector<float> sent = {0.5f, 2.0f, 0.0f};
  ef.update("w", x.data(), sent.data(), 3);
  BOOST_REQUIRE(ef.residual("w") != nullptr);
  BOOST_TEST(*ef.residual("w") == (std::vector<float>{0.5f, 0.0f, 3.0f}),
             boost::test_tools::per_element());
  ef.corrected("w", x.data(), 3, out.data());
  BOOST_TEST(out == (std::vector<float>{1.5f, 2.0f, 6.0f}), boost::test_tools::per_element());
  ef.corrected("other", x.data(), 3, out.data());  // residuals are per name
  BOOST_TEST(out == x, boost::test_tools::per_element());
  const std::vector<float> longer = {1, 1, 1, 1};
  std::vector<float> out4(4);
  ef.corrected("w", longer.data(), 4, out4.data());  // length changed: start over
  BOOST_TEST(out4 == longer, boost::test_tools::per_element());
  BOOST_TEST(ef.size() == 1u);
  ef.clear();
  BOOST_TEST(ef.residual("w") == nullptr);
}

BOOST_AUTO_TEST_CASE(compress_sends_the_codec_output_of_the_corrected_gradient) {
  const auto c = codec::make_codec(CompressionMethod::topk(5));
  codec::ErrorFeedback ef;
  const std::vector<float> x1 = t::normal_values(100, 1), x2 = t::normal_values(100, 2);
  const CompressedGradient g1 = ef.compress(*c, "w", x1.data(), x1.size(), {});
  BOOST_TEST(t::same_bits(g1.values, c->compress(x1.data(), x1.size(), {}).values));
  std::vector<float> corrected(100);
  ef.corrected("w", x2.data(), x2.size(), corrected.data());
  const CompressedGradient g2 = ef.compress(*c, "w", x2.data(), x2.size(), {});
  const CompressedGradient direct = c->compress(corrected.data(), corrected.size(), {});
  BOOST_TEST((g2.payload == direct.payload));
  BOOST_TEST((g2.method == CompressionMethod::topk(5)));
}

// Over any number of steps: sum of what was sent + the final residual ==
// sum of the inputs, element by element (up to float rounding).
BOOST_AUTO_TEST_CASE(mass_is_conserved) {
  for (const CompressionMethod& m :
       {CompressionMethod::topk_ratio(0.01), CompressionMethod::randomk(20),
        CompressionMethod::threshold(1.0f), CompressionMethod::quantization(2),
        CompressionMethod::signsgd(), CompressionMethod::fp16(), CompressionMethod::bf16(),
        CompressionMethod::none()}) {
    const auto c = codec::make_codec(m);
    codec::ErrorFeedback ef;
    const std::size_t n = 5000;
    std::vector<double> inputs(n, 0.0), sent(n, 0.0);
    double scale = 0.0;
    for (int step = 0; step < 20; ++step) {
      const std::vector<float> x = t::normal_values(n, 100 + static_cast<std::uint64_t>(step));
      codec::CodecContext ctx;
      ctx.seed = static_cast<std::uint64_t>(step);
      const CompressedGradient g = ef.compress(*c, "layer", x.data(), n, ctx);
      const std::vector<float> dense = g.to_dense();
      for (std::size_t i = 0; i < n; ++i) {
        inputs[i] += x[i];
        sent[i] += dense[i];
        scale = std::max(scale, std::fabs(inputs[i]) + std::fabs(sent[i]));
      }
    }
    const std::vector<float>& r = *ef.residual("layer");
    double worst = 0.0, residual_mass = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(sent[i] + r[i] - inputs[i]));
      residual_mass += std::fabs(r[i]);
    }
    BOOST_TEST(worst <= 1e-4 * scale, m.to_string() << " worst " << worst << " scale " << scale);
    if (m != CompressionMethod::none()) BOOST_TEST(residual_mass > 0.0, m.to_string());
  }
}

BOOST_AUTO_TEST_CASE(topk_eventually_sends_every_element) {
  // A constant gradient: each element's residual grows until it wins.
  const auto c = codec::make_codec(CompressionMethod::topk(10));
  codec::ErrorFeedback ef;
  std::vector<float> x(100);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = (i % 2 ? -0.5f : 0.5f) * (1.0f + static_cast<float>(i) / 10.0f);
  std::vector<bool> seen(100, false);
  for (int step = 0; step < 200; ++step) {
    for (std::uint32_t i : ef.compress(*c, "w", x.data(), x.size(), {}).indices) seen[i] = true;
  }
  BOOST_TEST(std::count(seen.begin(), seen.end(), true) == 100);
}

BOOST_AUTO_TEST_CASE(non_finite_residual_entries_are_reset) {
  codec::ErrorFeedback ef;
  std::vector<float> x = t::normal_values(5000, 9);
  x[10] = std::numeric_limits<float>::infinity();
  x[4500] = std::numeric_limits<float>::quiet_NaN();
  const auto q = codec::make_codec(CompressionMethod::quantization(4));
  (void)ef.compress(*q, "w", x.data(), x.size(), {});
  const std::vector<float>& r = *ef.residual("w");
  std::size_t finite = 0;
  for (float v : r) finite += std::isfinite(v) ? 1 : 0;
  BOOST_TEST(finite == r.size());
  BOOST_TEST(r[10] == 0.0f);
  BOOST_TEST(r[11] == 0.0f);  // its block decoded to nan: reset too
  BOOST_TEST(r[4500] == 0.0f);
  // The next step is clean again.
  const std::vector<float> y = t::normal_values(5000, 10);
  const CompressedGradient g = ef.compress(*q, "w", y.data(), y.size(), {});
  for (float v : g.values) BOOST_REQUIRE(std::isfinite(v));
  // update() applies the same rule.
  const std::vector<float> c = {std::numeric_limits<float>::infinity(), 1.0f};
  const std::vector<float> d = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  ef.update("u", c.data(), d.data(), 2);
  BOOST_TEST(*ef.residual("u") == (std::vector<float>{0.0f, 0.0f}),
             boost::test_tools::per_element());
}

// The ring's way: corrected in the staging buffer, the sparse view taken off
// in place. Whether or not every corrected value was finite, the staged
// residual is the corrected values without the view's entries, with
// non-finite ones stored as 0, the same as compress() keeps.
BOOST_AUTO_TEST_CASE(staged_sparse_residuals_match_compress_with_and_without_overflow) {
  const auto c = codec::make_codec(CompressionMethod::topk(10));
  const float inf = std::numeric_limits<float>::infinity();
  for (const bool overflow : {false, true}) {
    BOOST_TEST_CONTEXT("overflow " << overflow) {
      codec::ErrorFeedback staged, direct;
      for (int step = 0; step < 3; ++step) {
        std::vector<float> x = t::normal_values(1000, 20 + step);
        if (overflow && step == 2) {  // more than top-k keeps: some stay off the view
          for (std::size_t i = 0; i < 15; ++i) x[60 * i + 3] = i % 2 ? inf : -inf;
          x[901] = std::numeric_limits<float>::quiet_NaN();
        }
        float* corrected = staged.corrected_in_staging("w", x.data(), x.size());
        const CompressedGradient view = c->compress(corrected, x.size(), {});
        staged.stage_sparse("w", corrected, x.size(), view);
        staged.commit();
        const CompressedGradient sent = direct.compress(*c, "w", x.data(), x.size(), {});
        BOOST_TEST((view.indices == sent.indices));
        BOOST_TEST(t::same_bits(*staged.residual("w"), *direct.residual("w")));
        for (const float v : *staged.residual("w")) BOOST_REQUIRE(std::isfinite(v));
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
