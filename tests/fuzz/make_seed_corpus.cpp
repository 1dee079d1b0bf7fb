// make_seed_corpus.cpp - writes the binary seed corpus of fuzz_wire and
// fuzz_codec_decode: a few valid messages and payloads of every kind, small
// enough that the fuzzers mutate them quickly. Run once by hand when a
// format changes (docs/fuzzing.md); its output is committed under
// tests/fuzz/corpus/. The YAML seeds of fuzz_config are written by hand.
//
//   fuzz_seed_corpus tests/fuzz/corpus
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec/codec.hpp"
#include "codec_input.hpp"
#include "wire/tcp_frames.hpp"
#include "wire/wire.hpp"

namespace {

namespace fs = std::filesystem;
namespace wire = zring::wire;
using zring::CompressedGradient;
using zring::CompressionMethod;
using Bytes = std::vector<std::uint8_t>;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

void write(const fs::path& dir, const std::string& name, const Bytes& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + (dir / name).string());
}

// Smooth values of mixed sign and size, the same on every run.
std::vector<float> values(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i + seed)) * static_cast<float>(1 + i % 5);
  return x;
}

CompressedGradient compress(const CompressionMethod& m, const std::vector<float>& x,
                            std::uint64_t seed = 7) {
  return zring::codec::make_codec(m)->compress(x.data(), x.size(),
                                               zring::codec::CodecContext{seed});
}

// --- fuzz_codec_decode: [method selector][original_size][payload] --------------------

struct CodecSeed {
  std::string name;
  zring::fuzz::MethodSelector selector;
  std::vector<float> x;
};

void write_codec_seeds(const fs::path& dir) {
  using K = zring::CompressionKind;
  const auto kind = [](K k, bool ratio = false) {
    return static_cast<std::uint8_t>(static_cast<unsigned>(k) | (ratio ? 0x80u : 0u));
  };
  std::vector<float> spiky = values(64, 3);
  spiky[5] = kInf;
  spiky[40] = kNan;
  const std::vector<CodecSeed> seeds = {
      {"none", {kind(K::none), 0}, values(24, 1)},
      {"none-empty", {kind(K::none), 0}, {}},
      {"fp16", {kind(K::fp16), 0}, {1.0f, -2.5f, 65504.0f, 1e-7f, kInf, kNan, -0.0f, 70000.0f}},
      {"bf16", {kind(K::bf16), 0}, {1.0f, -2.5f, 3e38f, 1e-40f, kInf, kNan, -0.0f, 0.1f}},
      {"topk-5", {kind(K::topk), 4}, values(100, 2)},
      {"topk-10pct", {kind(K::topk, true), 6553}, spiky},
      {"randomk-7", {kind(K::randomk), 6}, values(50, 4)},
      {"randomk-25pct-nonfinite", {kind(K::randomk, true), 16383}, spiky},
      {"threshold-0.5", {kind(K::threshold), 128}, values(60, 5)},
      {"threshold-0-nan", {kind(K::threshold), 0}, spiky},
      {"quant-1", {kind(K::quantization), 0}, values(33, 6)},
      {"quant-3-two-blocks", {kind(K::quantization), 2}, values(5000, 7)},
      {"quant-4", {kind(K::quantization), 3}, values(31, 8)},
      {"quant-8", {kind(K::quantization), 7}, values(20, 9)},
      {"quant-13-nan-block", {kind(K::quantization), 12}, spiky},
      {"quant-16", {kind(K::quantization), 15}, values(9, 10)},
      {"sign", {kind(K::signsgd), 0}, values(70, 11)},
      {"sign-two-blocks-nan",
       {kind(K::signsgd), 0},
       [] {
         std::vector<float> x = values(4200, 12);
         x[4100] = kNan;
         return x;
       }()},
  };
  for (const CodecSeed& s : seeds) {
    const CompressedGradient g = compress(zring::fuzz::method_of(s.selector), s.x);
    write(dir, s.name,
          zring::fuzz::write_codec_input(s.selector, static_cast<std::uint32_t>(s.x.size()),
                                         g.payload));
  }
}

// --- fuzz_wire: one message of every type and kind ----------------------------------

wire::Manifest manifest() {
  wire::Manifest m;
  m.method = "ef:topk:1%";
  m.tensors = {
      {"bias", {16}, 16}, {"empty", {0, 3}, 0}, {"scalar", {}, 1}, {"weight", {4, 3, 2}, 24}};
  return m;
}

// A timeline of an op that went through, one that failed on the ring and
// one that never reached it.
wire::Trace trace() {
  wire::TraceRecord ok;
  ok.op = 7;
  ok.method = "ef:topk:1%";
  ok.tensors = 4;
  ok.elements = 41;
  ok.local_ranks = 2;
  ok.nodes = 3;
  ok.wire_bytes = 900;
  ok.dense_bytes = 164;
  ok.first_submitted_ns = 1'717'000'000'000'000'000ull;
  ok.last_submitted_ns = ok.first_submitted_ns + 10'000;
  ok.ring_began_ns = ok.last_submitted_ns + 5'000;
  ok.prepared_ns = ok.ring_began_ns + 70'000;
  ok.summarized_ns = ok.prepared_ns + 20'000;
  ok.data_done_ns = ok.summarized_ns + 300'000;
  ok.answered_ns = ok.data_done_ns + 8'000;
  wire::TraceRecord failed = ok;
  failed.op = 8;
  failed.error = static_cast<std::uint32_t>(zring::ErrorCode::manifest_mismatch);
  failed.wire_bytes = 0;
  failed.prepared_ns = failed.summarized_ns = failed.data_done_ns = 0;
  wire::TraceRecord never;
  never.method = "quant:8";
  never.error = static_cast<std::uint32_t>(zring::ErrorCode::peer_lost);
  never.first_submitted_ns = never.last_submitted_ns = ok.answered_ns + 1'000'000;
  never.answered_ns = never.last_submitted_ns + 10'000'000;
  return wire::Trace{"b", {ok, failed, never}};
}

void write_wire_seeds(const fs::path& dir) {
  zring::CompressedMap every;
  std::uint64_t seed = 1;
  for (const char* method :
       {"none", "fp16", "bf16", "topk:3", "topk:10%", "randomk:5", "randomk:25%", "threshold:0.5",
        "quant:1", "quant:5", "quant:8", "quant:16", "sign"}) {
    CompressedGradient g = compress(CompressionMethod::parse(method), values(40, seed), seed);
    g.shape = {5, 8};
    every.emplace(std::string("t.") + method, std::move(g));
    ++seed;
  }
  write(dir, "gradients-every-method", wire::encode_gradients(every));

  zring::CompressedMap shapes;
  CompressedGradient scalar = compress(CompressionMethod::none(), {2.5f});
  scalar.shape = {};
  shapes.emplace("scalar", scalar);
  CompressedGradient empty = compress(CompressionMethod::quantization(4), {});
  empty.shape = {3, 0};
  shapes.emplace("empty", empty);
  CompressedGradient blocks = compress(CompressionMethod::quantization(2), values(4100, 9));
  blocks.shape = {41, 100};
  shapes.emplace("two-blocks", blocks);
  write(dir, "gradients-shapes", wire::encode_gradients(shapes));
  write(dir, "gradients-empty", wire::encode_gradients({}));

  const char* ring_kinds[] = {"data",   "heartbeat", "form",         "up",
                              "reform", "abort",     "data-via-tcp", "data-via-zmq"};
  for (unsigned k = 1; k <= 8; ++k) {
    wire::RingHeader h;
    h.kind = static_cast<wire::RingKind>(k);
    h.generation = 3;
    h.op = 42;
    h.sender = 1;
    if (h.kind == wire::RingKind::data) h.tag = {wire::Phase::reduce, 2, 1, 1};
    h.origin = h.kind == wire::RingKind::abort || h.kind == wire::RingKind::reform ? 2 : 0;
    if (h.kind == wire::RingKind::abort) {
      h.error_code = static_cast<std::uint32_t>(zring::ErrorCode::timeout);
      h.text = "op 42 timed out at node 'c'";
    }
    if (h.kind != wire::RingKind::data) h.data_port = 40123;
    if (h.kind >= wire::RingKind::heartbeat && h.kind <= wire::RingKind::reform)
      h.settings = {0x9e3779b97f4a7c15ull, 2, 2, 1 << 20, 192 << 10, 512 << 10};
    write(dir, std::string("ring-") + ring_kinds[k - 1], wire::encode_ring_header(h));
    if (h.kind == wire::RingKind::data) {  // the direct schedule's values and sums
      h.tag = {wire::Phase::to_owner, 2, 1, 3};
      write(dir, "ring-data-to-owner", wire::encode_ring_header(h));
      h.tag = {wire::Phase::from_owner, 2, 1, 0};
      write(dir, "ring-data-from-owner", wire::encode_ring_header(h));
    }
  }

  wire::NodeSummary summary;
  summary.manifest = manifest();
  summary.stats = {0.5f, -1.25f, 3.0f, 7.0f};
  summary.nonfinite = {{0, 3, kInf}, {3, 17, kNan}};
  summary.blob_bytes = 1234;
  write(dir, "summary", wire::encode_summary(summary));
  wire::NodeSummary broadcast;
  broadcast.manifest = manifest();
  broadcast.manifest.method = "none";
  broadcast.manifest.kind = wire::OpKind::broadcast;
  broadcast.manifest.root = 3;
  write(dir, "summary-broadcast", wire::encode_summary(broadcast));
  wire::NodeSummary failed;
  failed.failure = zring::Status{zring::ErrorCode::size_mismatch,
                                 "rank 1: tensor 'bias' holds 12 elements, expected 16"};
  write(dir, "summary-error", wire::encode_summary(failed));

  const wire::ClientWait wait{10000, 123456789};
  write(dir, "ipc-hello", wire::encode_ipc(wire::Hello{9, 1, wait}));
  write(dir, "ipc-welcome", wire::encode_ipc(wire::Welcome{9, 8, 3, 2, 10000, 500, "b"}));
  write(dir, "ipc-submit",
        wire::encode_ipc(wire::Submit{9, 1, wait, wire::ValuesIn::frame, manifest(), {}}));
  write(dir, "ipc-submit-shared",
        wire::encode_ipc(wire::Submit{
            9, 1, wait, wire::ValuesIn::shared_buffer, manifest(), {}, wire::SharedSlot::tensors}));
  write(
      dir, "ipc-submit-staged",
      wire::encode_ipc(wire::Submit{9, 1, wait, wire::ValuesIn::staged, manifest(), {0.5f, 2.0f}}));
  write(dir, "ipc-submit-staged-nan",  // a block holding nan: nan statistics
        wire::encode_ipc(wire::Submit{9,
                                      1,
                                      wait,
                                      wire::ValuesIn::staged,
                                      manifest(),
                                      {std::numeric_limits<float>::quiet_NaN(), 2.0f}}));
  write(dir, "ipc-result", wire::encode_ipc(wire::Result{9, 42, 4096, 65536, 8, 3, false}));
  write(dir, "ipc-result-shared", wire::encode_ipc(wire::Result{9, 42, 4096, 65536, 8, 3, true}));
  write(dir, "ipc-error",
        wire::encode_ipc(wire::ErrorReply{9, zring::ErrorCode::manifest_mismatch,
                                          "ranks 0-1 submitted 'bias', rank 2 did not"}));
  write(dir, "ipc-keepalive", wire::encode_ipc(wire::Keepalive{9}));
  write(dir, "ipc-status", wire::encode_ipc(wire::StatusQuery{9}));
  wire::DaemonStatus status;
  status.node = "b";
  status.version = "0.1.0";
  status.ring_up = true;
  status.ring_members = {"a", "b"};
  status.min_nodes = 2;
  status.members = {{"a", "tcp://127.0.0.1:7101", 0, wire::MemberState::up, true},
                    {"b", "tcp://127.0.0.1:7102", 2, wire::MemberState::self},
                    {"c", "tcp://127.0.0.1:7103", 4, wire::MemberState::mismatched, false,
                     "local_ranks 1 there, 2 here"}};
  status.errors = {{"timeout", 1}};
  status.methods = {{"quant:8", 12, 1, 65536, 20000, 20000}};
  write(dir, "ipc-status-report", wire::encode_ipc(wire::StatusReport{9, status}));
  write(dir, "ipc-attach", wire::encode_ipc(wire::Attach{9, 1, wait, 1 << 20}));
  write(dir, "ipc-attach-tensors",
        wire::encode_ipc(wire::Attach{9, 1, wait, 1 << 20, wire::SharedSlot::tensors}));
  write(dir, "ipc-attached",
        wire::encode_ipc(wire::Attached{9, "/run/zring/zringd.sock.shm.7.1.1", 1 << 20}));
  write(dir, "ipc-submit-broadcast",
        wire::encode_ipc(wire::Submit{10, 1, wait, wire::ValuesIn::frame, broadcast.manifest, {}}));
  wire::RingHeader chunk;
  chunk.generation = 7;
  chunk.op = 42;
  chunk.sender = 1;
  chunk.tag = {wire::Phase::broadcast, 0, 5, 2};  // chunk 5 of node 0's values, 2 hops on
  write(dir, "ring-data-broadcast", wire::encode_ring_header(chunk));

  write(dir, "ipc-trace", wire::encode_ipc(wire::TraceQuery{9}));
  write(dir, "ipc-trace-reply", wire::encode_ipc(wire::TraceReply{9, "b"}));
  write(dir, "trace", wire::encode_trace(trace()));
  write(dir, "trace-empty", wire::encode_trace({}));

  write(dir, "payload-list",
        wire::encode_payload_list(
            {compress(CompressionMethod::topk(2), values(10, 1)).payload, {}, Bytes{1, 2, 3}}));
  write(dir, "payload-list-empty", wire::encode_payload_list({}));

  // What a TCP data connection brings: its hello, then a data message with
  // its payload and a heartbeat without one.
  wire::RingHeader data;
  data.kind = wire::RingKind::data;
  data.generation = 3;
  data.sender = 1;
  data.tag = {wire::Phase::manifest, 1, 0, 0};
  wire::RingHeader beat;
  beat.kind = wire::RingKind::heartbeat;
  beat.generation = 3;
  beat.sender = 1;
  beat.data_port = 40123;
  beat.settings = {0x9e3779b97f4a7c15ull, 2, 2, 1 << 20, 192 << 10, 512 << 10};
  const auto hello = wire::encode_tcp_hello({1, 77, 0x1234});
  Bytes stream(hello.begin(), hello.end());
  const Bytes payload = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const auto& [header, with] : {std::pair{data, true}, std::pair{beat, false}}) {
    const Bytes bytes = wire::encode_ring_header(header);
    const auto prefix = wire::encode_tcp_prefix(bytes.size(), with, with ? payload.size() : 0);
    stream.insert(stream.end(), prefix.begin(), prefix.end());
    stream.insert(stream.end(), bytes.begin(), bytes.end());
    if (with) stream.insert(stream.end(), payload.begin(), payload.end());
  }
  write(dir, "tcp-stream", stream);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: %s CORPUS_DIR (writes CORPUS_DIR/fuzz_wire, .../fuzz_codec_decode)\n",
                 argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  write_wire_seeds(root / "fuzz_wire");
  write_codec_seeds(root / "fuzz_codec_decode");
  return 0;
}
