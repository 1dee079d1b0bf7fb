// lanes.hpp - how partial sums are represented while they travel the ring.
//
// A lane fixes the accumulator type, the bytes one value takes on the wire
// and how a received partial sum is combined with the local contribution.
// Which lane a method uses is what keeps the aggregation contract: float32
// sums for dense values, exact widened integers for affine codes, and
// 16-bit values (rounded per hop, the one documented exception) for fp16/bf16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/codec.hpp"
#include "codec/methods.hpp"

namespace zring::collective {

// float32 partial sums, sent as float32.
struct FloatLane {
  using Acc = float;
  static constexpr bool kRounds = false;  // encode/decode is exact
  [[nodiscard]] FloatLane carrying(std::size_t /*nodes*/) const noexcept { return *this; }
  [[nodiscard]] std::size_t wire_bytes(std::size_t n) const noexcept { return n * 4; }
  void encode(const float* acc, std::size_t n, std::uint8_t* out) const noexcept {
    std::memcpy(out, acc, n * 4);
  }
  void decode(const std::uint8_t* in, std::size_t n, float* out) const noexcept {
    std::memcpy(out, in, n * 4);
  }
  // out[i] = in[i] + local[i] where in is wire bytes; out may alias nothing.
  void decode_add(const std::uint8_t* in, std::size_t n, const float* local,
                  float* out) const noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, in + 4 * i, 4);
      out[i] = v + local[i];
    }
  }
};

// float32 partial sums sent as 16-bit words (IEEE half or bfloat16, the
// method's words in its row of codec/methods.cpp): every hop rounds.
// With round_local the local values are the raw float32 input: decode_add
// rounds them to the words and back as it adds them (encode needs no
// change: rounding a rounded value changes nothing), so that a node's
// contribution is not made whole before the op can begin.
struct HalfLane {
  using Acc = float;
  static constexpr bool kRounds = true;
  codec::SixteenBitFormat words;
  bool round_local = false;
  [[nodiscard]] HalfLane carrying(std::size_t /*nodes*/) const noexcept { return *this; }
  [[nodiscard]] std::size_t wire_bytes(std::size_t n) const noexcept { return n * 2; }
  void encode(const float* acc, std::size_t n, std::uint8_t* out) const noexcept;
  void decode(const std::uint8_t* in, std::size_t n, float* out) const noexcept;
  void decode_add(const std::uint8_t* in, std::size_t n, const float* local,
                  float* out) const noexcept;
};

// Bits needed to hold any value in [0, max_value].
[[nodiscard]] inline unsigned bits_for(std::uint64_t max_value) noexcept {
  unsigned bits = 1;
  while (bits < 64 && (max_value >> bits) != 0) ++bits;
  return bits;
}

// Sums of affine codes, exact in uint32, sent bit-packed in `bits` bits.
// The sum of c nodes' codes is below c * node_max + 1, so a message
// carrying it needs only bits_for(c * node_max) bits: b bits on the first
// hop, b + ceil(log2 N) for the complete sum (homomorphic, as in IntSGD /
// THC).
struct CodeLane {
  using Acc = std::uint32_t;
  static constexpr bool kRounds = false;
  unsigned bits = 8;
  std::uint64_t node_max = 0;  // the largest code sum of one node; 0: always `bits`
  [[nodiscard]] CodeLane carrying(std::size_t nodes) const noexcept {
    if (node_max == 0) return *this;
    return CodeLane{bits_for(node_max * nodes), node_max};
  }
  [[nodiscard]] std::size_t wire_bytes(std::size_t n) const noexcept {
    return codec::packed_bytes(n, bits);
  }
  void encode(const std::uint32_t* acc, std::size_t n, std::uint8_t* out) const noexcept {
    codec::pack_bits(acc, n, bits, out);
  }
  void decode(const std::uint8_t* in, std::size_t n, std::uint32_t* out) const noexcept {
    codec::unpack_bits(in, n, bits, out);
  }
  void decode_add(const std::uint8_t* in, std::size_t n, const std::uint32_t* local,
                  std::uint32_t* out) const noexcept {
    codec::unpack_bits(in, n, bits, out);
    for (std::size_t i = 0; i < n; ++i) out[i] += local[i];
  }
};

}  // namespace zring::collective
