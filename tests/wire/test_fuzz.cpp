// test_fuzz.cpp - every truncation and thousands of seeded single-byte
// corruptions of valid messages: each throws zring::Error or decodes to
// gradients that pass validation. Any other exception, a crash or a
// sanitizer report fails the test.
#include <boost/test/unit_test.hpp>
#include <random>

#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wt = zring::wire_test;
using zring::CompressedMap;
namespace wire = zring::wire;

namespace {

// One tensor per method, small enough that the sweeps stay fast.
wt::Bytes sample_message() {
  CompressedMap m;
  std::uint64_t seed = 1;
  for (const std::string& method : wt::all_methods())
    m.emplace("t." + method, wt::make_gradient(method, 40, {5, 8}, seed++));
  return wire::encode_gradients(m);
}

// Decodes; true when it threw zring::Error, false when it decoded (and then
// the result is checked).
bool rejected(const wt::Bytes& bytes) {
  CompressedMap m;
  try {
    m = wire::decode_gradients(bytes.data(), bytes.size());
  } catch (const zring::Error&) {
    return true;
  }
  wt::check_valid(m);
  // What decoded is stable: encoding it again decodes to the same.
  const wt::Bytes again = wire::encode_gradients(m);
  wt::check_equal(wire::decode_gradients(again.data(), again.size()), m);
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fuzz)

BOOST_AUTO_TEST_CASE(every_truncation_throws) {
  const wt::Bytes full = sample_message();
  BOOST_TEST_REQUIRE(!rejected(full));
  for (std::size_t n = 0; n < full.size(); ++n) {
    // A fresh allocation of exactly n bytes, so a read past it is caught by
    // the address sanitizer.
    const wt::Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    BOOST_TEST_CONTEXT("length " << n) { BOOST_TEST(rejected(cut)); }
  }
}

BOOST_AUTO_TEST_CASE(single_byte_corruptions_throw_or_validate) {
  const wt::Bytes full = sample_message();
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<std::size_t> position(0, full.size() - 1);
  std::uniform_int_distribution<int> delta(1, 255);
  std::size_t thrown = 0;
  constexpr int kTrials = 5000;
  for (int trial = 0; trial < kTrials; ++trial) {
    wt::Bytes bytes = full;
    const std::size_t at = position(rng);
    bytes[at] = static_cast<std::uint8_t>(bytes[at] + delta(rng));  // always a change
    BOOST_TEST_CONTEXT("trial " << trial << ", byte " << at) { thrown += rejected(bytes); }
  }
  // Corrupting the framing must be caught; payload bytes of dense codecs
  // may legitimately decode to other values.
  BOOST_TEST(thrown > 0u);
  BOOST_TEST(thrown < static_cast<std::size_t>(kTrials));
}

BOOST_AUTO_TEST_CASE(corruptions_of_the_header_region_all_throw) {
  // The three header bytes (array of 3, version, type): every other value
  // of any of them must be caught.
  const wt::Bytes full = sample_message();
  for (std::size_t at = 0; at < 3; ++at)
    for (int v = 0; v < 256; ++v) {
      if (v == full[at]) continue;
      wt::Bytes bytes = full;
      bytes[at] = static_cast<std::uint8_t>(v);
      BOOST_TEST_CONTEXT("byte " << at << " = " << v) { BOOST_TEST(rejected(bytes)); }
    }
}

BOOST_AUTO_TEST_SUITE_END()
