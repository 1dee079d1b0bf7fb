// buffer_pool.hpp - large byte buffers used again, op after op (internal).
//
// A ring op moves its data as chunks of about chunk_bytes, each in a buffer
// of its own from its arrival until it is summed and passed on (or written
// into the result). Allocated fresh, such a buffer comes from the kernel as
// new pages: glibc maps buffers that large and unmaps them when they are
// freed, or trims its heap, so every page faults and is zeroed again in every
// op. On a virtual machine whose host backs guest memory lazily that costs
// more than the copy of the bytes: a 256 MiB op on 4 nodes took 2-4x as long
// in some ops as in others (docs/benchmarks.md, "Buffers used again").
//
// The pool keeps the buffers it handed out when their last user lets go,
// sorted into size classes (four a power of two, so a buffer is at most 25%
// larger than asked), and hands them out again; it holds at most
// kPoolCachedBytes of them idle, and never a buffer outside
// [kPoolMinBytes, kPoolMaxBytes] (those come from new[] as before). So a
// process's memory grows by no more than that bound, and only up to what it
// held at once anyway.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace zring::wire {

inline constexpr std::size_t kPoolMinBytes = std::size_t{64} << 10;
inline constexpr std::size_t kPoolMaxBytes = std::size_t{32} << 20;
inline constexpr std::size_t kPoolCachedBytes = std::size_t{64} << 20;

// A buffer of at least `size` bytes, not initialised (a pooled one holds what
// its last user left there); it goes back to the pool when the last
// shared_ptr to it is gone. Thread-safe: any thread may let go of it.
[[nodiscard]] std::shared_ptr<std::uint8_t[]> pooled_buffer(std::size_t size);

struct BufferPoolStats {
  std::uint64_t handed_out = 0;    // pooled_buffer calls of a pooled size
  std::uint64_t reused = 0;        // ... that got a buffer from the pool
  std::uint64_t cached_bytes = 0;  // idle in the pool now
};
[[nodiscard]] BufferPoolStats buffer_pool_stats();

// The bytes a pooled buffer of `size` has (its size class); `size` itself
// outside [kPoolMinBytes, kPoolMaxBytes].
[[nodiscard]] std::size_t pooled_size(std::size_t size) noexcept;

}  // namespace zring::wire
