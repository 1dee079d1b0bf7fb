// fuzz_codec_decode.cpp - libFuzzer target for the codecs' decode(), the
// validating inverse every payload from the ring goes through.
//
// The input picks a method and an original_size and supplies the payload
// (codec_input.hpp). decode() must either throw zring::Error or fill a view
// that keeps every promise of codec.hpp: dense views hold original_size
// values, sparse ones strictly increasing indices below original_size with
// one value each, and the payload is exactly what encoding that view gives
// back. Decoding the same payload again, into the gradient that already holds
// the view (decode reuses its buffers), yields the same bits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/codec.hpp"
#include "codec/sparse.hpp"
#include "codec_input.hpp"
#include "fuzz_check.hpp"
#include "support/codec_views.hpp"

namespace {

using zring::CompressedGradient;
using zring::CompressionKind;
namespace codec = zring::codec;
namespace fuzz = zring::fuzz;
using zring::testing::expected_value_bits;
using zring::testing::same_bits;

std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
float load_f32(const std::uint8_t* p) {
  const std::uint32_t bits = load_u32(p);
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}
void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_f32(std::vector<std::uint8_t>& out, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  put_u32(out, bits);
}

bool is_sparse(CompressionKind kind) {
  return kind == CompressionKind::topk || kind == CompressionKind::threshold ||
         kind == CompressionKind::randomk;
}

// The view's shape: what codec.hpp and compression.hpp promise of any view.
void check_view(const CompressedGradient& g) {
  const std::size_t n = g.original_size;
  ZRING_FUZZ_CHECK(g.value_bits == expected_value_bits(g.method));
  const double ratio = n == 0 ? 1.0 : static_cast<double>(g.payload.size()) / (4.0 * n);
  ZRING_FUZZ_CHECK(g.compression_ratio == ratio);
  if (!is_sparse(g.method.kind())) {
    ZRING_FUZZ_CHECK(g.indices.empty());
    ZRING_FUZZ_CHECK(g.values.size() == n);
    ZRING_FUZZ_CHECK(g.seed == 0);
    return;
  }
  ZRING_FUZZ_CHECK(g.indices.size() == g.values.size());
  ZRING_FUZZ_CHECK(g.indices.size() <= n);
  for (std::size_t j = 0; j < g.indices.size(); ++j) {
    ZRING_FUZZ_CHECK(g.indices[j] < n);
    ZRING_FUZZ_CHECK(j == 0 || g.indices[j - 1] < g.indices[j]);
  }
  if (g.method.kind() != CompressionKind::randomk) ZRING_FUZZ_CHECK(g.seed == 0);
  // The view scatters into exactly original_size elements.
  const std::vector<float> dense = g.to_dense();
  ZRING_FUZZ_CHECK(dense.size() == n);
  for (std::size_t j = 0; j < g.indices.size(); ++j)
    ZRING_FUZZ_CHECK(std::memcmp(&dense[g.indices[j]], &g.values[j], sizeof(float)) == 0);
}

// randomk: u64 seed, u32 k, the k sampled values, u32 m, m (index, value)
// exceptions - rebuilt from the view and the seed.
std::vector<std::uint8_t> encode_randomk(const CompressedGradient& g) {
  const std::size_t k = g.method.kept_for(g.original_size);
  const std::vector<std::uint32_t> sampled = codec::random_indices(g.seed, g.original_size, k);
  std::vector<std::uint8_t> out;
  put_u32(out, static_cast<std::uint32_t>(g.seed));
  put_u32(out, static_cast<std::uint32_t>(g.seed >> 32));
  put_u32(out, static_cast<std::uint32_t>(k));
  std::vector<std::uint8_t> extra;
  std::size_t s = 0;
  for (std::size_t j = 0; j < g.indices.size(); ++j) {
    if (s < sampled.size() && sampled[s] == g.indices[j]) {
      put_f32(out, g.values[j]);
      ++s;
    } else {
      ZRING_FUZZ_CHECK(!std::isfinite(g.values[j]));  // only inf / nan travel as exceptions
      put_u32(extra, g.indices[j]);
      put_f32(extra, g.values[j]);
    }
  }
  ZRING_FUZZ_CHECK(s == sampled.size());  // every sampled index is in the view
  put_u32(out, static_cast<std::uint32_t>(extra.size() / 8));
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// Affine codecs: a block whose grid (or scale) is nan decodes to nan only,
// any other block to no nan at all; sign values are exactly +-scale.
void check_affine(const CompressedGradient& g) {
  const std::size_t n = g.original_size;
  const bool sign = g.method.kind() == CompressionKind::signsgd;
  const std::size_t header = sign ? 4 : 8;
  for (std::size_t b = 0; b * codec::kBlockElems < n; ++b) {
    const float offset = load_f32(g.payload.data() + header * b);
    const float step = sign ? offset : load_f32(g.payload.data() + header * b + 4);
    const bool nan_grid = std::isnan(offset) || std::isnan(step);
    const std::size_t end = std::min(n, (b + 1) * codec::kBlockElems);
    for (std::size_t i = b * codec::kBlockElems; i < end; ++i) {
      const float v = g.values[i];
      ZRING_FUZZ_CHECK(std::isnan(v) == nan_grid);
      if (sign && !nan_grid) ZRING_FUZZ_CHECK(v == offset || v == -offset);
    }
  }
}

// The payload is what encoding the view gives back, for every codec whose
// encoding of a view is unique.
void check_reencoding(const CompressedGradient& g) {
  const std::size_t n = g.original_size;
  switch (g.method.kind()) {
    case CompressionKind::none: {
      ZRING_FUZZ_CHECK(g.payload.size() == 4 * n);
      for (std::size_t i = 0; i < n; ++i) {
        const float v = load_f32(g.payload.data() + 4 * i);
        ZRING_FUZZ_CHECK(std::memcmp(&v, &g.values[i], 4) == 0);
      }
      break;
    }
    case CompressionKind::fp16:
    case CompressionKind::bf16: {
      const bool half = g.method.kind() == CompressionKind::fp16;
      ZRING_FUZZ_CHECK(g.payload.size() == 2 * n);
      for (std::size_t i = 0; i < n; ++i) {
        const auto word = static_cast<std::uint16_t>(g.payload[2 * i] | g.payload[2 * i + 1] << 8);
        const std::uint16_t again =
            half ? codec::float_to_half(g.values[i]) : codec::float_to_bf16(g.values[i]);
        // A nan stays a nan (its payload bits may change); everything else
        // round-trips exactly.
        if (std::isnan(g.values[i]))
          ZRING_FUZZ_CHECK(
              std::isnan(half ? codec::half_to_float(again) : codec::bf16_to_float(again)));
        else
          ZRING_FUZZ_CHECK(again == word);
      }
      break;
    }
    case CompressionKind::topk:
    case CompressionKind::threshold: {
      CompressedGradient copy = g;
      codec::detail::encode_sparse(copy);
      ZRING_FUZZ_CHECK(copy.payload == g.payload);
      break;
    }
    case CompressionKind::randomk:
      ZRING_FUZZ_CHECK(encode_randomk(g) == g.payload);
      break;
    case CompressionKind::quantization:
    case CompressionKind::signsgd:
      check_affine(g);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = fuzz::read_codec_input(data, size);
  if (!input) return 0;
  CompressedGradient g;
  g.method = input->method;
  g.original_size = input->original_size;
  g.shape = {g.original_size};
  g.payload.assign(input->payload, input->payload + input->payload_size);
  const auto codec = codec::make_codec(g.method);
  if (!fuzz::accepted([&] { codec->decode(g); })) return 0;

  ZRING_FUZZ_CHECK(g.method == input->method);
  ZRING_FUZZ_CHECK(g.original_size == input->original_size);
  ZRING_FUZZ_CHECK(
      g.payload.size() == input->payload_size &&
      (g.payload.empty() || std::memcmp(g.payload.data(), input->payload, g.payload.size()) == 0));
  check_view(g);
  check_reencoding(g);

  // Decoding again into the gradient that holds the view gives the same bits.
  CompressedGradient again = g;
  ZRING_FUZZ_CHECK(fuzz::accepted([&] { codec->decode(again); }));
  ZRING_FUZZ_CHECK(again.indices == g.indices);
  ZRING_FUZZ_CHECK(same_bits(again.values, g.values));
  ZRING_FUZZ_CHECK(again.seed == g.seed);
  return 0;
}
