// wire_ipc.cpp - every request and reply between a client (or zringctl) and
// its zringd: one encoder and one validating decoder for the IpcMessage
// variant (layout in wire.hpp).
#include <array>
#include <cstring>
#include <string>
#include <type_traits>

#include "wire/msgpack_io.hpp"
#include "wire/wire.hpp"

namespace zring::wire {

using namespace detail;

namespace {

constexpr std::string_view kIpc = "IPC message";
constexpr std::uint64_t kLastKind = static_cast<std::uint64_t>(IpcKind::trace_reply);

struct KindInfo {
  std::string_view context;  // "IPC hello", for error messages
  std::size_t fields;        // after kind and request
};

// Indexed by IpcKind - 1.
constexpr std::array<KindInfo, kLastKind> kKinds = {{
    {"IPC hello", 3},
    {"IPC welcome", 6},
    {"IPC submit", 4},
    {"IPC result", 5},
    {"IPC error", 2},
    {"IPC keepalive", 0},
    {"IPC status_query", 0},
    {"IPC attach", 5},
    {"IPC submit_shared", 5},
    {"IPC result_shared", 5},
    {"IPC submit_staged", 6},
    {"IPC trace_query", 0},
    {"IPC status_report", 1},
    {"IPC attached", 2},
    {"IPC trace_reply", 1},
}};

constexpr std::size_t most_fields() {
  std::size_t most = 0;
  for (const KindInfo& k : kKinds) most = std::max(most, k.fields);
  return most;
}
// version, type, kind, request and the fields of the kind with the most.
constexpr std::size_t kMostRootItems = 4 + most_fields();

const KindInfo& info(IpcKind kind) { return kKinds[static_cast<std::size_t>(kind) - 1]; }

IpcKind submit_kind(ValuesIn values) {
  switch (values) {
    case ValuesIn::shared_buffer:
      return IpcKind::submit_shared;
    case ValuesIn::staged:
      return IpcKind::submit_staged;
    case ValuesIn::frame:
      break;
  }
  return IpcKind::submit;
}

// --- writing -------------------------------------------------------------------

// [version, 4, kind, request, ...]: the fields follow.
Packer& begin(Packer& p, IpcKind kind, std::uint64_t request) {
  pack_header(p, MessageType::ipc, 2 + info(kind).fields);
  p.pack_uint8(static_cast<std::uint8_t>(kind));
  p.pack_uint64(request);
  return p;
}

void pack_wait(Packer& p, const ClientWait& wait) {
  p.pack_uint32(wait.timeout_ms);
  p.pack_uint64(wait.sent_ns);
}

struct Encoder {
  Packer& p;
  void operator()(const Hello& m) {
    begin(p, IpcKind::hello, m.request).pack_uint32(m.local_rank);
    pack_wait(p, m.wait);
  }
  void operator()(const Welcome& m) {
    begin(p, IpcKind::welcome, m.request).pack_uint32(m.world_size);
    p.pack_uint32(m.rank);
    p.pack_uint32(m.local_ranks);
    p.pack_uint32(m.timeout_ms);
    p.pack_uint32(m.heartbeat_ms);
    pack_text(p, m.node, "a node name");
  }
  void operator()(const Submit& m) {
    begin(p, submit_kind(m.values), m.request).pack_uint32(m.local_rank);
    pack_wait(p, m.wait);
    pack_manifest(p, m.manifest);
    if (m.values == ValuesIn::staged)  // host order: both ends are on this host
      pack_bytes(p, m.block_stats.data(), m.block_stats.size() * sizeof(float), "block statistics");
    if (m.values != ValuesIn::frame) p.pack_uint8(static_cast<std::uint8_t>(m.buffer));
  }
  void operator()(const Result& m) {
    begin(p, m.in_shared_buffer ? IpcKind::result_shared : IpcKind::result, m.request)
        .pack_uint64(m.op);
    p.pack_uint64(m.wire_bytes);
    p.pack_uint64(m.dense_bytes);
    p.pack_uint32(m.world_size);
    p.pack_uint32(m.rank);
  }
  void operator()(const ErrorReply& m) {
    begin(p, IpcKind::error, m.request).pack_uint32(static_cast<std::uint32_t>(m.code));
    pack_text(p, m.text, "an error text");
  }
  void operator()(const Keepalive& m) { begin(p, IpcKind::keepalive, m.request); }
  void operator()(const StatusQuery& m) { begin(p, IpcKind::status_query, m.request); }
  void operator()(const StatusReport& m) {
    pack_daemon_status(begin(p, IpcKind::status_report, m.request), m.status);
  }
  void operator()(const Attach& m) {
    begin(p, IpcKind::attach, m.request).pack_uint32(m.local_rank);
    pack_wait(p, m.wait);
    p.pack_uint64(m.bytes);
    p.pack_uint8(static_cast<std::uint8_t>(m.buffer));
  }
  void operator()(const Attached& m) {
    pack_text(begin(p, IpcKind::attached, m.request), m.path, "a shared buffer's path");
    p.pack_uint64(m.bytes);
  }
  void operator()(const TraceQuery& m) { begin(p, IpcKind::trace_query, m.request); }
  void operator()(const TraceReply& m) {
    pack_text(begin(p, IpcKind::trace_reply, m.request), m.node, "a node name");
  }
};

// --- reading -------------------------------------------------------------------

// The fields of one message, read in order, each check naming the kind and the field.
class Fields {
 public:
  Fields(std::span<const msgpack::object> items, std::string_view context)
      : items_(items), context_(context) {}
  std::uint32_t u32(std::string_view field) { return as_u32(next(), Where{context_, field}); }
  std::uint64_t u64(std::string_view field) { return as_u64(next(), Where{context_, field}); }
  std::string text(std::string_view field, std::size_t max) {
    return std::string(as_str(next(), max, Where{context_, field}));
  }
  ErrorCode error_code() {
    return static_cast<ErrorCode>(as_error_code(next(), Where{context_, "error_code"}));
  }
  ClientWait wait() {
    ClientWait w;
    w.timeout_ms = u32("timeout_ms");
    w.sent_ns = u64("sent_ns");
    return w;
  }
  Manifest manifest() { return read_manifest(next(), context_); }
  SharedSlot buffer() {
    return static_cast<SharedSlot>(as_uint(next(), static_cast<std::uint64_t>(SharedSlot::tensors),
                                           Where{context_, "buffer"}));
  }
  // float32 values in host order, as a bin.
  std::vector<float> floats(std::string_view field) {
    const Where where{context_, field};
    const std::span<const std::uint8_t> bytes = as_bin(next(), where);
    if (bytes.size() % sizeof(float) != 0)
      reject(where, "holds " + std::to_string(bytes.size()) + " bytes, not whole float32 values");
    std::vector<float> values(bytes.size() / sizeof(float));
    if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  DaemonStatus status() { return read_daemon_status(next(), context_); }

 private:
  const msgpack::object& next() { return items_[at_++]; }
  std::span<const msgpack::object> items_;
  std::string_view context_;
  std::size_t at_ = 0;
};

IpcMessage read_message(IpcKind kind, std::uint64_t request, Fields& f) {
  switch (kind) {
    case IpcKind::hello: {
      Hello m{request, f.u32("local_rank"), {}};
      m.wait = f.wait();
      return m;
    }
    case IpcKind::welcome: {
      Welcome m;
      m.request = request;
      m.world_size = f.u32("world_size");
      m.rank = f.u32("rank");
      m.local_ranks = f.u32("local_ranks");
      m.timeout_ms = f.u32("timeout_ms");
      m.heartbeat_ms = f.u32("heartbeat_ms");
      m.node = f.text("node", kMaxNodeNameBytes);
      return m;
    }
    case IpcKind::submit:
    case IpcKind::submit_shared:
    case IpcKind::submit_staged: {
      Submit m;
      m.request = request;
      m.local_rank = f.u32("local_rank");
      m.wait = f.wait();
      m.values = kind == IpcKind::submit          ? ValuesIn::frame
                 : kind == IpcKind::submit_shared ? ValuesIn::shared_buffer
                                                  : ValuesIn::staged;
      m.manifest = f.manifest();
      if (m.values == ValuesIn::staged) m.block_stats = f.floats("block_stats");
      if (m.values != ValuesIn::frame) m.buffer = f.buffer();
      return m;
    }
    case IpcKind::result:
    case IpcKind::result_shared: {
      Result m;
      m.request = request;
      m.op = f.u64("op");
      m.wire_bytes = f.u64("wire_bytes");
      m.dense_bytes = f.u64("dense_bytes");
      m.world_size = f.u32("world_size");
      m.rank = f.u32("rank");
      m.in_shared_buffer = kind == IpcKind::result_shared;
      return m;
    }
    case IpcKind::error: {
      ErrorReply m;
      m.request = request;
      m.code = f.error_code();
      m.text = f.text("text", kMaxIpcTextBytes);
      return m;
    }
    case IpcKind::keepalive:
      return Keepalive{request};
    case IpcKind::status_query:
      return StatusQuery{request};
    case IpcKind::status_report:
      return StatusReport{request, f.status()};
    case IpcKind::attach: {
      Attach m;
      m.request = request;
      m.local_rank = f.u32("local_rank");
      m.wait = f.wait();
      m.bytes = f.u64("bytes");
      m.buffer = f.buffer();
      return m;
    }
    case IpcKind::attached: {
      Attached m{request, f.text("path", kMaxIpcTextBytes), 0};
      m.bytes = f.u64("bytes");
      return m;
    }
    case IpcKind::trace_query:
      return TraceQuery{request};
    case IpcKind::trace_reply:
      return TraceReply{request, f.text("node", kMaxNodeNameBytes)};
  }
  malformed("IPC message: kind " + std::to_string(static_cast<int>(kind)) + " is not read");
}

}  // namespace

IpcKind kind_of(const IpcMessage& message) noexcept {
  return std::visit(
      [](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Hello>) return IpcKind::hello;
        if constexpr (std::is_same_v<T, Welcome>) return IpcKind::welcome;
        if constexpr (std::is_same_v<T, Submit>) return submit_kind(m.values);
        if constexpr (std::is_same_v<T, Result>)
          return m.in_shared_buffer ? IpcKind::result_shared : IpcKind::result;
        if constexpr (std::is_same_v<T, ErrorReply>) return IpcKind::error;
        if constexpr (std::is_same_v<T, Keepalive>) return IpcKind::keepalive;
        if constexpr (std::is_same_v<T, StatusQuery>) return IpcKind::status_query;
        if constexpr (std::is_same_v<T, StatusReport>) return IpcKind::status_report;
        if constexpr (std::is_same_v<T, Attach>) return IpcKind::attach;
        if constexpr (std::is_same_v<T, Attached>) return IpcKind::attached;
        if constexpr (std::is_same_v<T, TraceQuery>) return IpcKind::trace_query;
        if constexpr (std::is_same_v<T, TraceReply>) return IpcKind::trace_reply;
      },
      message);
}

std::uint64_t request_of(const IpcMessage& message) noexcept {
  return std::visit([](const auto& m) { return m.request; }, message);
}

std::vector<std::uint8_t> encode_ipc(const IpcMessage& message) {
  std::vector<std::uint8_t> out;
  ByteSink sink(out);
  Packer p(sink);
  std::visit(Encoder{p}, message);
  return out;
}

IpcMessage decode_ipc(const std::uint8_t* data, std::size_t size) {
  expect_type(read_header(data, size), MessageType::ipc);
  const Tree tree = unpack_tree(
      data, size, manifest_message_tree(kIpc, kMostRootItems, kMaxIpcTextBytes, kMaxIpcBinBytes));
  const auto root = as_array(tree.get(), 4, kMostRootItems, Where{kIpc, ""});
  const auto kind = static_cast<IpcKind>(as_kind(root[2], kLastKind, Where{kIpc, "kind"}));
  const KindInfo& k = info(kind);
  const auto items = body(tree.get(), 2 + k.fields, k.context);
  const std::uint64_t request = as_u64(items[1], Where{k.context, "request"});
  Fields fields(items.subspan(2), k.context);
  return read_message(kind, request, fields);
}

}  // namespace zring::wire
