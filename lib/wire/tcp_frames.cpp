#include "wire/tcp_frames.hpp"

#include <algorithm>
#include <cstring>
#include <zring/error.hpp>

#include "wire/buffer_pool.hpp"
#include "wire/wire.hpp"

namespace zring::wire {
namespace {

constexpr std::uint32_t kMagic = 0x6474727a;  // "zrtd" read as a little-endian u32
constexpr std::uint32_t kHasPayload = 1;

template <class T>
void store_le(std::uint8_t* at, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    at[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(value) >> (8 * i));
}

template <class T>
T load_le(const std::uint8_t* at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return static_cast<T>(v);
}

[[noreturn]] void bad_hello(const std::string& what) {
  throw Error(ErrorCode::malformed_message, "tcp data connection: " + what);
}

[[noreturn]] void bad_frame(const std::string& what) {
  throw Error(ErrorCode::malformed_message, what);
}

}  // namespace

std::array<std::uint8_t, kTcpHelloBytes> encode_tcp_hello(const TcpHello& hello) {
  std::array<std::uint8_t, kTcpHelloBytes> out{};
  store_le<std::uint32_t>(out.data(), kMagic);
  store_le<std::uint32_t>(out.data() + 4, kWireVersion);
  store_le<std::uint32_t>(out.data() + 8, hello.sender);
  store_le<std::uint64_t>(out.data() + 16, hello.nonce);
  store_le<std::uint64_t>(out.data() + 24, hello.ring);
  return out;
}

TcpHello decode_tcp_hello(const std::uint8_t* data, std::size_t size) {
  if (size != kTcpHelloBytes)
    bad_hello("a hello of " + std::to_string(size) + " bytes (expected " +
              std::to_string(kTcpHelloBytes) + ")");
  if (load_le<std::uint32_t>(data) != kMagic)
    bad_hello("the hello does not begin with \"zrtd\" (not a zringd data connection)");
  const auto version = load_le<std::uint32_t>(data + 4);
  if (version != kWireVersion)
    throw Error(ErrorCode::unsupported_version,
                "tcp data connection: the hello speaks wire version " + std::to_string(version) +
                    ", this zringd " + std::to_string(kWireVersion) +
                    " (every node of a ring needs the same zring release)");
  if (load_le<std::uint32_t>(data + 12) != 0) bad_hello("the hello's reserved word is not 0");
  TcpHello hello;
  hello.sender = load_le<std::uint32_t>(data + 8);
  hello.nonce = load_le<std::uint64_t>(data + 16);
  hello.ring = load_le<std::uint64_t>(data + 24);
  return hello;
}

std::array<std::uint8_t, kTcpPrefixBytes> encode_tcp_prefix(std::size_t header_bytes,
                                                            bool has_payload,
                                                            std::size_t payload_bytes) {
  std::array<std::uint8_t, kTcpPrefixBytes> out{};
  store_le<std::uint32_t>(out.data(), static_cast<std::uint32_t>(header_bytes));
  store_le<std::uint32_t>(out.data() + 4, has_payload ? kHasPayload : 0);
  store_le<std::uint64_t>(out.data() + 8, has_payload ? payload_bytes : 0);
  return out;
}

std::uint64_t ring_fingerprint(const std::vector<std::string>& names,
                               const std::vector<std::string>& addresses) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](const std::string& s) {
    for (const char c : s) h = (h ^ static_cast<std::uint8_t>(c)) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;  // ends every string: "ab","c" differs from "a","bc"
  };
  for (const std::string& n : names) mix(n);
  for (const std::string& a : addresses) mix(a);
  return h;
}

TcpFrameReader::TcpFrameReader(std::size_t max_payload_bytes, std::size_t max_header_bytes)
    : max_payload_bytes_(max_payload_bytes),
      max_header_bytes_(max_header_bytes),
      buffer_(std::make_unique_for_overwrite<std::uint8_t[]>(kBufferBytes)) {}

std::pair<std::uint8_t*, std::size_t> TcpFrameReader::room() {
  if (large_) return {large_->payload.get() + large_have_, large_->payload_bytes - large_have_};
  if (begin_ != 0) {  // keep the unread bytes at the front: a whole frame then fits
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {buffer_.get() + end_, buffer_bytes_ - end_};
}

void TcpFrameReader::filled(std::size_t n) noexcept {
  if (large_)
    large_have_ += n;
  else
    end_ += n;
}

bool TcpFrameReader::mid_frame() const noexcept { return large_.has_value() || end_ != begin_; }

std::optional<TcpFrame> TcpFrameReader::next() {
  if (large_) {
    if (large_have_ < large_->payload_bytes) return std::nullopt;
    std::optional<TcpFrame> frame = std::move(large_);
    large_.reset();
    large_have_ = 0;
    return frame;
  }
  const std::size_t have = end_ - begin_;
  if (have < kTcpPrefixBytes) return std::nullopt;
  const std::uint8_t* at = buffer_.get() + begin_;
  const auto header_bytes = load_le<std::uint32_t>(at);
  const auto flags = load_le<std::uint32_t>(at + 4);
  const auto payload_bytes = load_le<std::uint64_t>(at + 8);
  if (header_bytes == 0 || header_bytes > max_header_bytes_)
    bad_frame("a frame with a header of " + std::to_string(header_bytes) + " bytes (1 .. " +
              std::to_string(max_header_bytes_) + ")");
  if ((flags & ~kHasPayload) != 0) bad_frame("a frame with unknown flags " + std::to_string(flags));
  if (!(flags & kHasPayload) && payload_bytes != 0)
    bad_frame("a frame without a payload that announces " + std::to_string(payload_bytes) +
              " payload bytes");
  if (payload_bytes > max_payload_bytes_)
    bad_frame("a frame with a payload of " + std::to_string(payload_bytes) +
              " bytes, more than max_message_bytes (" + std::to_string(max_payload_bytes_) + ")");
  if (have < kTcpPrefixBytes + header_bytes) {
    // room() moves the unread bytes to the front, and a full buffer doubles
    // (up to the whole header and a small payload): it grows with the bytes
    // that came, never to what a prefix announces before they are there (a
    // stranger's 16 bytes would cost a zero-filled max_header_bytes).
    const std::size_t whole = kTcpPrefixBytes + header_bytes + kSmallPayloadBytes;
    if (have == buffer_bytes_ && buffer_bytes_ < whole) {  // full, so begin_ is 0
      const std::size_t bytes = std::min(whole, 2 * buffer_bytes_);
      auto grown = std::make_unique_for_overwrite<std::uint8_t[]>(bytes);
      std::memcpy(grown.get(), buffer_.get(), have);
      buffer_ = std::move(grown);
      buffer_bytes_ = bytes;
    }
    return std::nullopt;
  }
  const std::size_t payload = static_cast<std::size_t>(payload_bytes);
  const std::size_t in_buffer = have - kTcpPrefixBytes - header_bytes;
  if (in_buffer < payload && payload <= kSmallPayloadBytes) return std::nullopt;  // fits; wait
  TcpFrame frame;
  frame.header.assign(at + kTcpPrefixBytes, at + kTcpPrefixBytes + header_bytes);
  frame.has_payload = (flags & kHasPayload) != 0;
  frame.payload_bytes = payload;
  if (payload != 0) frame.payload = pooled_buffer(payload);  // written next
  const std::size_t copied = std::min(in_buffer, payload);
  if (copied != 0) std::memcpy(frame.payload.get(), at + kTcpPrefixBytes + header_bytes, copied);
  begin_ += kTcpPrefixBytes + header_bytes + copied;
  if (begin_ == end_) begin_ = end_ = 0;
  if (copied == payload) return frame;
  large_ = std::move(frame);  // the rest of the payload is read straight into it
  large_have_ = copied;
  return std::nullopt;
}

}  // namespace zring::wire
