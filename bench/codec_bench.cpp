// codec_bench.cpp - compress and decode throughput of every codec, on one
// core, on a 64 Mi-float gradient. Bytes processed are the float32 input
// bytes, so google-benchmark's bytes_per_second is GB/s of gradient.
//
// compress: x -> CompressedGradient (payload and view), allocation included.
//           compress_sparse/ is the same on a gradient of the same size with
//           99% exact zeros (an averaged sparse gradient, an embedding's).
// decode:   payload -> view (values), into a gradient whose buffers are
//           reused across iterations, as a receiver's would be.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.hpp"
#include "codec/error_feedback.hpp"

namespace {

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;

constexpr std::size_t kElems = std::size_t{64} << 20;

// Normal-ish values at a gradient-like scale, made once for every benchmark.
const std::vector<float>& gradient() {
  static const std::vector<float> x = [] {
    std::vector<float> v(kElems);
    std::mt19937 rng(12345);
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    for (float& e : v) e = normal(rng);
    return v;
  }();
  return x;
}

// The same size, 99% exact zeros: the 1% nonzero at random positions, with
// normal values at the same scale.
const std::vector<float>& sparse_gradient() {
  static const std::vector<float> x = [] {
    std::vector<float> v(kElems, 0.0f);
    std::mt19937 rng(54321);
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    std::uniform_int_distribution<std::size_t> at(0, kElems - 1);
    for (std::size_t j = 0; j < kElems / 100; ++j) v[at(rng)] = normal(rng);
    return v;
  }();
  return x;
}

// The |x| above which about 1% of the gradient lies.
float one_percent_threshold() {
  std::vector<float> mag(gradient().size());
  std::transform(gradient().begin(), gradient().end(), mag.begin(),
                 [](float v) { return std::fabs(v); });
  const auto at = mag.begin() + static_cast<std::ptrdiff_t>(mag.size() * 99 / 100);
  std::nth_element(mag.begin(), at, mag.end());
  return *at;
}

void set_counters(benchmark::State& state, double compression_ratio) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(kElems * sizeof(float)));
  state.counters["ratio"] = compression_ratio;
}

void bm_compress(benchmark::State& state, const CompressionMethod& method, bool sparse) {
  const std::vector<float>& x = sparse ? sparse_gradient() : gradient();
  const auto codec = codec::make_codec(method.base());
  codec::ErrorFeedback feedback;
  codec::CodecContext ctx;
  double ratio = 1.0;
  std::uint64_t op = 0;
  for (auto _ : state) {
    ctx.seed = codec::tensor_seed(++op, "layer.weight");
    CompressedGradient g = method.has_error_feedback()
                               ? feedback.compress(*codec, "layer.weight", x.data(), x.size(), ctx)
                               : codec->compress(x.data(), x.size(), ctx);
    benchmark::DoNotOptimize(g.payload.data());
    benchmark::ClobberMemory();
    ratio = g.compression_ratio;
  }
  set_counters(state, ratio);
}

void bm_decode(benchmark::State& state, const CompressionMethod& method) {
  const auto codec = codec::make_codec(method.base());
  codec::CodecContext ctx;
  ctx.seed = codec::tensor_seed(1, "layer.weight");
  CompressedGradient g = codec->compress(gradient().data(), gradient().size(), ctx);
  for (auto _ : state) {
    codec->decode(g);
    benchmark::DoNotOptimize(g.values.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, g.compression_ratio);
}

// The ring's first pass of an affine method (quantization, signsgd): each
// block's statistics, as a node takes them before the summary round.
void bm_block_stats(benchmark::State& state, const CompressionMethod& method) {
  const auto codec = codec::make_codec(method.base());
  const auto& affine = dynamic_cast<const codec::AffineCodec&>(*codec);
  const std::vector<float>& x = gradient();
  const std::size_t blocks = (x.size() + codec::kBlockElems - 1) / codec::kBlockElems;
  std::vector<float> stats(blocks * affine.stats_per_block());
  for (auto _ : state) {
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t begin = b * codec::kBlockElems;
      affine.block_stats(x.data() + begin, std::min(codec::kBlockElems, x.size() - begin),
                         stats.data() + b * affine.stats_per_block());
    }
    benchmark::DoNotOptimize(stats.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 1.0);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::vector<CompressionMethod> methods = {
      CompressionMethod::none(),
      CompressionMethod::fp16(),
      CompressionMethod::bf16(),
      CompressionMethod::parse("topk:1%"),
      CompressionMethod::parse("randomk:1%"),
      CompressionMethod::threshold(one_percent_threshold()),
      CompressionMethod::quantization(8),
      CompressionMethod::quantization(4),
      CompressionMethod::signsgd(),
      CompressionMethod::parse("ef:topk:1%"),
  };
  for (const CompressionMethod& m : methods) {
    benchmark::RegisterBenchmark(("compress/" + m.to_string()).c_str(), bm_compress, m, false)
        ->Unit(benchmark::kMillisecond);
    if (m.base().kind() == zring::CompressionKind::topk) {
      benchmark::RegisterBenchmark(("compress_sparse/" + m.to_string()).c_str(), bm_compress, m,
                                   true)
          ->Unit(benchmark::kMillisecond);
    }
    const auto kind = m.base().kind();
    if (kind == zring::CompressionKind::quantization || kind == zring::CompressionKind::signsgd) {
      benchmark::RegisterBenchmark(("block_stats/" + m.to_string()).c_str(), bm_block_stats, m)
          ->Unit(benchmark::kMillisecond);
    }
    if (!m.has_error_feedback()) {
      benchmark::RegisterBenchmark(("decode/" + m.to_string()).c_str(), bm_decode, m)
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
