#include "wire/buffer_pool.hpp"

#include <array>
#include <bit>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZRING_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ZRING_ASAN 1
#endif
#ifdef ZRING_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace zring::wire {
namespace {

constexpr std::size_t kClassesPerPower = 4;
constexpr int kMinPower = std::countr_zero(kPoolMinBytes);
constexpr int kMaxPower = std::countr_zero(kPoolMaxBytes);
static_assert(std::has_single_bit(kPoolMinBytes) && std::has_single_bit(kPoolMaxBytes));
// Four classes per power of two from kPoolMinBytes, and kPoolMaxBytes itself.
constexpr std::size_t kClasses = (kMaxPower - kMinPower) * kClassesPerPower + 1;

bool pooled(std::size_t size) noexcept { return size >= kPoolMinBytes && size <= kPoolMaxBytes; }

struct SizeClass {
  std::size_t index;
  std::size_t bytes;
};

// The bytes of a buffer of class `index`: kClassesPerPower classes a power
// of two, each a quarter of it more than the one before.
std::size_t class_bytes(std::size_t index) noexcept {
  const std::size_t power = kPoolMinBytes << (index / kClassesPerPower);
  return power / kClassesPerPower * (kClassesPerPower + index % kClassesPerPower);
}

// The class of a pooled size: the smallest that holds it.
SizeClass size_class(std::size_t size) noexcept {
  const std::size_t power = std::bit_floor(size);
  const std::size_t step = power / kClassesPerPower;
  const std::size_t quarters = (size + step - 1) / step;  // 4 .. 8 (8: the next power)
  const auto k = static_cast<std::size_t>(std::countr_zero(power) - kMinPower);
  const std::size_t index = k * kClassesPerPower + (quarters - kClassesPerPower);
  return {index, class_bytes(index)};
}

void poison(std::uint8_t* p, std::size_t bytes) noexcept {
#ifdef ZRING_ASAN
  ASAN_POISON_MEMORY_REGION(p, bytes);  // idle in the pool: a use after release is caught
#else
  (void)p;
  (void)bytes;
#endif
}

void unpoison(std::uint8_t* p, std::size_t bytes) noexcept {
#ifdef ZRING_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

class Pool {
 public:
  Pool() {
    // Room for every buffer the bound lets the pool keep: giving back never
    // allocates.
    for (std::size_t i = 0; i < kClasses; ++i) idle_[i].reserve(kPoolCachedBytes / class_bytes(i));
  }

  std::uint8_t* take(const SizeClass& c) {
    {
      std::lock_guard lock(mutex_);
      ++stats_.handed_out;
      std::vector<std::uint8_t*>& idle = idle_[c.index];
      if (!idle.empty()) {
        std::uint8_t* p = idle.back();
        idle.pop_back();
        stats_.cached_bytes -= c.bytes;
        ++stats_.reused;
        unpoison(p, c.bytes);
        return p;
      }
    }
    return new std::uint8_t[c.bytes];
  }

  void give_back(std::uint8_t* p, const SizeClass& c) noexcept {
    std::lock_guard lock(mutex_);
    // Make room by letting go of buffers of other sizes, which the ops of
    // now may no longer ask for.
    for (std::size_t i = kClasses; i-- > 0 && stats_.cached_bytes + c.bytes > kPoolCachedBytes;) {
      std::vector<std::uint8_t*>& idle = idle_[i];
      while (i != c.index && !idle.empty() && stats_.cached_bytes + c.bytes > kPoolCachedBytes) {
        delete[] idle.back();
        idle.pop_back();
        stats_.cached_bytes -= class_bytes(i);
      }
    }
    if (stats_.cached_bytes + c.bytes > kPoolCachedBytes) {
      delete[] p;
      return;
    }
    poison(p, c.bytes);
    idle_[c.index].push_back(p);  // reserved: no allocation
    stats_.cached_bytes += c.bytes;
  }

  BufferPoolStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  std::mutex mutex_;
  std::array<std::vector<std::uint8_t*>, kClasses> idle_;
  BufferPoolStats stats_;
};

// Never destroyed: buffers may come back while static objects are destroyed.
Pool& pool() {
  static Pool* const instance = new Pool;
  return *instance;
}

struct GiveBack {
  SizeClass size_class;
  void operator()(std::uint8_t* p) const noexcept { pool().give_back(p, size_class); }
};

}  // namespace

std::shared_ptr<std::uint8_t[]> pooled_buffer(std::size_t size) {
  if (!pooled(size)) return std::shared_ptr<std::uint8_t[]>(new std::uint8_t[size == 0 ? 1 : size]);
  const SizeClass c = size_class(size);
  // If the control block cannot be allocated, the shared_ptr gives p back.
  return std::shared_ptr<std::uint8_t[]>(pool().take(c), GiveBack{c});
}

BufferPoolStats buffer_pool_stats() { return pool().stats(); }

std::size_t pooled_size(std::size_t size) noexcept {
  return pooled(size) ? size_class(size).bytes : size;
}

}  // namespace zring::wire
