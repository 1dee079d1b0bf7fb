// wire_ipc.cpp - the header of every request and reply between a client (or
// zringctl) and its zringd (layout in wire.hpp).
#include <string>

#include "wire/msgpack_io.hpp"
#include "wire/wire.hpp"

namespace zring::wire {

using namespace detail;

namespace {

constexpr std::size_t kIpcItems = 15;
constexpr std::string_view kIpc = "IPC header";

}  // namespace

std::vector<std::uint8_t> encode_ipc_header(const IpcHeader& h) {
  std::vector<std::uint8_t> out;
  ByteSink sink(out);
  Packer p(sink);
  pack_header(p, MessageType::ipc, kIpcItems);
  p.pack_uint8(static_cast<std::uint8_t>(h.kind));
  p.pack_uint64(h.request);
  p.pack_uint32(h.local_rank);
  pack_manifest(p, h.manifest);
  p.pack_uint32(h.world_size);
  p.pack_uint32(h.rank);
  p.pack_uint32(h.local_ranks);
  p.pack_uint32(h.timeout_ms);
  p.pack_uint32(h.heartbeat_ms);
  pack_text(p, h.node, "a node name");
  p.pack_uint64(h.op);
  p.pack_uint64(h.wire_bytes);
  p.pack_uint64(h.dense_bytes);
  p.pack_uint32(h.error_code);
  pack_text(p, h.text, "an IPC text");
  return out;
}

IpcHeader decode_ipc_header(const std::uint8_t* data, std::size_t size) {
  expect_type(read_header(data, size), MessageType::ipc);
  const msgpack::object_handle tree =
      unpack_tree(data, size, manifest_message_tree(kIpc, 2 + kIpcItems, kMaxIpcTextBytes, 0));
  const auto f = body(tree.get(), kIpcItems, kIpc);
  IpcHeader h;
  h.kind = static_cast<IpcKind>(
      as_kind(f[0], static_cast<std::uint64_t>(IpcKind::trace), Where{kIpc, "kind"}));
  h.request = as_u64(f[1], Where{kIpc, "request"});
  h.local_rank = as_u32(f[2], Where{kIpc, "local_rank"});
  h.manifest = read_manifest(f[3], kIpc);
  h.world_size = as_u32(f[4], Where{kIpc, "world_size"});
  h.rank = as_u32(f[5], Where{kIpc, "rank"});
  h.local_ranks = as_u32(f[6], Where{kIpc, "local_ranks"});
  h.timeout_ms = as_u32(f[7], Where{kIpc, "timeout_ms"});
  h.heartbeat_ms = as_u32(f[8], Where{kIpc, "heartbeat_ms"});
  h.node = std::string(as_str(f[9], kMaxNodeNameBytes, Where{kIpc, "node"}));
  h.op = as_u64(f[10], Where{kIpc, "op"});
  h.wire_bytes = as_u64(f[11], Where{kIpc, "wire_bytes"});
  h.dense_bytes = as_u64(f[12], Where{kIpc, "dense_bytes"});
  h.error_code = as_error_code(f[13], Where{kIpc, "error_code"});
  h.text = std::string(as_str(f[14], kMaxIpcTextBytes, Where{kIpc, "text"}));
  return h;
}

}  // namespace zring::wire
