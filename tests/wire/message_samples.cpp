// message_samples.cpp - sample ring, summary, IPC and trace messages and their checks.
#include "message_samples.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <zring/error.hpp>

#include "wire_test_util.hpp"

namespace zring::wire_test {

using wire::IpcKind;
using wire::IpcMessage;
using wire::NodeSummary;
using wire::RingHeader;
using wire::RingKind;

const std::vector<RingKind>& all_ring_kinds() {
  static const std::vector<RingKind> kinds = {
      RingKind::data,   RingKind::heartbeat, RingKind::form,         RingKind::up,
      RingKind::reform, RingKind::abort,     RingKind::data_via_tcp, RingKind::data_via_zmq};
  return kinds;
}

const std::vector<IpcKind>& all_ipc_kinds() {
  static const std::vector<IpcKind> kinds = {
      IpcKind::hello,         IpcKind::welcome,       IpcKind::submit,        IpcKind::result,
      IpcKind::error,         IpcKind::keepalive,     IpcKind::status_query,  IpcKind::attach,
      IpcKind::submit_shared, IpcKind::result_shared, IpcKind::submit_staged, IpcKind::trace_query,
      IpcKind::status_report, IpcKind::attached,      IpcKind::trace_reply};
  return kinds;
}

wire::Manifest sample_manifest(std::size_t tensors) {
  static const std::vector<wire::TensorSpec> specs = {
      {"a.scalar", {}, 1},
      {"b.empty", {0, 7}, 0},
      {"c.matrix", {300, 41}, 12300},
      {"d.conv", {64, 3, 3, 3}, 1728},
      {"e." + std::string(200, 'n'), {5}, 5},
      {"f.wide", {1, 1, 1, 1, 1, 1, 1, 65536}, 65536},
  };
  wire::Manifest m;
  m.method = "ef:quant:8";
  for (std::size_t i = 0; i < tensors; ++i) {
    wire::TensorSpec spec = specs[i % specs.size()];
    if (i >= specs.size()) spec.name = "g." + std::to_string(1000 + i);
    m.tensors.push_back(std::move(spec));
  }
  return m;
}

RingHeader sample_ring_header(RingKind kind) {
  RingHeader h;
  h.kind = kind;
  h.generation = (std::uint64_t{1} << 63) + static_cast<std::uint64_t>(kind);
  h.op = 123456789012ull;
  h.sender = 0xFFFFFFFFu;
  h.tag = {wire::Phase::blobs, 70000, 3, 2};
  if (kind == RingKind::heartbeat) h.tag.phase = wire::Phase::reduce;
  h.origin = 4;
  h.error_code = static_cast<std::uint32_t>(ErrorCode::timeout);
  h.text = "op 3 failed at node 'b': \xc3\xa9t\xc3\xa9 " + std::to_string(static_cast<int>(kind));
  if (kind == RingKind::form || kind == RingKind::heartbeat) h.members = {0, 3, 9, 4095};
  if (kind != RingKind::data) h.data_port = 65535;
  if (kind != RingKind::data) h.settings = {0xFEDCBA9876543210ull, 1024, 4095, 64u << 20, 1, 0};
  return h;
}

NodeSummary sample_summary() {
  NodeSummary s;
  s.manifest = sample_manifest();
  s.failure = Status{ErrorCode::size_mismatch,
                     "rank 3: tensor 'c.matrix' holds 12 elements, expected 12300"};
  s.stats = {0.5f, -1.25f, 3e38f, -0.0f, std::numeric_limits<float>::denorm_min(), 7.0f};
  s.nonfinite = {{0, 0, std::numeric_limits<float>::infinity()},
                 {2, 12299, -std::numeric_limits<float>::infinity()},
                 {3, 17, std::numeric_limits<float>::quiet_NaN()}};
  s.blob_bytes = wire::kMaxBlobBytes;
  return s;
}

wire::DaemonStatus sample_daemon_status() {
  wire::DaemonStatus s;
  s.node = "gpu-node-07";
  s.version = "0.1.0";
  s.started = 1700000000;
  s.now = 1700000123;
  s.world_size = 64;
  s.local_ranks = 8;
  s.first_rank = 56;
  s.ring_up = false;
  s.generation = ~std::uint64_t{0};
  s.ring_reason = "node 'b' is silent";
  s.ring_since = 1700000100;
  s.ring_members = {"a", "gpu-node-07"};
  s.min_nodes = 2;
  s.last_change = "dropped [b]: silent for 10000 ms";
  s.formations = 3;
  s.dropped = 17;
  s.malformed = 2;
  s.last_drop = "a stale chunk";
  s.curve = true;
  s.auth_rejected = 4;
  s.handshakes_failed = 5;
  s.disconnects = 6;
  s.last_rejection = "key ... from 10.0.0.9";
  s.last_handshake_failure = "no keys";
  s.members = {{"a", "tcp://10.0.0.1:7101", 0, wire::MemberState::up, true},
               {"b", "tcp://10.0.0.2:7101", 8, wire::MemberState::down},
               {"c", "tcp://10.0.0.3:7101", 16, wire::MemberState::live},
               {"d", "tcp://10.0.0.4:7101", 24, wire::MemberState::unknown},
               {"e", "tcp://10.0.0.5:7101", 32, wire::MemberState::mismatched, false,
                "local_ranks 4 there, 8 here"},
               {"gpu-node-07", "tcp://10.0.0.8:7101", 56, wire::MemberState::self}};
  s.members_cut = true;
  s.ops_done = 1000;
  s.ops_failed = 2;
  s.ops_rung = 3;
  s.errors = {{"peer_lost", 1}, {"timeout", 1}};
  s.last_error = "node 'b' went silent";
  s.last_error_at = 1700000110;
  s.methods = {{"none", 10, 0, 1ull << 33, 1ull << 33, 1ull << 33},
               {"quant:8", 990, 2, 1ull << 40, 1ull << 38, (1ull << 38) + 1}};
  s.methods_cut = false;
  s.idle_bytes_sent = 1234;
  s.idle_bytes_received = 4321;
  s.metrics = "127.0.0.1:9464";
  return s;
}

IpcMessage sample_ipc_message(IpcKind kind) {
  const std::uint64_t request =
      std::numeric_limits<std::uint64_t>::max() - static_cast<std::uint64_t>(kind);
  const wire::ClientWait wait{30000, (1ull << 62) + 7};
  switch (kind) {
    case IpcKind::hello:
      return wire::Hello{request, 3, wait};
    case IpcKind::welcome:
      return wire::Welcome{request, 64, 17, 8, 30000, 250, "gpu-node-07"};
    case IpcKind::submit:
      return wire::Submit{request, 3, wait, wire::ValuesIn::frame, sample_manifest(6), {}};
    case IpcKind::submit_shared: {  // a broadcast from the largest root
      wire::Submit m{request,
                     3,
                     wait,
                     wire::ValuesIn::shared_buffer,
                     sample_manifest(2),
                     {},
                     wire::SharedSlot::tensors};
      m.manifest.kind = wire::OpKind::broadcast;
      m.manifest.root = 0xFFFFFFFFu;
      return m;
    }
    case IpcKind::submit_staged:
      return wire::Submit{request,
                          3,
                          wait,
                          wire::ValuesIn::staged,
                          sample_manifest(2),
                          {1.5f, -2.0f, 0.25f, -0.0f},
                          wire::SharedSlot::ops};
    case IpcKind::result:
    case IpcKind::result_shared:
      return wire::Result{
          request, 42, 1ull << 35, (1ull << 37) + 5, 64, 17, kind == IpcKind::result_shared};
    case IpcKind::error:
      return wire::ErrorReply{request, ErrorCode::peer_lost, "node 'b' went silent"};
    case IpcKind::keepalive:
      return wire::Keepalive{request};
    case IpcKind::status_query:
      return wire::StatusQuery{request};
    case IpcKind::status_report:
      return wire::StatusReport{request, sample_daemon_status()};
    case IpcKind::attach:
      return wire::Attach{request, 3, wait, (1ull << 36) - 1, wire::SharedSlot::tensors};
    case IpcKind::attached:
      return wire::Attached{request, "/run/zring/zringd.sock.shm.77.3.1", (1ull << 36) - 1};
    case IpcKind::trace_query:
      return wire::TraceQuery{request};
    case IpcKind::trace_reply:
      return wire::TraceReply{request, "gpu-node-07"};
  }
  return wire::Keepalive{request};
}

std::vector<std::vector<std::uint8_t>> sample_payloads() {
  std::vector<std::vector<std::uint8_t>> payloads;
  for (std::size_t i = 0; i < 7; ++i) {
    std::vector<std::uint8_t> p(i == 2 ? 0 : 3 + i * 11);
    for (std::size_t j = 0; j < p.size(); ++j) p[j] = static_cast<std::uint8_t>(i * 31 + j);
    payloads.push_back(std::move(p));
  }
  return payloads;
}

wire::Trace sample_trace() {
  wire::Trace t;
  t.node = "gpu-node-07";
  wire::TraceRecord ok;
  ok.op = 41;
  ok.method = "ef:topk:1%";
  ok.tensors = 65536;
  ok.elements = (1ull << 36) + 3;
  ok.local_ranks = 8;
  ok.nodes = 0xFFFFFFFFu;
  ok.wire_bytes = 1ull << 40;
  ok.dense_bytes = ok.elements * 4;
  const std::uint64_t t0 = 1'717'000'000'000'000'000ull;
  ok.first_submitted_ns = t0;
  ok.last_submitted_ns = t0 + 1;
  ok.ring_began_ns = t0 + 1000;
  ok.prepared_ns = t0 + 200000;
  ok.summarized_ns = t0 + 300000;
  ok.data_done_ns = t0 + 4000000;
  ok.answered_ns = std::numeric_limits<std::uint64_t>::max();
  wire::TraceRecord failed = ok;
  failed.op = 42;
  failed.method = "quant:8";
  failed.error = static_cast<std::uint32_t>(ErrorCode::invalid_argument);  // 0: still a failure
  failed.prepared_ns = failed.summarized_ns = failed.data_done_ns = 0;
  wire::TraceRecord never;  // the ring was down
  never.method = "none";
  never.error = static_cast<std::uint32_t>(ErrorCode::peer_lost);
  never.first_submitted_ns = never.last_submitted_ns = t0 + 5000000;
  never.answered_ns = t0 + 9000000;
  t.records = {ok, failed, never};
  return t;
}

namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

}  // namespace

void check_equal(const RingHeader& got, const RingHeader& want) {
  BOOST_TEST((got.kind == want.kind));
  BOOST_TEST(got.generation == want.generation);
  BOOST_TEST(got.op == want.op);
  BOOST_TEST(got.sender == want.sender);
  BOOST_TEST((got.tag == want.tag));
  BOOST_TEST(got.origin == want.origin);
  BOOST_TEST(got.error_code == want.error_code);
  BOOST_TEST(got.text == want.text);
  BOOST_TEST(got.members == want.members, boost::test_tools::per_element());
  BOOST_TEST(got.data_port == want.data_port);
  BOOST_TEST((got.settings == want.settings));
}

void check_equal(const NodeSummary& got, const NodeSummary& want) {
  BOOST_TEST((got.manifest == want.manifest));
  BOOST_TEST((got.failure == want.failure));
  BOOST_TEST_REQUIRE(got.stats.size() == want.stats.size());
  for (std::size_t i = 0; i < got.stats.size(); ++i)
    BOOST_TEST(same_bits(got.stats[i], want.stats[i]), "stats[" << i << "]");
  BOOST_TEST_REQUIRE(got.nonfinite.size() == want.nonfinite.size());
  for (std::size_t i = 0; i < got.nonfinite.size(); ++i) {
    BOOST_TEST(got.nonfinite[i].tensor == want.nonfinite[i].tensor);
    BOOST_TEST(got.nonfinite[i].index == want.nonfinite[i].index);
    BOOST_TEST(same_bits(got.nonfinite[i].value, want.nonfinite[i].value));
  }
  BOOST_TEST(got.blob_bytes == want.blob_bytes);
}

void check_equal(const IpcMessage& got, const IpcMessage& want) {
  BOOST_TEST((wire::kind_of(got) == wire::kind_of(want)));
  BOOST_TEST(wire::request_of(got) == wire::request_of(want));
  BOOST_TEST((got == want));
}

void check_equal(const wire::Trace& got, const wire::Trace& want) {
  BOOST_TEST(got.node == want.node);
  BOOST_TEST_REQUIRE(got.records.size() == want.records.size());
  for (std::size_t i = 0; i < got.records.size(); ++i)
    BOOST_TEST((got.records[i] == want.records[i]), "record " << i);
}

void check_valid(const wire::Manifest& m) {
  BOOST_TEST(m.method.size() <= wire::kMaxMethodBytes);
  BOOST_TEST(m.tensors.size() <= wire::kMaxManifestTensors);
  BOOST_TEST((m.kind == wire::OpKind::all_reduce || m.kind == wire::OpKind::broadcast));
  BOOST_TEST((m.kind == wire::OpKind::broadcast || m.root == 0));
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    const wire::TensorSpec& t = m.tensors[i];
    BOOST_TEST(!t.name.empty());
    BOOST_TEST(t.name.size() <= wire::kMaxManifestNameBytes);
    if (i > 0) BOOST_TEST((m.tensors[i - 1].name < t.name), "names sorted at " << i);
    BOOST_TEST(t.shape.size() <= wire::kMaxManifestRank);
    long double product = 1;  // no wrap-around
    for (std::uint64_t e : t.shape) product *= static_cast<long double>(e);
    BOOST_TEST(product == static_cast<long double>(t.numel));
    BOOST_TEST(t.numel <= 0xFFFFFFFFu);
  }
}

void check_valid(const RingHeader& h) {
  const auto kind = static_cast<int>(h.kind);
  BOOST_TEST((kind >= 1 && kind <= 8));
  BOOST_TEST(h.data_port <= 65535u);
  const auto phase = static_cast<int>(h.tag.phase);
  BOOST_TEST((phase >= (h.kind == RingKind::data ? 1 : 0) && phase <= 8));
  BOOST_TEST(is_error_code(h.error_code));
  BOOST_TEST(h.text.size() <= wire::kMaxRingTextBytes);
}

void check_valid(const NodeSummary& s) {
  check_valid(s.manifest);
  if (s.failure) {
    BOOST_TEST(!s.failure->text.empty());
    BOOST_TEST(s.failure->text.size() <= wire::kMaxRingTextBytes);
    BOOST_TEST(is_error_code(static_cast<std::uint32_t>(s.failure->code)));
  }
  BOOST_TEST(s.blob_bytes <= wire::kMaxBlobBytes);
}

void check_valid(const IpcMessage& m) {
  const auto kind = static_cast<int>(wire::kind_of(m));
  BOOST_TEST((kind >= 1 && kind <= 15));
  if (const auto* submit = std::get_if<wire::Submit>(&m)) check_valid(submit->manifest);
  if (const auto* welcome = std::get_if<wire::Welcome>(&m))
    BOOST_TEST(welcome->node.size() <= wire::kMaxNodeNameBytes);
  if (const auto* reply = std::get_if<wire::TraceReply>(&m))
    BOOST_TEST(reply->node.size() <= wire::kMaxNodeNameBytes);
  if (const auto* error = std::get_if<wire::ErrorReply>(&m)) {
    BOOST_TEST(is_error_code(static_cast<std::uint32_t>(error->code)));
    BOOST_TEST(error->text.size() <= wire::kMaxIpcTextBytes);
  }
  if (const auto* report = std::get_if<wire::StatusReport>(&m)) {
    const wire::DaemonStatus& s = report->status;
    BOOST_TEST(s.members.size() <= wire::kMaxStatusMembers);
    BOOST_TEST(s.ring_members.size() <= wire::kMaxStatusMembers);
    BOOST_TEST(s.methods.size() <= wire::kMaxStatusMethods);
    BOOST_TEST(s.errors.size() <= wire::kMaxStatusErrors);
    for (const wire::MemberStatus& member : s.members) {
      const auto state = static_cast<int>(member.state);
      BOOST_TEST((state >= 1 && state <= 6));
      BOOST_TEST(member.name.size() <= wire::kMaxStatusTextBytes);
      BOOST_TEST(member.mismatch.size() <= wire::kMaxStatusTextBytes);
    }
    BOOST_TEST(s.last_error.size() <= wire::kMaxStatusTextBytes);
  }
  if (const auto* attached = std::get_if<wire::Attached>(&m))
    BOOST_TEST(attached->path.size() <= wire::kMaxIpcTextBytes);
}

void check_valid(const wire::Trace& t) {
  BOOST_TEST(t.node.size() <= wire::kMaxNodeNameBytes);
  BOOST_TEST(t.records.size() <= wire::kMaxTraceRecords);
  for (const wire::TraceRecord& r : t.records) {
    BOOST_TEST(r.method.size() <= wire::kMaxMethodBytes);
    BOOST_TEST(r.tensors <= wire::kMaxManifestTensors);
    if (r.error) BOOST_TEST(is_error_code(*r.error));
  }
}

std::string expect_malformed(const Decoder& decode, const std::vector<std::uint8_t>& bytes,
                             const std::string& mention) {
  std::string message;
  BOOST_TEST((code_of([&] { decode(bytes.data(), bytes.size()); }, &message) ==
              ErrorCode::malformed_message),
             message);
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(message.find(mention) != std::string::npos, message << " should mention " << mention);
  return message;
}

}  // namespace zring::wire_test
