// codec_input.hpp - how fuzz_codec_decode reads its input, and how the seed
// corpus generator writes one (the two must agree):
//
//   byte 0      kind: bits 0-2 pick a CompressionKind (in enum order), bit 7
//               picks the ratio form of topk / randomk
//   bytes 1-2   param (u16, little-endian): quant bits 1 + param % 16;
//               topk / randomk count param + 1, or ratio (param + 1) / 65536;
//               threshold param / 256
//   bytes 3-6   original_size (u32, little-endian) modulo kMaxOriginalSize + 1
//   the rest    the payload handed to the codec's decode()
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>
#include <zring/compression.hpp>

namespace zring::fuzz {

inline constexpr std::size_t kCodecHeaderBytes = 7;
// Bounds original_size so that what decode may allocate for it (a view of up
// to 4 MiB, randomk's bitmap) stays far below the fuzzer's memory limit.
inline constexpr std::size_t kMaxOriginalSize = std::size_t{1} << 20;

// The first three bytes of an input.
struct MethodSelector {
  std::uint8_t kind = 0;
  std::uint16_t param = 0;
};

inline CompressionMethod method_of(MethodSelector s) {
  const bool ratio = (s.kind & 0x80u) != 0;
  const double fraction = (s.param + 1.0) / 65536.0;
  switch (static_cast<CompressionKind>(s.kind & 0x07u)) {
    case CompressionKind::none:
      return CompressionMethod::none();
    case CompressionKind::fp16:
      return CompressionMethod::fp16();
    case CompressionKind::bf16:
      return CompressionMethod::bf16();
    case CompressionKind::topk:
      return ratio ? CompressionMethod::topk_ratio(fraction)
                   : CompressionMethod::topk(s.param + 1u);
    case CompressionKind::randomk:
      return ratio ? CompressionMethod::randomk_ratio(fraction)
                   : CompressionMethod::randomk(s.param + 1u);
    case CompressionKind::threshold:
      return CompressionMethod::threshold(static_cast<float>(s.param) / 256.0f);
    case CompressionKind::quantization:
      return CompressionMethod::quantization(1u + s.param % 16u);
    case CompressionKind::signsgd:
      return CompressionMethod::signsgd();
  }
  return CompressionMethod::none();  // not reached: the three bits cover every kind
}

struct CodecInput {
  CompressionMethod method;
  std::size_t original_size = 0;
  const std::uint8_t* payload = nullptr;
  std::size_t payload_size = 0;
};

// Nothing when the input is shorter than its header.
inline std::optional<CodecInput> read_codec_input(const std::uint8_t* data, std::size_t size) {
  if (size < kCodecHeaderBytes) return std::nullopt;
  const MethodSelector selector{data[0], static_cast<std::uint16_t>(data[1] | data[2] << 8)};
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(data[3 + i]) << (8 * i);
  return CodecInput{method_of(selector), n % (kMaxOriginalSize + 1), data + kCodecHeaderBytes,
                    size - kCodecHeaderBytes};
}

// The input read_codec_input reads back as (method_of(selector), n, payload).
inline std::vector<std::uint8_t> write_codec_input(MethodSelector selector, std::uint32_t n,
                                                   const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> out{selector.kind, static_cast<std::uint8_t>(selector.param),
                                static_cast<std::uint8_t>(selector.param >> 8)};
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace zring::fuzz
