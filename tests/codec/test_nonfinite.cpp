// test_nonfinite.cpp - inf and nan never come out finite, whatever the codec,
// so a loss scaler downstream still sees the overflow.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"
#include "support/special_floats.hpp"

using zring::CompressedGradient;
using zring::CompressionKind;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

using zring::testing::kInf;
using zring::testing::kNan;

}  // namespace

BOOST_AUTO_TEST_SUITE(nonfinite)

BOOST_AUTO_TEST_CASE(no_codec_turns_inf_or_nan_finite) {
  std::vector<float> x = t::normal_values(9000, 31);
  const std::vector<std::size_t> bad_at = {0, 17, 4095, 8999};
  x[0] = kNan;
  x[17] = kInf;
  x[4095] = -kInf;
  x[8999] = -kNan;
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    codec::CodecContext ctx;
    ctx.seed = 3;
    const CompressedGradient g = c->compress(x.data(), x.size(), ctx);
    for (const CompressedGradient& view : {g, t::decoded_copy(*c, g)}) {
      const std::vector<float> dense = view.to_dense();
      for (std::size_t i : bad_at)
        BOOST_TEST(!std::isfinite(dense[i]), m.to_string() << " at " << i);
    }
    // Overflow is kept as overflow where the format can say so.
    if (m.kind() == CompressionKind::none || m.kind() == CompressionKind::fp16 ||
        m.kind() == CompressionKind::bf16) {
      BOOST_TEST(std::isnan(g.values[0]));
      BOOST_TEST((std::isinf(g.values[17]) && g.values[17] > 0));
      BOOST_TEST((std::isinf(g.values[4095]) && g.values[4095] < 0));
    }
  }
}

BOOST_AUTO_TEST_CASE(affine_codecs_poison_only_the_block_that_overflowed) {
  std::vector<float> x = t::normal_values(3 * 4096, 8);
  x[5000] = kInf;  // block 1
  for (const CompressionMethod& m :
       {CompressionMethod::quantization(4), CompressionMethod::signsgd()}) {
    const CompressedGradient g = codec::make_codec(m)->compress(x.data(), x.size(), {});
    std::size_t nan_count = 0, finite_elsewhere = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i / 4096 == 1) {
        nan_count += std::isnan(g.values[i]) ? 1 : 0;
      } else {
        finite_elsewhere += std::isfinite(g.values[i]) ? 1 : 0;
      }
    }
    BOOST_TEST(nan_count == 4096u, m.to_string());
    BOOST_TEST(finite_elsewhere == 2u * 4096u, m.to_string());
  }
}

BOOST_AUTO_TEST_CASE(fp16_overflow_becomes_inf) {
  const std::vector<float> x = {70000.0f, -1e30f, 65504.0f};
  const CompressedGradient g =
      codec::make_codec(CompressionMethod::fp16())->compress(x.data(), x.size(), {});
  BOOST_TEST((std::isinf(g.values[0]) && g.values[0] > 0));
  BOOST_TEST((std::isinf(g.values[1]) && g.values[1] < 0));
  BOOST_TEST(g.values[2] == 65504.0f);
}

BOOST_AUTO_TEST_SUITE_END()
