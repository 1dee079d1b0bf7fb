// test_buffer_pool.cpp - large buffers used again (wire/buffer_pool.hpp):
// a buffer let go is handed out again for a size of its class, from any
// thread; sizes outside the pooled range are not kept; the pool never holds
// more than its bound idle, and makes room for the sizes asked for now.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "wire/buffer_pool.hpp"

namespace wire = zring::wire;
using Buffer = std::shared_ptr<std::uint8_t[]>;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

BOOST_AUTO_TEST_SUITE(buffer_pool)

BOOST_AUTO_TEST_CASE(sizes_round_up_to_a_quarter_of_their_power_of_two) {
  BOOST_TEST(wire::pooled_size(wire::kPoolMinBytes) == wire::kPoolMinBytes);
  BOOST_TEST(wire::pooled_size(wire::kPoolMinBytes + 1) == wire::kPoolMinBytes / 4 * 5);
  BOOST_TEST(wire::pooled_size(kMiB) == kMiB);
  BOOST_TEST(wire::pooled_size(kMiB + 1) == kMiB / 4 * 5);
  BOOST_TEST(wire::pooled_size(kMiB / 4 * 7 + 1) == 2 * kMiB);
  BOOST_TEST(wire::pooled_size(wire::kPoolMaxBytes - 1) == wire::kPoolMaxBytes);
  // Outside the pooled range a size is what it is.
  BOOST_TEST(wire::pooled_size(100) == 100u);
  BOOST_TEST(wire::pooled_size(wire::kPoolMaxBytes + 1) == wire::kPoolMaxBytes + 1);
}

BOOST_AUTO_TEST_CASE(a_buffer_let_go_is_handed_out_again_for_a_size_of_its_class) {
  Buffer first = wire::pooled_buffer(kMiB + 100);
  std::memset(first.get(), 0x5a, kMiB + 100);
  const std::uint8_t* where = first.get();
  first.reset();
  const wire::BufferPoolStats before = wire::buffer_pool_stats();
  Buffer again = wire::pooled_buffer(kMiB + 4000);  // the same class: 1.25 MiB
  const wire::BufferPoolStats after = wire::buffer_pool_stats();
  BOOST_TEST(again.get() == where);
  BOOST_TEST(after.handed_out == before.handed_out + 1);
  BOOST_TEST(after.reused == before.reused + 1);
  BOOST_TEST(after.cached_bytes == before.cached_bytes - kMiB / 4 * 5);
  again[kMiB + 3999] = 1;  // the whole size asked for is there
}

BOOST_AUTO_TEST_CASE(sizes_outside_the_range_are_not_kept) {
  const wire::BufferPoolStats before = wire::buffer_pool_stats();
  wire::pooled_buffer(1000).reset();
  wire::pooled_buffer(wire::kPoolMaxBytes + 1).reset();
  const wire::BufferPoolStats after = wire::buffer_pool_stats();
  BOOST_TEST(after.handed_out == before.handed_out);
  BOOST_TEST(after.cached_bytes == before.cached_bytes);
}

BOOST_AUTO_TEST_CASE(a_buffer_let_go_on_another_thread_comes_back) {
  Buffer buffer = wire::pooled_buffer(2 * kMiB);
  const std::uint8_t* where = buffer.get();
  std::thread([b = std::move(buffer)]() mutable { b.reset(); }).join();
  BOOST_TEST(wire::pooled_buffer(2 * kMiB).get() == where);
}

BOOST_AUTO_TEST_CASE(the_pool_holds_at_most_its_bound_and_makes_room_for_other_sizes) {
  // More 1 MiB buffers than the bound, all let go at once.
  std::vector<Buffer> held;
  for (std::size_t i = 0; i < wire::kPoolCachedBytes / kMiB + 16; ++i)
    held.push_back(wire::pooled_buffer(kMiB));
  held.clear();
  BOOST_TEST(wire::buffer_pool_stats().cached_bytes <= wire::kPoolCachedBytes);
  BOOST_TEST(wire::buffer_pool_stats().cached_bytes + kMiB > wire::kPoolCachedBytes);

  // A 4 MiB buffer let go now is kept: 1 MiB ones go to make room.
  Buffer four = wire::pooled_buffer(4 * kMiB);
  const std::uint8_t* where = four.get();
  four.reset();
  BOOST_TEST(wire::buffer_pool_stats().cached_bytes <= wire::kPoolCachedBytes);
  Buffer again = wire::pooled_buffer(4 * kMiB);
  BOOST_TEST(again.get() == where);
}

BOOST_AUTO_TEST_SUITE_END()
