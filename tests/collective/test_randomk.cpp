// randomk's non-finite values on the ring: an inf or nan a rank holds
// reaches every node's result whether the draw sampled it or not (outside
// the sample it travels in the summary), in the blocks the plan tests whole
// and in the last, short one; more than the summary takes and the whole
// tensor is reported as overflowed.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

#include "ring_run.hpp"

using namespace zring;
using namespace zring::collective;
using namespace zring::collective::ring_test;

BOOST_AUTO_TEST_SUITE(randomk_overflow)

BOOST_AUTO_TEST_CASE(every_non_finite_value_reaches_every_result) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* text : {"randomk:10%", "ef:randomk:10%"}) {
    BOOST_TEST_CONTEXT(text) {
      const CompressionMethod method = CompressionMethod::parse(text);
      InprocRing ring(3);
      std::vector<std::vector<codec::ErrorFeedback>> residuals(
          3, std::vector<codec::ErrorFeedback>(1));
      std::vector<TensorMap> inputs = make_inputs(3, 0, {5000, 3001, 2000});
      // Every position of t000 from 17 to 4016: most outside the 10%
      // sample, some in it. One nan in t001's last, short block.
      for (std::size_t i = 17; i < 4017; i += 400) inputs[1].at("t000")[i] = inf;
      inputs[1].at("t000")[4000] = -inf;
      inputs[0].at("t001")[3000] = nan;
      // More than a summary takes (1024 outside the sample) on one rank:
      // every tensor it names is reported overflowed whole.
      for (float& v : inputs[2].at("t002").data()) v = -inf;
      RingRun run;
      run_op(ring, 1, method, inputs, 0, residuals, run);
      check_same_bits(run);
      const TensorMap result = unfuse(run.outputs[0], inputs[0]);
      for (std::size_t i = 17; i < 4017; i += 400) BOOST_TEST(result.at("t000")[i] == inf, i);
      BOOST_TEST(result.at("t000")[4000] == -inf);
      BOOST_TEST(std::isfinite(result.at("t000")[4001]));
      BOOST_TEST(std::isnan(result.at("t001")[3000]));
      BOOST_TEST(std::isfinite(result.at("t001")[2999]));
      for (float v : result.at("t002").data()) BOOST_TEST_REQUIRE(std::isnan(v));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
