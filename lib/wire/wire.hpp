// wire.hpp - the zring wire format (internal to libzring).
//
// Every msgpack message zring sends (between ranks, between a client and its
// zringd, around the ring) is one msgpack array:
//
//   [version, type, body...]
//
// version is kWireVersion (an unsigned integer) and is always read first, so a
// peer speaking another protocol gets unsupported_version, never a confusing
// decode error. type is a MessageType; the body depends on the type. Messages
// are positional: no maps, no ext types. The one message that is not msgpack,
// the payload list, is always framed inside a versioned exchange (its size is
// announced by a summary).
//
// lib/wire is the only place of zring that knows msgpack (wire.cpp: gradients;
// wire_ring.cpp: ring headers, summaries, payload lists; wire_ipc.cpp: client
// <-> daemon messages; wire_status.cpp: a daemon's status report for
// zringctl (daemon_status.hpp); wire_trace.cpp: a daemon's op timeline;
// wire_manifest.cpp: tensor names, shapes and manifests; msgpack_io.*: the
// reader and writer they all share).
// Decoders face untrusted bytes: the version is judged first, every length is
// checked against the message type's limits before anything is allocated for
// it, and every violation throws zring::Error(malformed_message) naming the
// message, the field and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "wire/daemon_status.hpp"
#include "wire/messages.hpp"

namespace zring::wire {

// Bump on any incompatible change of any message layout (3: manifests say
// what the op is, all-reduce or broadcast, and the ring has a broadcast phase;
// 4: each kind of IPC message has its own fields, and the replies to status,
// attach and trace requests their own kinds; 5: the direct schedule's
// phases, to_owner and from_owner; 6: a node's first data messages come
// right behind its summary, before the receiver may have begun the op, and
// a shared-buffer op's Result is written on the buffer's board, not sent;
// 7: ring messages may travel on plain TCP connections, RingHeader::data_port
// and the kinds data_via_tcp and data_via_zmq, tcp_frames.hpp; the status
// report says of each member whether ring messages to it go on TCP; the
// request socket, daemon/request_socket.hpp; 8: a local rank has two shared
// buffers, Attach and the shared and staged Submits name theirs; 9: fp16
// and bf16 ops of one local rank take the direct schedule, which nodes of
// version 8 would wait for in vain; 10: ring headers carry the settings
// every node must share, RingSettings).
inline constexpr std::uint32_t kWireVersion = 10;

// What a message is. Values are part of the wire format: never renumber.
enum class MessageType : std::uint32_t {
  gradients = 1,  // a CompressedMap (one rank's compressed gradients)
  ring = 2,       // a RingHeader (ring traffic between zringd nodes)
  summary = 3,    // a NodeSummary (the first phase of every op)
  ipc = 4,        // an IpcMessage (client or zringctl <-> zringd)
  trace = 5,      // a Trace (zringd -> zringctl: the timeline of its last ops)
};

// Checks the header of any message and returns its type. Throws
// unsupported_version for another protocol version and malformed_message for
// anything that does not start [kWireVersion, known type, ...]. The body is
// not checked: the decoder of the type does that.
[[nodiscard]] MessageType peek_message_type(const std::uint8_t* data, std::size_t size);

// --- gradients -----------------------------------------------------------------

// Longest CompressionMethod text accepted ("ef:threshold:0.001" is 18).
inline constexpr std::size_t kMaxMethodBytes = 64;

// Bounds a decoder enforces on untrusted input. The defaults admit anything
// a well-behaved zring sends; tighter values are for tests and for sockets
// that know their peers send less.
//
// Memory: before unpacking, the message's msgpack tree is scanned and at most
// 3 + max_tensors * (6 + max_rank) objects (24 bytes each, about 22 MiB with
// the defaults) are ever allocated for it; strings and payloads are read in
// place and each payload is copied once. The decoded float32 view costs 4
// bytes per kept element, so it is bounded by 4 * max_total_elements bytes.
struct DecodeLimits {
  // The whole message (the largest ZMQ_MAXMSGSIZE a config should set).
  std::size_t max_message_bytes = std::size_t{1} << 30;
  // Tensors in one gradients message.
  std::size_t max_tensors = std::size_t{1} << 16;
  // Elements of one tensor: indices travel as uint32, so 2^32 - 1 at most.
  std::size_t max_elements = 0xFFFFFFFFu;
  // Elements of all tensors of one message together (16 GiB as float32).
  std::size_t max_total_elements = std::size_t{1} << 32;
  // Bytes of one tensor name.
  std::size_t max_name_bytes = 1024;
  // Dimensions of one tensor shape (5-D covers 3-D convolution weights).
  std::size_t max_rank = 8;
};

// A gradients message: [version, 1 (gradients), [entry...]], one entry per
// tensor, in name order:
//   [name (str, 1..max_name_bytes), method (str, CompressionMethod text,
//    never "ef:..."), shape (array of uint), original_size (uint),
//    payload (bin: the codec's encoding)]
// Only the payload carries values; the decoder rebuilds the view (indices,
// values, seed, ...) from it with the codec, which validates it.
// Throws invalid_argument when a gradient cannot be encoded (its method has
// error feedback, or a size exceeds what msgpack can frame: 2^32 - 1).
[[nodiscard]] std::vector<std::uint8_t> encode_gradients(const CompressedMap& gradients);

[[nodiscard]] CompressedMap decode_gradients(const std::uint8_t* data, std::size_t size,
                                             const DecodeLimits& limits = {});

// --- manifests (inside summaries and IPC submits) --------------------------------
//
// A Manifest travels as
//   [method (str, <= kMaxMethodBytes, not parsed here),
//    [[name (str, 1..kMaxManifestNameBytes), shape (array of <= kMaxManifestRank
//      uint, each < 2^32), numel (uint < 2^32, the product of the shape)]...],
//    kind (OpKind: 1 all-reduce, 2 broadcast), root (uint < 2^32, 0 unless
//    kind is broadcast)]
// with at most kMaxManifestTensors tensors, names strictly increasing (sorted,
// no duplicates). The bounds are DecodeLimits' defaults.
inline constexpr std::size_t kMaxManifestTensors = std::size_t{1} << 16;
inline constexpr std::size_t kMaxManifestRank = 8;
inline constexpr std::size_t kMaxManifestNameBytes = 1024;

// --- ring ----------------------------------------------------------------------
// Every ring message is a ZeroMQ message of one or two frames: a msgpack
// RingHeader, then (data only) the raw payload bytes, kept out of msgpack
// so they are never copied.

enum class RingKind : std::uint8_t {
  data = 1,       // a chunk of an op: tag + payload frame
  heartbeat = 2,  // "I am alive, in generation g" (+ the ring it is up in), to every listed node
  form = 3,       // the coordinator forms generation g of `members`: adopt it, pass it on
  up = 4,         // generation g went all the way round: the ring is up
  reform = 5,     // "please form a new generation" (to the coordinator)
  abort = 6,      // op `op` of generation g failed at `origin`: fail it (to every member)
  // On ZeroMQ, between two nodes (transport/tcp_data.hpp): "what I send you
  // after this comes on my TCP connection whose nonce is `op`" ...
  data_via_tcp = 7,
  // ... and "what I send you after this comes on ZeroMQ again".
  data_via_zmq = 8,
};

// The settings of a ring file that every node must share (its node list,
// configuration.md's keys "the same on every node"): nodes that disagree on
// them would cut ops differently, divide by other world sizes or wait for
// messages that never come. Every control message carries its sender's; a
// node leaves one that disagrees out of its ring (transport/membership.hpp).
struct RingSettings {
  std::uint64_t nodes = 0;  // ring_fingerprint (tcp_frames.hpp) of the nodes' names and addresses
  std::uint32_t local_ranks = 0;
  std::uint32_t min_nodes = 0;  // the quorum, a majority resolved
  std::uint64_t chunk_bytes = 0;
  std::uint64_t gather_bytes = 0;
  std::uint64_t direct_bytes = 0;
  bool operator==(const RingSettings&) const = default;
};

// What differs between two nodes' settings, as "local_ranks 2 there, 1
// here; ...", naming every key that differs; empty when they agree.
[[nodiscard]] std::string settings_difference(const RingSettings& here, const RingSettings& there);

struct RingHeader {
  RingKind kind = RingKind::data;
  std::uint64_t generation = 0;
  std::uint64_t op = 0;
  std::uint32_t sender = 0;      // listed index (ring file order) of the node that sent this
  ChunkTag tag;                  // data
  std::uint32_t origin = 0;      // form, up, abort, reform: where it started
  std::uint32_t error_code = 0;  // abort: zring::ErrorCode
  std::string text;              // form, abort, reform: why
  // form: the proposed ring; heartbeat: the ring the sender is up in (empty
  // when it is not up). Listed indices, increasing.
  std::vector<std::uint32_t> members;
  // Every control message: the TCP port the sender takes ring messages on
  // (tcp_frames.hpp), 0 when it takes them on ZeroMQ only.
  std::uint32_t data_port = 0;
  // Heartbeat, form, up, reform: the sender's; all zero in other messages.
  RingSettings settings;
};

// Longest RingHeader::text and NodeSummary::error; encoders cut longer ones.
inline constexpr std::size_t kMaxRingTextBytes = 4096;
// Largest listed index a RingHeader's members can name, plus one.
inline constexpr std::size_t kMaxRingNodes = 4096;

// [version, 2 (ring), kind (1..8), generation, op, sender, phase (0..8; 1..8
//  for data), segment, chunk, hop, origin, error_code (one of kErrorCodes),
//  text (str), members (bin: a bitmap, bit i of byte i / 8 for listed node
//  i, at most kMaxRingNodes / 8 bytes, no trailing zero byte), data_port
//  (0..65535), settings: nodes, local_ranks, min_nodes, chunk_bytes,
//  gather_bytes, direct_bytes]: 21 flat items, the u32 fields < 2^32.
[[nodiscard]] std::vector<std::uint8_t> encode_ring_header(const RingHeader& header);
// Validated: throws unsupported_version / malformed_message.
[[nodiscard]] RingHeader decode_ring_header(const std::uint8_t* data, std::size_t size);

// The summary every node sends at the start of an op:
// [version, 3 (summary), manifest (see above), error (str), error_code
//  (one of kErrorCodes), stats (bin: float32 each, host byte order),
//  nonfinite (bin: 12 bytes each: u32 tensor, u32 index, float32 value, host
//  byte order), blob_bytes (uint <= kMaxBlobBytes)]
inline constexpr std::uint64_t kMaxBlobBytes = std::uint64_t{1} << 40;
[[nodiscard]] std::vector<std::uint8_t> encode_summary(const NodeSummary& summary);
[[nodiscard]] NodeSummary decode_summary(const std::uint8_t* data, std::size_t size);

// A list of byte strings (sparse payloads), not msgpack: u32 count, count x
// u32 length, then the bytes, integers in host byte order. Decoding returns
// views into data and checks the count against expected_count and that the
// lengths cover the bytes exactly.
struct Span {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
};
[[nodiscard]] std::vector<std::uint8_t> encode_payload_list(
    const std::vector<std::vector<std::uint8_t>>& payloads);
// The size of the list of `count` payloads of `payload_bytes` in all.
[[nodiscard]] constexpr std::size_t payload_list_bytes(std::size_t count,
                                                       std::size_t payload_bytes) noexcept {
  return 4 + 4 * count + payload_bytes;
}
[[nodiscard]] std::vector<Span> decode_payload_list(const std::uint8_t* data, std::size_t size,
                                                    std::size_t expected_count);

// --- client <-> daemon (IPC) ---------------------------------------------------
// A request or reply is one msgpack IpcMessage frame, then (submit, result)
// one frame of fused float32 values in manifest order, or (trace reply) one
// frame holding a Trace message. Large values skip the socket: the client
// asks for a shared buffer once (Attach, answered by Attached), then writes
// its values there (Submit with ValuesIn::shared_buffer or ::staged) and the
// daemon writes the result back into it (Result with in_shared_buffer);
// those messages have no values frame.
//
// Each kind of message is its own struct holding exactly what it carries;
// an IpcMessage is one of them. Every one has `request`: the client's
// request id, echoed in the reply (and in keepalives) so that a late answer
// to a request the client gave up on is never taken for another.

// The wire number of each kind. Values are part of the wire format: never
// renumber.
enum class IpcKind : std::uint8_t {
  hello = 1,           // Hello
  welcome = 2,         // Welcome
  submit = 3,          // Submit, values in a frame
  result = 4,          // Result, values in a frame
  error = 5,           // ErrorReply
  keepalive = 6,       // Keepalive
  status_query = 7,    // StatusQuery
  attach = 8,          // Attach
  submit_shared = 9,   // Submit, values in the shared buffer
  result_shared = 10,  // Result, values in the shared buffer
  submit_staged = 11,  // Submit, values still being copied into the shared buffer
  trace_query = 12,    // TraceQuery
  status_report = 13,  // StatusReport
  attached = 14,       // Attached
  trace_reply = 15,    // TraceReply
};

// How long a client waits for the answer to its request: it gives up after
// timeout_ms of silence from zringd, counted from sent_ns, the steady_clock
// time (ns) it sent the request at (0 and 0: unknown).
struct ClientWait {
  std::uint32_t timeout_ms = 0;
  std::uint64_t sent_ns = 0;
  bool operator==(const ClientWait&) const = default;
};

// client -> daemon: "I am local rank `local_rank`" (the first request).
struct Hello {
  std::uint64_t request = 0;
  std::uint32_t local_rank = 0;
  ClientWait wait;
  bool operator==(const Hello&) const = default;
};

// daemon -> client: the answer to a Hello, about the ring file's full ring.
struct Welcome {
  std::uint64_t request = 0;
  std::uint32_t world_size = 0;
  std::uint32_t rank = 0;
  std::uint32_t local_ranks = 0;
  std::uint32_t timeout_ms = 0;
  std::uint32_t heartbeat_ms = 0;
  std::string node;  // the daemon's node name
  bool operator==(const Welcome&) const = default;
};

// Where a Submit's values are.
enum class ValuesIn : std::uint8_t {
  frame,          // the frame after the message (IpcKind::submit)
  shared_buffer,  // the rank's shared buffer (submit_shared)
  staged,         // the shared buffer, still being copied in: the averages are
                  // published as they are final, progress in the buffer's
                  // StagingBoard (submit_staged)
};

// Which of a local rank's two shared buffers, both of which zringd keeps:
// the one its ops' values pass through (small ops copied in whole, large
// ones staged), and the one its SharedTensors stand in, so that an op of
// other tensors never takes the SharedTensors' buffer away from them.
enum class SharedSlot : std::uint8_t {
  ops = 0,
  tensors = 1,
};

// client -> daemon: one rank's part of an op, an all-reduce or a broadcast
// as its manifest says. Answered by a Result (or an ErrorReply); with its
// values in the shared buffer, the Result is written on the buffer's
// board instead (transport/staging_board.hpp), and only an ErrorReply comes
// as a message.
struct Submit {
  std::uint64_t request = 0;
  std::uint32_t local_rank = 0;
  ClientWait wait;
  ValuesIn values = ValuesIn::frame;
  Manifest manifest;
  // Staged only: the rank's own statistics of every block of an affine
  // method's values (codec::AffineCodec::block_stats, each tensor in blocks
  // of codec::kBlockElems, tensors in manifest order), taken by the client
  // before it stages them, so that zringd's summary need not wait for the
  // last value to be copied in. Empty: zringd takes them as values arrive.
  std::vector<float> block_stats;
  // Which shared buffer holds the values (not for ValuesIn::frame).
  SharedSlot buffer = SharedSlot::ops;
  bool operator==(const Submit&) const = default;
};

// daemon -> client: the op's averaged values are in the frame after the
// message, or in the shared buffer where the client put its own (and then
// this is on the buffer's board, not a message).
struct Result {
  std::uint64_t request = 0;
  std::uint64_t op = 0;           // the ring's op number
  std::uint64_t wire_bytes = 0;   // what this node put on the ring for the op
  std::uint64_t dense_bytes = 0;  // what dense float32 would have cost
  // Of the ring that ran the op, numbered node by node in it.
  std::uint32_t world_size = 0;
  std::uint32_t rank = 0;
  bool in_shared_buffer = false;  // IpcKind::result_shared
  bool operator==(const Result&) const = default;
};

// daemon -> client: the request failed.
struct ErrorReply {
  std::uint64_t request = 0;
  ErrorCode code = ErrorCode::internal;
  std::string text;
  bool operator==(const ErrorReply&) const = default;
};

// daemon -> client: still working on request `request`.
struct Keepalive {
  std::uint64_t request = 0;
  bool operator==(const Keepalive&) const = default;
};

// zringctl -> daemon: how are you doing? Answered by a StatusReport.
struct StatusQuery {
  std::uint64_t request = 0;
  bool operator==(const StatusQuery&) const = default;
};

// daemon -> zringctl: how the daemon, its ring and its ops are doing
// (daemon_status.hpp; zringctl renders it as docs/operations.md shows).
struct StatusReport {
  std::uint64_t request = 0;
  DaemonStatus status;
  bool operator==(const StatusReport&) const = default;
};

// client -> daemon: a shared buffer of `bytes` bytes in `buffer`, in place
// of the one there before (the other slot's stays). Answered by Attached.
struct Attach {
  std::uint64_t request = 0;
  std::uint32_t local_rank = 0;
  ClientWait wait;
  std::uint64_t bytes = 0;
  SharedSlot buffer = SharedSlot::ops;
  bool operator==(const Attach&) const = default;
};

// daemon -> client: the shared buffer's file and size.
struct Attached {
  std::uint64_t request = 0;
  std::string path;
  std::uint64_t bytes = 0;
  bool operator==(const Attached&) const = default;
};

// zringctl -> daemon: the timeline of your last ops. Answered by a TraceReply.
struct TraceQuery {
  std::uint64_t request = 0;
  bool operator==(const TraceQuery&) const = default;
};

// daemon -> zringctl: the timeline follows in a frame of its own (a Trace
// message: 4096 ops are far more than an IPC text may hold).
struct TraceReply {
  std::uint64_t request = 0;
  std::string node;  // the daemon's node name
  bool operator==(const TraceReply&) const = default;
};

using IpcMessage = std::variant<Hello, Welcome, Submit, Result, ErrorReply, Keepalive, StatusQuery,
                                StatusReport, Attach, Attached, TraceQuery, TraceReply>;

// The kind a message travels as, and the request id it carries.
[[nodiscard]] IpcKind kind_of(const IpcMessage& message) noexcept;
[[nodiscard]] std::uint64_t request_of(const IpcMessage& message) noexcept;

// Longest Welcome::node, TraceReply::node, Attached::path and
// ErrorReply::text a decoder accepts.
inline constexpr std::size_t kMaxNodeNameBytes = 256;
inline constexpr std::size_t kMaxIpcTextBytes = std::size_t{1} << 16;
// The one binary of an IPC message, a staged Submit's block statistics: 8
// bytes per 4096 values, so 32 MiB for the largest shared buffer (64 GiB).
inline constexpr std::size_t kMaxIpcBinBytes = std::size_t{1} << 25;

// [version, 4 (ipc), kind (1..15), request, fields...], the fields those of
// the kind's struct in the order declared above, flat (ClientWait as
// timeout_ms, sent_ns), Manifest as above, ErrorCode one of kErrorCodes,
// the u32 fields < 2^32; a kind has exactly its fields:
//   hello          local_rank, timeout_ms, sent_ns
//   welcome        world_size, rank, local_ranks, timeout_ms, heartbeat_ms, node
//   submit         local_rank, timeout_ms, sent_ns, manifest
//   submit_shared  local_rank, timeout_ms, sent_ns, manifest, buffer (SharedSlot)
//   submit_staged  local_rank, timeout_ms, sent_ns, manifest, block_stats, buffer
//   result*        op, wire_bytes, dense_bytes, world_size, rank
//   error          error_code, text
//   keepalive, status_query, trace_query: nothing
//   status_report  status: [node, version, started, now, world_size,
//                  local_ranks, first_rank, ring_up (bool), generation,
//                  ring_reason, ring_since, ring_members (array of str),
//                  min_nodes, last_change, formations, dropped, malformed,
//                  last_drop, curve (bool), auth_rejected, handshakes_failed,
//                  disconnects, last_rejection, last_handshake_failure,
//                  members (array of [name, address, first_rank, state
//                  (MemberState 1..5)]), members_cut (bool), ops_done,
//                  ops_failed, ops_rung, errors (array of [kind, count]), last_error,
//                  last_error_at, methods (array of [method, ops, failed,
//                  raw_bytes, wire_bytes_sent, wire_bytes_received]),
//                  methods_cut (bool), idle_bytes_sent, idle_bytes_received,
//                  metrics]: 37 items, every text <= kMaxStatusTextBytes, at
//                  most kMaxStatus* entries per list
//   attach         local_rank, timeout_ms, sent_ns, bytes, buffer
//   attached       path, bytes
//   trace_reply    node
// Throws invalid_argument when a text is too long to frame.
[[nodiscard]] std::vector<std::uint8_t> encode_ipc(const IpcMessage& message);
// Validated: throws unsupported_version / malformed_message naming the kind
// and the field.
[[nodiscard]] IpcMessage decode_ipc(const std::uint8_t* data, std::size_t size);

// --- timeline (zringctl trace) ----------------------------------------------------
// What a zringd remembers of each of its last ops, for `zringctl trace`.
// Times are wall-clock nanoseconds since the Unix epoch, 0 where unknown (an
// op that failed on the ring has only the ring's start; one that failed
// before the ring took it has no ring times at all). In order: the first and the last local rank's
// submission arrived (the last one submitted the op to the ring thread),
// the ring thread began it, this node's contribution was prepared, every
// node's summary was known, the average was complete, the answers were sent.

struct TraceRecord {
  std::uint64_t op = 0;  // the ring's op number (when ring_began_ns is known)
  std::string method;    // the manifest's method text
  std::uint32_t tensors = 0;
  std::uint64_t elements = 0;
  std::uint32_t local_ranks = 0;  // local ranks whose submissions made the op
  std::uint32_t nodes = 0;
  std::uint64_t wire_bytes = 0;        // what this node put on the ring for it
  std::uint64_t dense_bytes = 0;       // elements * 4
  std::optional<std::uint32_t> error;  // the op failed with this zring::ErrorCode
  std::uint64_t first_submitted_ns = 0, last_submitted_ns = 0, ring_began_ns = 0, prepared_ns = 0,
                summarized_ns = 0, data_done_ns = 0, answered_ns = 0;

  bool operator==(const TraceRecord&) const = default;
};

struct Trace {
  std::string node;                  // the daemon's node name
  std::vector<TraceRecord> records;  // oldest first
};

inline constexpr std::size_t kMaxTraceRecords = std::size_t{1} << 16;

// [version, 5 (trace), node (str, <= kMaxNodeNameBytes), [record...]], at
// most kMaxTraceRecords records, each the flat array
//   [op, method (str, <= kMaxMethodBytes, not parsed here), tensors (<=
//    kMaxManifestTensors), elements, local_ranks (u32), nodes (u32),
//    wire_bytes, dense_bytes, error (nil when the op succeeded, else one of
//    kErrorCodes), first_submitted_ns, last_submitted_ns, ring_began_ns,
//    prepared_ns, summarized_ns, data_done_ns, answered_ns]
// of 16 items, the u32 fields < 2^32.
[[nodiscard]] std::vector<std::uint8_t> encode_trace(const Trace& trace);
[[nodiscard]] Trace decode_trace(const std::uint8_t* data, std::size_t size);

}  // namespace zring::wire
