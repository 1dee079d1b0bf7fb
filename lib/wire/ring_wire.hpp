// ring_wire.hpp - ring and IPC messages of the wire format (internal).
// (Declared here while wire.hpp is being written; to be folded into it.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collective/link.hpp"
#include "collective/manifest.hpp"

namespace zring::wire {

// --- ring ----------------------------------------------------------------------
// Every ring message is a ZeroMQ message of one or two frames: a msgpack
// RingHeader, then (data only) the raw payload bytes, kept out of msgpack
// so they are never copied.

enum class RingKind : std::uint8_t {
  data = 1,       // a chunk of an op: tag + payload frame
  heartbeat = 2,  // "I am alive, in generation g"
  form = 3,       // the coordinator forms generation g: adopt it, pass it on
  up = 4,         // generation g went all the way round: the ring is up
  reform = 5,     // "please form a new generation" (travels to the coordinator)
  abort = 6,      // op `op` of generation g failed at `origin`: fail it, pass it on
};

struct RingHeader {
  RingKind kind = RingKind::data;
  std::uint64_t generation = 0;
  std::uint64_t op = 0;
  std::uint32_t sender = 0;       // ring index of the node that sent this message
  collective::ChunkTag tag;       // data
  std::uint32_t origin = 0;       // abort, reform: where it started
  std::uint32_t error_code = 0;   // abort: zring::ErrorCode
  std::string text;               // abort, reform: why
};

[[nodiscard]] std::vector<std::uint8_t> encode_ring_header(const RingHeader& header);
// Validated: throws unsupported_version / malformed_message.
[[nodiscard]] RingHeader decode_ring_header(const std::uint8_t* data, std::size_t size);

// The summary every node sends at the start of an op.
[[nodiscard]] std::vector<std::uint8_t> encode_summary(const collective::NodeSummary& summary);
[[nodiscard]] collective::NodeSummary decode_summary(const std::uint8_t* data, std::size_t size);

// A list of byte strings (sparse payloads): u32 count, count x u32 length,
// then the bytes. Decoding returns views into data.
struct Span {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
};
[[nodiscard]] std::vector<std::uint8_t> encode_payload_list(
    const std::vector<std::vector<std::uint8_t>>& payloads);
[[nodiscard]] std::vector<Span> decode_payload_list(const std::uint8_t* data, std::size_t size,
                                                    std::size_t expected_count);

// --- client <-> daemon (IPC) ---------------------------------------------------
// A request or reply is a msgpack IpcHeader frame, then (submit, result) one
// frame of fused float32 values in manifest order.

enum class IpcKind : std::uint8_t {
  hello = 1,      // client -> daemon: local_rank
  welcome = 2,    // daemon -> client: world, rank, ...
  submit = 3,     // client -> daemon: an all-reduce (manifest + values frame)
  result = 4,     // daemon -> client: the averaged values frame
  error = 5,      // daemon -> client: the request failed (code, text)
  keepalive = 6,  // daemon -> client: still working on request `request`
  status = 7,     // zringctl -> daemon: report; daemon -> zringctl: text (JSON)
};

struct IpcHeader {
  IpcKind kind = IpcKind::hello;
  std::uint64_t request = 0;       // echoed in the reply
  std::uint32_t local_rank = 0;    // hello, submit
  collective::Manifest manifest;   // submit
  // welcome
  std::uint32_t world_size = 0;
  std::uint32_t rank = 0;
  std::uint32_t local_ranks = 0;
  std::uint32_t timeout_ms = 0;
  std::uint32_t heartbeat_ms = 0;
  std::string node;                // welcome: node name
  // result
  std::uint64_t op = 0;
  std::uint64_t wire_bytes = 0;    // what this node put on the ring for the op
  std::uint64_t dense_bytes = 0;   // what dense float32 would have cost
  // error, status
  std::uint32_t error_code = 0;
  std::string text;
};

[[nodiscard]] std::vector<std::uint8_t> encode_ipc_header(const IpcHeader& header);
[[nodiscard]] IpcHeader decode_ipc_header(const std::uint8_t* data, std::size_t size);

}  // namespace zring::wire
