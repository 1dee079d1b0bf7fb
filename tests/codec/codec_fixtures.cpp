// codec_fixtures.cpp - what the codec tests share (codec_fixtures.hpp).
#include "codec_fixtures.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <random>

namespace zring::codec::test {

std::vector<float> normal_values(std::size_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& e : v) e = normal(rng);
  return v;
}

namespace {
bool same_result(const CompressedGradient& a, const CompressedGradient& b) {
  return a.indices == b.indices && same_bits(a.values, b.values) && a.payload == b.payload;
}
}  // namespace

void check_corrected(const std::vector<float>& x, const std::vector<float>& r,
                     const CompressionMethod& m, const std::string& what) {
  const auto c = make_codec(m);
  const std::size_t n = x.size();
  const std::string context = what + ", " + m.to_string() + ", n=" + std::to_string(n);
  std::vector<float> made(n), first(n);
  bool finite = true, finite_first = false;
  BOOST_TEST(same_result(c->compress_corrected(x.data(), nullptr, n, made.data(), {}, finite),
                         c->compress(x.data(), n, {})),
             context);
  BOOST_TEST(same_bits(made, x), context);
  BOOST_TEST(!finite, context);
  const CompressedGradient fused =
      c->compress_corrected(x.data(), r.data(), n, made.data(), {}, finite);
  BOOST_TEST(same_result(fused, c->Codec::compress_corrected(x.data(), r.data(), n, first.data(),
                                                             {}, finite_first)),
             context);
  BOOST_TEST(same_bits(made, first), context);
  BOOST_TEST(finite == finite_first, context);
  std::vector<float> over = r;
  BOOST_TEST(
      same_result(c->compress_corrected(x.data(), over.data(), n, over.data(), {}, finite), fused),
      context);
  BOOST_TEST(same_bits(over, first), context);
}

CompressedGradient decoded_copy(const Codec& codec, const CompressedGradient& g) {
  CompressedGradient r;
  r.method = g.method;
  r.original_size = g.original_size;
  r.shape = g.shape;
  r.payload = g.payload;
  codec.decode(r);
  return r;
}

bool rejects(const Codec& codec, std::vector<std::uint8_t> payload, std::size_t n) {
  CompressedGradient g;
  g.method = codec.method();
  g.original_size = n;
  g.payload = std::move(payload);
  return throws_code([&] { codec.decode(g); }, ErrorCode::malformed_message);
}

std::vector<CompressionMethod> every_method() {
  return {CompressionMethod::none(),
          CompressionMethod::fp16(),
          CompressionMethod::bf16(),
          CompressionMethod::topk(10),
          CompressionMethod::topk_ratio(0.05),
          CompressionMethod::randomk(10),
          CompressionMethod::randomk_ratio(0.05),
          CompressionMethod::threshold(1.5f),
          CompressionMethod::quantization(1),
          CompressionMethod::quantization(3),
          CompressionMethod::quantization(8),
          CompressionMethod::quantization(16),
          CompressionMethod::signsgd()};
}

std::size_t leb128_size(std::uint32_t v) {
  std::size_t size = 1;
  for (; v >= 128; v /= 128) ++size;
  return size;
}

std::size_t layout_bytes(const CompressedGradient& g) {
  const std::size_t n = g.original_size;
  const std::size_t blocks = (n + 4095) / 4096;
  switch (g.method.kind()) {
    case CompressionKind::none:
      return 4 * n;
    case CompressionKind::fp16:
    case CompressionKind::bf16:
      return 2 * n;
    case CompressionKind::quantization:
      return 8 * blocks + (n * g.method.bits() + 7) / 8;
    case CompressionKind::signsgd:
      return 4 * blocks + (n + 7) / 8;
    case CompressionKind::randomk: {
      const std::size_t k = g.method.kept_for(n);
      return 8 + 4 + 4 * k + 4 + 8 * (g.indices.size() - k);
    }
    case CompressionKind::topk:
    case CompressionKind::threshold: {
      std::size_t bytes = 4 + 4 * g.indices.size();
      for (std::size_t j = 0; j < g.indices.size(); ++j) {
        bytes += leb128_size(g.indices[j] - (j == 0 ? 0 : g.indices[j - 1]));
      }
      return bytes;
    }
  }
  return 0;
}

}  // namespace zring::codec::test
