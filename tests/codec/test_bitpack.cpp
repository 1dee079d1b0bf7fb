// test_bitpack.cpp - pack_bits / unpack_bits for every width, against a
// bit-at-a-time reference of the LSB-first stream.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "codec/codec.hpp"

namespace codec = zring::codec;

namespace {

std::vector<std::uint8_t> reference_pack(const std::vector<std::uint32_t>& codes, unsigned bits) {
  std::vector<std::uint8_t> out(codec::packed_bytes(codes.size(), bits), 0);
  std::size_t pos = 0;
  for (std::uint32_t code : codes) {
    for (unsigned b = 0; b < bits; ++b, ++pos) {
      if ((code >> b) & 1u) out[pos / 8] |= static_cast<std::uint8_t>(1u << (pos % 8));
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bitpack)

BOOST_AUTO_TEST_CASE(packed_bytes_rounds_up) {
  BOOST_TEST(codec::packed_bytes(0, 5) == 0u);
  BOOST_TEST(codec::packed_bytes(1, 1) == 1u);
  BOOST_TEST(codec::packed_bytes(8, 1) == 1u);
  BOOST_TEST(codec::packed_bytes(9, 1) == 2u);
  BOOST_TEST(codec::packed_bytes(3, 3) == 2u);
  BOOST_TEST(codec::packed_bytes(4096, 3) == 1536u);
  BOOST_TEST(codec::packed_bytes(1, 32) == 4u);
}

BOOST_AUTO_TEST_CASE(every_width_matches_the_reference_stream) {
  std::mt19937 rng(1);
  for (unsigned bits = 1; bits <= 32; ++bits) {
    const std::uint32_t mask = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
    for (std::size_t n : {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4097}) {
      std::vector<std::uint32_t> codes(n);
      for (auto& c : codes) c = static_cast<std::uint32_t>(rng()) & mask;
      if (n > 2) codes[1] = mask;  // all ones and all zeros at least once
      if (n > 2) codes[2] = 0;
      const std::vector<std::uint8_t> expected = reference_pack(codes, bits);
      // A sentinel byte past the end catches writes beyond packed_bytes.
      std::vector<std::uint8_t> packed(expected.size() + 1, 0xa5);
      codec::pack_bits(codes.data(), n, bits, packed.data());
      BOOST_TEST(packed.back() == 0xa5, "bits " << bits << " n " << n);
      packed.pop_back();
      BOOST_TEST((packed == expected), "bits " << bits << " n " << n);
      std::vector<std::uint32_t> back(n + 1, 0xdeadbeef);
      codec::unpack_bits(packed.data(), n, bits, back.data());
      BOOST_TEST(back.back() == 0xdeadbeefu);
      back.pop_back();
      BOOST_TEST((back == codes), "bits " << bits << " n " << n);
    }
  }
}

BOOST_AUTO_TEST_CASE(stream_is_lsb_first) {
  const std::vector<std::uint32_t> codes = {1, 0, 1, 1, 0, 0, 0, 1, 1};
  std::vector<std::uint8_t> packed(2);
  codec::pack_bits(codes.data(), codes.size(), 1, packed.data());
  BOOST_TEST(packed[0] == 0x8du);  // 1011 0001 read from bit 0 up
  BOOST_TEST(packed[1] == 0x01u);
  const std::vector<std::uint32_t> three = {5, 3};  // 101, 011 -> 011101
  codec::pack_bits(three.data(), 2, 3, packed.data());
  BOOST_TEST(packed[0] == 0x1du);
}

BOOST_AUTO_TEST_SUITE_END()
