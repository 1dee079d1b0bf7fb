// tcp_frames.hpp - the bytes of a ring data connection over plain TCP (internal).
//
// Without CurveZMQ keys a node sends another node its ring messages over a
// TCP connection of its own once it knows that node's data port
// (transport/tcp_data.hpp says when and why). The connection carries, in
// this order and little-endian:
//
//   hello, 32 bytes: magic "zrtd", version (u32, kWireVersion), sender (u32,
//     its listed index), 0 (u32), nonce (u64, this connection's), ring
//     (u64, ring_fingerprint of the ring file's nodes)
//   then frames: header_bytes (u32, 1 .. kMaxTcpHeaderBytes), flags (u32:
//     bit 0 = a payload follows the header, no other bit), payload_bytes
//     (u64, 0 without a payload), the header (a ring header,
//     encode_ring_header) and the payload.
//
// Both decoders face untrusted bytes: every length is checked before
// anything is allocated, and what is wrong is named.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zring::wire {

inline constexpr std::size_t kTcpHelloBytes = 32;
inline constexpr std::size_t kTcpPrefixBytes = 16;
// A ring header is at most a few KiB (its text and member bitmap are bounded).
inline constexpr std::size_t kMaxTcpHeaderBytes = 16 * 1024;

struct TcpHello {
  std::uint32_t sender = 0;
  std::uint64_t nonce = 0;
  std::uint64_t ring = 0;
};

[[nodiscard]] std::array<std::uint8_t, kTcpHelloBytes> encode_tcp_hello(const TcpHello& hello);
// Throws Error(malformed_message) for another magic, Error(unsupported_version)
// for another version.
[[nodiscard]] TcpHello decode_tcp_hello(const std::uint8_t* data, std::size_t size);

// The prefix of a frame of header_bytes of header and, if has_payload,
// payload_bytes of payload.
[[nodiscard]] std::array<std::uint8_t, kTcpPrefixBytes> encode_tcp_prefix(
    std::size_t header_bytes, bool has_payload, std::size_t payload_bytes);

// The same 64-bit value on every node with the same nodes, in the same
// order, at the same addresses (FNV-1a over names and addresses).
[[nodiscard]] std::uint64_t ring_fingerprint(const std::vector<std::string>& names,
                                             const std::vector<std::string>& addresses);

struct TcpFrame {
  std::vector<std::uint8_t> header;
  bool has_payload = false;
  std::shared_ptr<std::uint8_t[]> payload;  // payload_bytes of it (null when 0)
  std::size_t payload_bytes = 0;
};

// Cuts the byte stream after the hello into frames. Small frames are read
// into a buffer of its own, many per read; a large payload goes straight
// into the buffer the frame hands over, with no copy. Headers are at most
// max_header_bytes (kMaxTcpHeaderBytes for ring headers; a client's
// requests to zringd, whose manifests can be long, use the same frames).
class TcpFrameReader {
 public:
  explicit TcpFrameReader(std::size_t max_payload_bytes,
                          std::size_t max_header_bytes = kMaxTcpHeaderBytes);

  // Where the next bytes of the stream go (never empty): read into it, then
  // say how many came.
  [[nodiscard]] std::pair<std::uint8_t*, std::size_t> room();
  void filled(std::size_t n) noexcept;
  // The next whole frame, if one is there. Throws Error(malformed_message)
  // saying what is wrong with the frame's prefix ("a frame with ..."); the
  // stream is then unusable.
  [[nodiscard]] std::optional<TcpFrame> next();
  // Whether bytes of an unfinished frame are held.
  [[nodiscard]] bool mid_frame() const noexcept;

 private:
  static constexpr std::size_t kBufferBytes = 64 * 1024;
  // Payloads up to this size are read through the buffer.
  static constexpr std::size_t kSmallPayloadBytes = 32 * 1024;

  std::size_t max_payload_bytes_;
  std::size_t max_header_bytes_;
  // Grows, as its bytes come, for a header longer than it (never zero-filled).
  std::unique_ptr<std::uint8_t[]> buffer_;
  std::size_t buffer_bytes_ = kBufferBytes;
  std::size_t begin_ = 0;  // unread bytes: [begin_, end_)
  std::size_t end_ = 0;
  std::optional<TcpFrame> large_;  // a frame whose payload is being read into it
  std::size_t large_have_ = 0;
};

}  // namespace zring::wire
