// test_tcp_frames.cpp - the bytes of a TCP data connection (wire/tcp_frames.hpp):
// the hello, frames cut from a stream however it is split, payloads read
// straight into their buffer, and every hostile prefix refused by name.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <optional>
#include <string>
#include <vector>
#include <zring/error.hpp>

#include "wire/tcp_frames.hpp"
#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wire = zring::wire;
namespace wt = zring::wire_test;
using zring::ErrorCode;
using Bytes = std::vector<std::uint8_t>;

namespace {

Bytes frame_bytes(const Bytes& header, std::optional<Bytes> payload) {
  const auto prefix =
      wire::encode_tcp_prefix(header.size(), payload.has_value(), payload ? payload->size() : 0);
  Bytes out(prefix.begin(), prefix.end());
  out.insert(out.end(), header.begin(), header.end());
  if (payload) out.insert(out.end(), payload->begin(), payload->end());
  return out;
}

Bytes sequence(std::size_t n, std::uint8_t first) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(first + i * 7);
  return b;
}

// Feeds `stream` in pieces of `piece` bytes (the last may be shorter) and
// returns the frames in order.
std::vector<wire::TcpFrame> cut(const Bytes& stream, std::size_t piece, std::size_t max_payload) {
  wire::TcpFrameReader reader(max_payload);
  std::vector<wire::TcpFrame> frames;
  for (std::size_t at = 0; at < stream.size();) {
    const auto [room, space] = reader.room();
    BOOST_REQUIRE(space != 0);
    const std::size_t n = std::min({space, piece, stream.size() - at});
    std::memcpy(room, stream.data() + at, n);
    reader.filled(n);
    at += n;
    while (auto frame = reader.next()) frames.push_back(std::move(*frame));
  }
  BOOST_TEST(!reader.mid_frame());
  return frames;
}

std::string refusal(const Bytes& stream, std::size_t max_payload = 1 << 20) {
  try {
    (void)cut(stream, stream.size(), max_payload);
  } catch (const zring::Error& e) {
    BOOST_TEST((e.code() == ErrorCode::malformed_message));
    return e.what();
  }
  BOOST_FAIL("no error");
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tcp_frames)

BOOST_AUTO_TEST_CASE(the_hello_round_trips_and_names_what_is_wrong) {
  const wire::TcpHello hello{7, 0x0123456789abcdefull, 0xfeedfacecafebeefull};
  auto bytes = wire::encode_tcp_hello(hello);
  BOOST_TEST(std::string(bytes.begin(), bytes.begin() + 4) == "zrtd");
  const wire::TcpHello back = wire::decode_tcp_hello(bytes.data(), bytes.size());
  BOOST_TEST(back.sender == 7u);
  BOOST_TEST(back.nonce == hello.nonce);
  BOOST_TEST(back.ring == hello.ring);

  std::string message;
  BOOST_TEST((wt::code_of([&] { (void)wire::decode_tcp_hello(bytes.data(), 31); }, &message) ==
              ErrorCode::malformed_message));
  BOOST_TEST(message == "tcp data connection: a hello of 31 bytes (expected 32)");
  auto other = bytes;
  other[0] = 'Z';
  BOOST_TEST((wt::code_of([&] { (void)wire::decode_tcp_hello(other.data(), 32); }, &message) ==
              ErrorCode::malformed_message));
  BOOST_TEST(message.find("not a zringd data connection") != std::string::npos);
  other = bytes;
  other[4] = static_cast<std::uint8_t>(wire::kWireVersion + 1);
  BOOST_TEST((wt::code_of([&] { (void)wire::decode_tcp_hello(other.data(), 32); }, &message) ==
              ErrorCode::unsupported_version));
  BOOST_TEST(message.find("wire version " + std::to_string(wire::kWireVersion + 1)) !=
             std::string::npos);
  other = bytes;
  other[13] = 1;
  BOOST_TEST((wt::code_of([&] { (void)wire::decode_tcp_hello(other.data(), 32); }, &message) ==
              ErrorCode::malformed_message));
  BOOST_TEST(message == "tcp data connection: the hello's reserved word is not 0");
}

BOOST_AUTO_TEST_CASE(frames_come_out_whole_however_the_stream_is_split) {
  // Small, empty, absent and large payloads (the large one read straight
  // into the frame's own buffer), one after the other.
  const std::vector<std::pair<Bytes, std::optional<Bytes>>> sent = {
      {sequence(40, 1), sequence(8, 9)},
      {sequence(12, 2), std::nullopt},
      {sequence(3, 3), Bytes{}},
      {sequence(70, 4), sequence(300000, 5)},
      {sequence(16384, 6), sequence(32768, 7)},
      {sequence(9, 8), sequence(32769, 9)},
      {sequence(1, 10), sequence(1, 11)}};
  Bytes stream;
  for (const auto& [header, payload] : sent) {
    const Bytes b = frame_bytes(header, payload);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  for (const std::size_t piece :
       {std::size_t{1}, std::size_t{5}, std::size_t{4096}, std::size_t{65536}, stream.size()}) {
    BOOST_TEST_CONTEXT("pieces of " << piece) {
      const std::vector<wire::TcpFrame> frames = cut(stream, piece, 1 << 20);
      BOOST_TEST_REQUIRE(frames.size() == sent.size());
      for (std::size_t i = 0; i < sent.size(); ++i) {
        BOOST_TEST(frames[i].header == sent[i].first);
        BOOST_TEST(frames[i].has_payload == sent[i].second.has_value());
        const Bytes payload = sent[i].second.value_or(Bytes{});
        BOOST_TEST(frames[i].payload_bytes == payload.size());
        BOOST_TEST((frames[i].payload == nullptr) == payload.empty());
        BOOST_TEST(Bytes(frames[i].payload.get(), frames[i].payload.get() + payload.size()) ==
                   payload);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_hostile_prefix_is_refused_before_anything_is_allocated) {
  const auto prefix = [](std::uint32_t header, std::uint32_t flags, std::uint64_t payload) {
    Bytes b(wire::kTcpPrefixBytes);
    std::memcpy(b.data(), &header, 4);
    std::memcpy(b.data() + 4, &flags, 4);
    std::memcpy(b.data() + 8, &payload, 8);
    return b;
  };
  BOOST_TEST(refusal(prefix(0, 0, 0)) == "a frame with a header of 0 bytes (1 .. 16384)");
  BOOST_TEST(refusal(prefix(16385, 0, 0)) == "a frame with a header of 16385 bytes (1 .. 16384)");
  BOOST_TEST(refusal(prefix(10, 2, 0)) == "a frame with unknown flags 2");
  BOOST_TEST(refusal(prefix(10, 0, 5)) ==
             "a frame without a payload that announces 5 payload bytes");
  BOOST_TEST(refusal(prefix(10, 1, 1u << 30), 1 << 20) ==
             "a frame with a payload of 1073741824 bytes, more than "
             "max_message_bytes (1048576)");
  BOOST_TEST(refusal(prefix(10, 1, ~std::uint64_t{0})).find("18446744073709551615 bytes") !=
             std::string::npos);
}

// A long header (a client's manifest on zringd's request socket) is read
// whole, but the buffer grows only with the bytes that came: a prefix
// that announces a header of 200 MiB and sends nothing more costs nothing.
BOOST_AUTO_TEST_CASE(the_buffer_grows_with_a_long_header_as_its_bytes_come) {
  constexpr std::size_t kMaxHeader = std::size_t{256} << 20;
  wire::TcpFrameReader liar(1 << 20, kMaxHeader);
  const auto announce = wire::encode_tcp_prefix(200u << 20, false, 0);
  auto [room, space] = liar.room();
  std::memcpy(room, announce.data(), announce.size());
  liar.filled(announce.size());
  BOOST_TEST(!liar.next().has_value());
  BOOST_TEST(liar.room().second <= std::size_t{64} << 10);

  const Bytes header = sequence(300000, 3);
  const Bytes whole = frame_bytes(header, sequence(10, 4));
  wire::TcpFrameReader reader(1 << 20, kMaxHeader);
  std::optional<wire::TcpFrame> got;
  for (std::size_t at = 0; at < whole.size();) {
    const auto [to, left] = reader.room();
    BOOST_REQUIRE(left != 0);
    // Never more than twice what came, and a small payload's room.
    BOOST_TEST(at + left <= std::max<std::size_t>(2 * at, 64 << 10) + 32768);
    const std::size_t n = std::min({left, std::size_t{4096}, whole.size() - at});
    std::memcpy(to, whole.data() + at, n);
    reader.filled(n);
    at += n;
    if (auto f = reader.next()) got = std::move(f);
  }
  BOOST_TEST_REQUIRE(got.has_value());
  BOOST_TEST(got->header == header);
  BOOST_TEST(Bytes(got->payload.get(), got->payload.get() + got->payload_bytes) == sequence(10, 4));
}

BOOST_AUTO_TEST_CASE(a_frame_cut_short_stays_pending) {
  const Bytes whole = frame_bytes(sequence(20, 1), sequence(100000, 2));
  wire::TcpFrameReader reader(1 << 20);
  std::size_t at = 0;
  while (at + 1 < whole.size()) {  // all but the last byte
    const auto [room, space] = reader.room();
    const std::size_t n = std::min(space, whole.size() - 1 - at);
    std::memcpy(room, whole.data() + at, n);
    reader.filled(n);
    at += n;
    BOOST_TEST(!reader.next().has_value());
  }
  BOOST_TEST(reader.mid_frame());
}

BOOST_AUTO_TEST_CASE(fingerprints_tell_rings_apart) {
  const auto a = wire::ring_fingerprint({"a", "b"}, {"tcp://h:1", "tcp://h:2"});
  BOOST_TEST(a == wire::ring_fingerprint({"a", "b"}, {"tcp://h:1", "tcp://h:2"}));
  BOOST_TEST(a != wire::ring_fingerprint({"b", "a"}, {"tcp://h:1", "tcp://h:2"}));
  BOOST_TEST(a != wire::ring_fingerprint({"ab", ""}, {"tcp://h:1", "tcp://h:2"}));
  BOOST_TEST(a != wire::ring_fingerprint({"a", "b"}, {"tcp://h:1", "tcp://h:3"}));
}

BOOST_AUTO_TEST_SUITE_END()
