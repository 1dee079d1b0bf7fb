// float_sum.hpp - the float32 loops of the ring's hot path (internal).
//
// Each is a plain loop the compiler vectorises, built for the baseline and
// for AVX2 (ZRING_VECTOR_CLONES). Averages divide by the divisor; when it is
// a power of two they multiply by its inverse instead, which is exact and so
// gives the same bits, at a fraction of the cost of a division.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zring::collective {

// result[i] /= divisor for n values.
void divide(float* result, std::size_t n, std::size_t divisor) noexcept;

// sum[i] += mine[i]: a received partial sum plus this node's values.
void add_into(float* sum, const float* mine, std::size_t n) noexcept;

// sum[i] += mine[i], then out[i] = sum[i] / divisor (divisor 1: the sum).
// out may be mine (the result written over the input).
void add_and_average(float* sum, const float* mine, float* out, std::size_t n,
                     std::size_t divisor) noexcept;

// out[i] = the float at in + 4 i (any alignment) / divisor.
void average_from_wire(const std::uint8_t* in, float* out, std::size_t n,
                       std::size_t divisor) noexcept;

// Results this large are written with streaming (non-temporal) stores where
// the CPU has them (AVX2): they go straight to memory without first reading
// each cache line in, and do not push the working set out of the cache. The
// bits are those of the functions above.
inline constexpr std::size_t kStreamElems = std::size_t{1} << 20;

// average_from_wire, streaming out.
void average_from_wire_streamed(const std::uint8_t* in, float* out, std::size_t n,
                                std::size_t divisor) noexcept;

// add_and_average, streaming out (sum is stored as usual).
void add_and_average_streamed(float* sum, const float* mine, float* out, std::size_t n,
                              std::size_t divisor) noexcept;

// memcpy of n floats, streaming out: a client's values into the shared
// buffer and its averages out of it, piece by piece (glibc's memcpy streams
// only single copies larger than most of the cache, never 1 MiB pieces).
void copy_streamed(float* out, const float* in, std::size_t n) noexcept;

}  // namespace zring::collective
