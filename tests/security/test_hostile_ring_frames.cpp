// Hostile frames on the ring port of a ring without CurveZMQ, while
// all-reduces run on every rank: wrong versions, truncated and corrupted
// msgpack, absurd lengths, valid headers for ops that do not exist or from
// the wrong sender, out-of-range chunk indices, frames over max_message_bytes
// and floods of thousands. Every result must stay right on every rank, every
// daemon keep running, and the drops be counted. (Random bytes on the ring
// port and the IPC socket are in tests/integration/test_faults.cpp.)
#define BOOST_TEST_MODULE security hostile frames
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <zmq.hpp>
#include <zring/error.hpp>
#include <zring/zring.hpp>

#include "security/security_util.hpp"

using namespace zring;
using namespace zring::security_test;
using wire::Phase;
using Bytes = std::vector<std::uint8_t>;

namespace {

const std::vector<std::size_t> kSizes{1000, 20000, 3};
constexpr std::size_t kChunk = 256 * 1024;
constexpr std::size_t kMaxMessage = kChunk + 64 * 1024;  // the least max_message_bytes allows

RingSetup setup() {
  RingSetup s;
  s.nodes = 3;
  s.chunk_bytes = kChunk;
  s.max_message_bytes = kMaxMessage;
  return s;
}

// One hostile message: a header frame and, maybe, more frames.
struct Frame {
  std::vector<Bytes> parts;
  bool malformed = false;  // the ring must count it as malformed, not only dropped
};

bool decodes(const Bytes& bytes) {
  try {
    (void)wire::decode_ring_header(bytes.data(), bytes.size());
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Frames aimed at node `target` whose predecessor is `p`, successor `s`,
// in a ring at `generation` that has done about `ops` ops. None of them can
// be taken for a message the ring expects: each is undecodable, or of
// another op or generation, or from a sender that cannot send it (data from
// another node than the predecessor, anything from a node the ring file
// does not list or from the target itself), or carries an index out of
// range.
std::map<std::string, std::vector<Frame>> hostile_frames(std::uint32_t target, std::uint32_t p,
                                                         std::uint32_t s, std::uint64_t generation,
                                                         std::uint64_t ops, std::mt19937& random) {
  std::map<std::string, std::vector<Frame>> kinds;
  const Bytes valid = header_bytes(data_header(generation, ops + 1000, s, Phase::reduce, 0, 0, 1));
  const Bytes payload(4000, 0x3f);
  // [0x9e, version, type, ...]: the version is the second byte.
  for (const std::uint8_t version : {0x00, 0x01, 0x03, 0x7f}) {
    Bytes b = valid;
    b[1] = version;
    kinds["wrong version"].push_back({{b}, true});
  }
  {
    Bytes b = valid;  // the version as a 64-bit integer
    b[1] = 0xcf;
    b.insert(b.begin() + 2, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
    kinds["wrong version"].push_back({{b}, true});
  }
  for (std::size_t cut = 0; cut < valid.size(); ++cut)
    kinds["truncated msgpack"].push_back(
        {{Bytes(valid.begin(), valid.begin() + static_cast<long>(cut))}, true});
  while (kinds["corrupted msgpack"].size() < 200) {
    Bytes b = valid;
    for (int flips = 1 + static_cast<int>(random() % 3); flips > 0; --flips)
      b[random() % b.size()] ^= static_cast<std::uint8_t>(1u << (random() % 8));
    if (!decodes(b)) kinds["corrupted msgpack"].push_back({{b}, true});
  }
  // Lengths that promise far more than the frame holds, or absurd nesting.
  const std::vector<Bytes> absurd{
      {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02},              // array of 2^32 - 1 items
      {0x9e, 0x03, 0x02, 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},   // str of 4 GiB as the kind
      {0x9e, 0x03, 0x02, 0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00},  // bin of 2 GiB
      {0xdf, 0xff, 0xff, 0xff, 0xff},                          // map of 2^32 - 1 pairs
      {0xdc, 0xff, 0xff},                                      // array16 of 65535, empty
  };
  for (const Bytes& b : absurd) kinds["absurd lengths"].push_back({{b}, true});
  {
    Bytes members = valid;  // the last item, the members (an empty bin), claims 4 GiB
    members.resize(members.size() - 2);
    members.insert(members.end(), {0xc6, 0xff, 0xff, 0xff, 0xff, 'a', 'b'});
    kinds["absurd lengths"].push_back({{members}, true});
    Bytes deep(2000, 0x91);  // 2000 nested one-item arrays
    deep.push_back(0x01);
    kinds["absurd lengths"].push_back({{deep}, true});
  }
  // Well-formed headers for ops that do not exist, other generations, the wrong sender.
  for (const std::uint64_t op : {ops + 1000, std::uint64_t{1} << 62, ~std::uint64_t{0}})
    kinds["valid header, op that does not exist"].push_back(
        {{header_bytes(data_header(generation, op, p, Phase::reduce, 0, 0, 1)), payload}, false});
  for (const std::uint64_t g : {generation + 2, std::uint64_t{0}, ~std::uint64_t{0}})
    kinds["valid header, another generation"].push_back(
        {{header_bytes(data_header(g, ops, p, Phase::reduce, 0, 0, 1)), payload}, false});
  for (const std::uint32_t sender : {target, s, 7u, 0xffffffffu}) {
    if (sender == p) continue;
    // Membership messages come from any listed node (heartbeats from every
    // one): only the node itself and nodes the ring file does not list are
    // wrong senders of those. Data comes only from the predecessor.
    for (const wire::RingKind kind :
         {wire::RingKind::heartbeat, wire::RingKind::form, wire::RingKind::reform,
          wire::RingKind::abort, wire::RingKind::up})
      if (sender != s)
        kinds["valid header, wrong sender"].push_back(
            {{header_bytes(control_header(kind, generation + 2, sender, ops))}, false});
    kinds["valid header, wrong sender"].push_back(
        {{header_bytes(data_header(generation, ops, sender, Phase::reduce, 0, 0, 1)), payload},
         false});
  }
  // The right generation, sender and ops around the current one, but no
  // index the op can have: every one must be dropped, never summed.
  for (std::uint64_t op = 0; op < ops + 8; ++op) {
    for (const Phase phase : {Phase::manifest, Phase::reduce, Phase::gather, Phase::blobs,
                              Phase::broadcast, Phase::to_owner, Phase::from_owner, Phase::stats}) {
      auto& list = kinds["out-of-range indices"];
      list.push_back(
          {{header_bytes(data_header(generation, op, p, phase, 1000000, 0, 1)), payload}, false});
      list.push_back(
          {{header_bytes(data_header(generation, op, p, phase, 0, 1000000, 1)), payload}, false});
      list.push_back(
          {{header_bytes(data_header(generation, op, p, phase, 0, 0, 1000000)), payload}, false});
      list.push_back(
          {{header_bytes(data_header(generation, op, p, phase, target, 0, 0)), payload}, false});
    }
  }
  // Framing: three frames, a control message with a payload, data without one.
  kinds["wrong framing"].push_back({{valid, payload, payload}, true});
  kinds["wrong framing"].push_back(
      {{header_bytes(control_header(wire::RingKind::heartbeat, generation, p)), payload}, true});
  kinds["wrong framing"].push_back(
      {{header_bytes(data_header(generation, ops + 1000, p, Phase::reduce, 0, 0, 1))}, true});
  return kinds;
}

struct Pusher {
  zmq::context_t context{1};
  zmq::socket_t push{context, zmq::socket_type::push};
  explicit Pusher(const std::string& address) {
    push.set(zmq::sockopt::linger, 0);
    push.set(zmq::sockopt::sndhwm, 1000000);
    push.connect(address);
  }
  // Blocks while the connection comes up, so that every frame is delivered.
  void send(const Frame& frame) {
    for (std::size_t i = 0; i < frame.parts.size(); ++i)
      (void)push.send(zmq::buffer(frame.parts[i]), i + 1 < frame.parts.size()
                                                       ? zmq::send_flags::sndmore
                                                       : zmq::send_flags::none);
  }
};

struct Counts {
  std::uint64_t dropped = 0, malformed = 0;
};

Counts counts(const TestRing& ring, std::size_t n) {
  return {ring.counter(n, "dropped"), ring.counter(n, "malformed")};
}

// A DEALER of a local process on node n's IPC socket, as a client's would
// be, but speaking raw IPC messages; recv waits at most rcvtimeo_ms.
zmq::socket_t raw_ipc_dealer(zmq::context_t& context, TestRing& ring, std::size_t n,
                             int rcvtimeo_ms) {
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, rcvtimeo_ms);
  dealer.connect(ring.ipc(n));
  return dealer;
}

}  // namespace

BOOST_AUTO_TEST_CASE(hostile_frames_are_dropped_and_counted_while_all_reduces_stay_right) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  ClientBatch warmup(ring, "none", 30, 2, kSizes);
  BOOST_TEST_REQUIRE(warmup.finish() == "");
  std::mt19937 random(17);
  for (const std::size_t target :
       {std::size_t{1}, std::size_t{0}}) {  // a member, then the coordinator
    BOOST_TEST_CONTEXT("target node " << target) {
      const auto p = static_cast<std::uint32_t>((target + 2) % 3),
                 s = static_cast<std::uint32_t>((target + 1) % 3);
      const std::uint64_t generation = ring.counter(target, "generation");
      const std::uint64_t ops =
          ring.counter(target, "ops_done") + ring.counter(target, "ops_failed");
      const auto kinds =
          hostile_frames(static_cast<std::uint32_t>(target), p, s, generation, ops, random);
      const Counts before = counts(ring, target);
      const std::uint64_t formations = ring.counter(target, "formations");
      Pusher pusher(ring.address(target));
      std::uint64_t sent = 0, malformed = 0;
      std::atomic<bool> stop{false};
      std::map<std::string, std::uint64_t> per_kind;
      std::thread attack([&] {
        // Each kind again and again while the ops run, and at least three times.
        for (int pass = 0; pass < 3 || (!stop && pass < 200); ++pass) {
          for (const auto& [kind, frames] : kinds) {
            for (const Frame& f : frames) {
              pusher.send(f);
              ++sent;
              malformed += f.malformed ? 1 : 0;
              ++per_kind[kind];
            }
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
      ClientBatch none(ring, "none", 40 + target, 10, kSizes);
      const std::string none_result = none.finish();
      ClientBatch quant(ring, "quant:8", 50 + target, 6, kSizes);
      const std::string quant_result = quant.finish();
      ClientBatch topk(ring, "topk:1%", 60 + target, 4, kSizes);
      const std::string topk_result = topk.finish();
      stop = true;
      attack.join();
      BOOST_TEST(none_result == "");
      BOOST_TEST(quant_result == "");
      BOOST_TEST(topk_result == "");
      // Every malformed frame counted as malformed, and at least every
      // frame that cannot belong to any op as dropped.
      const std::uint64_t now_malformed =
          ring.wait_counter_above(target, "malformed", before.malformed + malformed - 1);
      BOOST_TEST(now_malformed >= before.malformed + malformed, ring.status(target));
      const std::uint64_t sure_drops = sent - per_kind["out-of-range indices"];
      const std::uint64_t now_dropped =
          ring.wait_counter_above(target, "dropped", before.dropped + sure_drops - 1);
      BOOST_TEST(now_dropped >= before.dropped + sure_drops, ring.status(target));
      BOOST_TEST(ring.counter(target, "formations") == formations, "the ring re-formed");
      for (std::size_t n = 0; n < 3; ++n) BOOST_TEST(ring.daemon(n).running());
      std::string summary;
      for (const auto& [kind, count] : per_kind)
        summary += kind + ": " + std::to_string(count) + "; ";
      BOOST_TEST_MESSAGE("node " << target << ": " << sent << " hostile frames (" << summary
                                 << "), dropped " << now_dropped - before.dropped << ", malformed "
                                 << now_malformed - before.malformed);
    }
  }
}

BOOST_AUTO_TEST_CASE(frame_over_max_message_bytes_closes_the_connection_not_the_daemon) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  const std::size_t target = 2;
  const std::uint64_t disconnects = ring.counter(target, "disconnects");
  const std::uint64_t generation = ring.counter(target, "generation");
  int sent = 0;
  std::atomic<bool> stop{false};
  std::thread attack([&] {
    // A valid header and a payload one byte over the limit; then a header
    // frame of 1 MiB. The ring never sees them: ZeroMQ closes the connection.
    const Bytes header = header_bytes(data_header(generation, 0, 1, Phase::reduce, 0, 0, 1));
    const Bytes over(kMaxMessage + 1, 0x55), huge(1 << 20, 0x9d);
    while (!stop || sent < 6) {
      Pusher pusher(ring.address(target));
      if (sent % 2 == 0) {
        (void)pusher.push.send(zmq::buffer(header), zmq::send_flags::sndmore);
        (void)pusher.push.send(zmq::buffer(over), zmq::send_flags::none);
      } else {
        (void)pusher.push.send(zmq::buffer(huge), zmq::send_flags::none);
      }
      ++sent;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  ClientBatch none(ring, "none", 70, 6, kSizes);
  const std::string result = none.finish();
  const std::uint64_t now = ring.wait_counter_above(target, "disconnects", disconnects);
  stop = true;
  attack.join();
  BOOST_TEST(result == "");
  BOOST_TEST(now > disconnects, ring.status(target));
  BOOST_TEST(ring.counter(target, "malformed") == 0u, "an oversized frame reached the ring");
  for (std::size_t n = 0; n < 3; ++n) BOOST_TEST(ring.daemon(n).running());
  BOOST_TEST_MESSAGE(sent << " oversized frames, " << now - disconnects << " connections closed");
  ClientBatch after(ring, "none", 71, 2, kSizes);
  BOOST_TEST(after.finish() == "");
}

BOOST_AUTO_TEST_CASE(flood_of_frames_is_dropped_while_all_reduces_stay_right) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  ClientBatch warmup(ring, "none", 80, 1, kSizes);
  BOOST_TEST_REQUIRE(warmup.finish() == "");
  std::mt19937 random(23);
  const std::size_t target = 1;
  const std::uint64_t generation = ring.counter(target, "generation");
  const std::uint64_t ops = ring.counter(target, "ops_done");
  const auto kinds = hostile_frames(1, 0, 2, generation, ops, random);
  std::vector<const Frame*> all;
  for (const auto& [kind, frames] : kinds)
    for (const Frame& f : frames) all.push_back(&f);
  // Summaries from the predecessor for the next op (and the ones after),
  // with chunk indices no summary has: an op not begun yet keeps what comes
  // for it, so thousands of these must not crowd out the real summaries.
  std::vector<Frame> early;
  for (std::uint64_t op = ops; op < ops + 4; ++op)
    for (std::uint32_t chunk = 1; chunk <= 3000; ++chunk)
      early.push_back({{header_bytes(data_header(generation, op, 0, Phase::manifest, 0, chunk, 1)),
                        Bytes(64, 1)},
                       false});
  const Counts before = counts(ring, target);
  Pusher pusher(ring.address(target));
  std::uint64_t sent = 0;
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    while (!stop || sent < 20000) {
      pusher.send(*all[random() % all.size()]);
      pusher.send(early[random() % early.size()]);
      sent += 2;
    }
  });
  ClientBatch none(ring, "none", 81, 12, kSizes);
  const std::string none_result = none.finish();
  ClientBatch quant(ring, "quant:4", 82, 6, kSizes);
  const std::string quant_result = quant.finish();
  stop = true;
  flood.join();
  BOOST_TEST(none_result == "");
  BOOST_TEST(quant_result == "");
  const std::uint64_t dropped =
      ring.wait_counter_above(target, "dropped", before.dropped + sent / 4);
  BOOST_TEST(dropped > before.dropped + sent / 4, ring.status(target));
  for (std::size_t n = 0; n < 3; ++n) BOOST_TEST(ring.daemon(n).running());
  BOOST_TEST_MESSAGE(sent << " frames in the flood, " << dropped - before.dropped << " dropped");
  ClientBatch after(ring, "none", 83, 2, kSizes);
  BOOST_TEST(after.finish() == "");
}

// The ranks of the target node submit last: its predecessor's summary of the
// op comes before the node has begun the op, after thousands of frames that
// claim to be summaries of that very op (with chunks no summary has). They
// must not take the real one's place.
BOOST_AUTO_TEST_CASE(flood_for_the_next_op_does_not_crowd_out_its_summaries) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  const std::vector<std::size_t> sizes{5000};
  std::vector<proc::Process> clients;
  for (std::size_t n = 0; n < 3; ++n) {
    clients.push_back(proc::Process::spawn_talking(
        {ZRING_RING_CLIENT_PATH, "--talk", ring.ipc(n), "0", "none", "90", "5000", "20000"},
        ring.dir() + "/talk" + std::to_string(n) + ".err"));
    const auto ready = clients.back().read_line(std::chrono::seconds(30));
    BOOST_TEST_REQUIRE(ready.has_value());
    BOOST_TEST_REQUIRE(ready->rfind("ready", 0) == 0, *ready);
  }
  const std::size_t target = 1;
  Pusher pusher(ring.address(target));
  std::uint64_t flooded = 0;
  for (std::uint64_t round = 0; round < 4; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      // Between ops. Ops are numbered from 0 in each ring generation, so the
      // next one is at most the number of ops done so far: flood them all.
      const std::uint64_t done =
          ring.counter(target, "ops_done") + ring.counter(target, "ops_failed");
      const std::uint64_t generation = ring.counter(target, "generation");
      const std::uint64_t dropped = ring.counter(target, "dropped");
      constexpr std::uint32_t kPerOp = 1500;  // more than an op not begun could ever keep
      std::uint64_t frames = 0;
      for (std::uint64_t op = 0; op <= done; ++op)
        for (std::uint32_t chunk = 1; chunk <= kPerOp; ++chunk, ++frames)
          pusher.send({{header_bytes(data_header(generation, op, 0, Phase::manifest, 0, chunk, 1)),
                        Bytes(64, 7)},
                       false});
      flooded += frames;
      // All of them have arrived (most at least were dropped).
      BOOST_TEST(ring.wait_counter_above(target, "dropped", dropped + frames - 1025) >
                 dropped + frames - 1025);
      std::vector<std::string> files;
      for (std::size_t n = 0; n < 3; ++n)
        files.push_back(ring.dir() + "/next-" + std::to_string(round) + "-" + std::to_string(n));
      clients[0].send_line("round " + std::to_string(round) + " " + files[0]);
      clients[2].send_line("round " + std::to_string(round) + " " + files[2]);
      // Give node 0 time to begin and send its summary to node 1 (not needed
      // for the result to be right; it makes the crowded case happen).
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      clients[1].send_line("round " + std::to_string(round) + " " + files[1]);
      for (std::size_t n = 0; n < 3; ++n) {
        const std::string answer =
            clients[n].read_line(std::chrono::seconds(60)).value_or("no answer");
        BOOST_TEST(answer == "ok", "node " << n << ": " << answer);
      }
      std::vector<std::string> results;
      for (const std::string& f : files) results.push_back(proc::read_file(f));
      BOOST_TEST(check_round(results, 0, "none", 90, round, sizes) == "");
    }
  }
  for (auto& c : clients) c.send_line("quit");
  for (std::size_t n = 0; n < 3; ++n) BOOST_TEST(ring.daemon(n).running());
  BOOST_TEST_MESSAGE(flooded << " frames for ops not begun yet");
}

// The IPC socket, from a local process that is not one of the node's ranks,
// while the ranks run all-reduces: requests of another version, truncated,
// with absurd sizes, for ranks it does not hold, frames over
// max_message_bytes. Each decodable one is answered with an error; none
// disturbs the ranks. (Random bytes on the IPC socket are in test_faults.)
BOOST_AUTO_TEST_CASE(hostile_requests_on_the_ipc_socket_get_errors_and_disturb_no_rank) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  const std::size_t target = 2;
  zmq::context_t context(1);
  zmq::socket_t dealer = raw_ipc_dealer(context, ring, target, 100);
  std::vector<std::vector<Bytes>> answered;  // requests the daemon must answer with an error
  answered.push_back({wire::encode_ipc(wire::Hello{1, 7, {}})});  // rank out of range
  answered.push_back({wire::encode_ipc(wire::StatusQuery{2})});   // a status is fine
  {
    wire::Submit submit{3, 0, {}, wire::ValuesIn::frame, {}, {}};  // a rank held by another process
    submit.manifest.method = "none";
    submit.manifest.tensors.push_back({"t000", {1000}, 1000});
    answered.push_back({wire::encode_ipc(submit), Bytes(4000, 0)});
    const wire::Attach absurd{4, 0, {}, std::uint64_t{1} << 60};  // 2^60 bytes of shared buffer
    answered.push_back({wire::encode_ipc(absurd)});
    const wire::Result reply_kind{5, 0, 0, 0, 0, 0, false};  // a kind only the daemon sends
    answered.push_back({wire::encode_ipc(reply_kind)});
    Bytes version = wire::encode_ipc(wire::StatusQuery{6});
    version[1] = 0x09;  // [version, type, ...]: another protocol version
    answered.push_back({version});
    Bytes cut = wire::encode_ipc(wire::StatusQuery{7});
    cut.resize(cut.size() / 2);
    answered.push_back({cut});
  }
  const Bytes over(kMaxMessage + 1, 0x42);
  std::atomic<bool> stop{false};
  std::uint64_t sent = 0, errors = 0, statuses = 0, oversized = 0;
  std::thread attack([&] {
    while (!stop || sent < 100) {
      for (const auto& parts : answered) {
        for (std::size_t i = 0; i < parts.size(); ++i)
          (void)dealer.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore
                                                                        : zmq::send_flags::none);
        ++sent;
      }
      if (sent % 70 ==
          0) {  // now and then one frame over the limit: the connection goes, the daemon stays
        (void)dealer.send(zmq::buffer(over), zmq::send_flags::none);
        ++oversized;
      }
      for (zmq::message_t reply; dealer.recv(reply, zmq::recv_flags::dontwait);) {
        try {
          const wire::IpcMessage m = wire::decode_ipc(reply.data<std::uint8_t>(), reply.size());
          errors += std::holds_alternative<wire::ErrorReply>(m) ? 1 : 0;
          statuses += std::holds_alternative<wire::StatusReport>(m) ? 1 : 0;
        } catch (const Error&) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  ClientBatch none(ring, "none", 100, 10, kSizes);
  const std::string result = none.finish();
  ClientBatch quant(ring, "quant:8", 101, 6, kSizes);
  const std::string quant_result = quant.finish();
  stop = true;
  attack.join();
  BOOST_TEST(result == "");
  BOOST_TEST(quant_result == "");
  BOOST_TEST(errors > 0u, "no error answers to " << sent << " hostile requests");
  BOOST_TEST(statuses > 0u);
  for (std::size_t n = 0; n < 3; ++n) BOOST_TEST(ring.daemon(n).running());
  BOOST_TEST_MESSAGE(sent << " hostile IPC requests and " << oversized << " oversized frames: "
                          << errors << " error answers, " << statuses << " status answers");
  ClientBatch after(ring, "none", 102, 2, kSizes);
  BOOST_TEST(after.finish() == "");
}

// A rank's own process that submits an op of no tensors with no values
// frame at all (a client would send an empty frame): zringd takes it as
// 0 bytes of values and runs the op with the other ranks, which reduce an
// empty map. (zringd read the missing frame before 7871da2, and crashed.)
BOOST_AUTO_TEST_CASE(an_empty_submit_without_its_values_frame_is_an_empty_op) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  const std::size_t target = 2;
  zmq::context_t context(1);
  zmq::socket_t dealer = raw_ipc_dealer(context, ring, target, 200);
  // The next answer to `request` that is not a keepalive, within a guard.
  const auto answer = [&](std::uint64_t request) -> std::optional<wire::IpcMessage> {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      zmq::message_t reply;
      if (!dealer.recv(reply)) continue;
      // A result's values frame follows it (empty here): read and drop it.
      for (bool more = reply.more(); more;) {
        zmq::message_t rest;
        more = dealer.recv(rest) && rest.more();
      }
      wire::IpcMessage m = wire::decode_ipc(reply.data<std::uint8_t>(), reply.size());
      if (wire::request_of(m) == request && !std::holds_alternative<wire::Keepalive>(m)) return m;
    }
    return std::nullopt;
  };
  const Bytes hello = wire::encode_ipc(wire::Hello{1, 0, {}});
  BOOST_TEST_REQUIRE(dealer.send(zmq::buffer(hello), zmq::send_flags::none).has_value());
  const auto welcome = answer(1);
  BOOST_TEST_REQUIRE((welcome && std::holds_alternative<wire::Welcome>(*welcome)));
  // The other two ranks reduce an empty map meanwhile.
  std::vector<std::string> others(2);
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < 2; ++n)
    threads.emplace_back([&, n] {
      try {
        auto ar = CompressedAllReduce::connect(ring.ipc(n), CompressionMethod::none());
        if (!ar.all_reduce(TensorMap{}).empty()) others[n] = "a result for no tensors";
      } catch (const std::exception& e) {
        others[n] = e.what();
      }
    });
  wire::Submit submit{2, 0, {}, wire::ValuesIn::frame, {}, {}};
  submit.manifest.method = "none";
  const Bytes header = wire::encode_ipc(submit);
  BOOST_TEST_REQUIRE(dealer.send(zmq::buffer(header), zmq::send_flags::none).has_value());
  const auto result = answer(2);
  for (auto& t : threads) t.join();
  BOOST_TEST_REQUIRE(result.has_value(), "no answer to the submit");
  const auto* r = std::get_if<wire::Result>(&*result);
  BOOST_TEST_REQUIRE(r != nullptr, "answered with IPC kind "
                                       << static_cast<int>(wire::kind_of(*result)) << ", "
                                       << (std::holds_alternative<wire::ErrorReply>(*result)
                                               ? std::get<wire::ErrorReply>(*result).text
                                               : std::string()));
  BOOST_TEST(r->world_size == 3u);
  BOOST_TEST(!r->in_shared_buffer);
  for (std::size_t n = 0; n < 2; ++n) BOOST_TEST(others[n] == "", "rank " << n);
  const Bytes status = wire::encode_ipc(wire::StatusQuery{3});
  BOOST_TEST_REQUIRE(dealer.send(zmq::buffer(status), zmq::send_flags::none).has_value());
  const auto report = answer(3);
  BOOST_TEST((report && std::holds_alternative<wire::StatusReport>(*report)));
  for (std::size_t n = 0; n < 3; ++n) BOOST_TEST(ring.daemon(n).running());
}

// A local process that sends requests and reads nothing for a while (it was
// stopped, or it floods): its answers fill the daemon's pipe to it. They
// wait in the daemon, in order, and every one arrives once it reads.
BOOST_AUTO_TEST_CASE(a_client_that_reads_nothing_for_a_while_still_gets_every_answer_in_order) {
  TestRing ring(setup());
  ring.start_all();
  ring.wait_up();
  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvhwm, 1);
  dealer.connect(ring.ipc(1));
  // Far more answers than the daemon's pipe (10000) and the socket buffers hold.
  constexpr std::uint64_t kRequests = 40000;
  wire::Result h{};  // a kind only the daemon sends: answered with an error
  for (std::uint64_t id = 1; id <= kRequests; ++id) {
    h.request = id;
    const Bytes bytes = wire::encode_ipc(h);
    BOOST_TEST_REQUIRE(dealer.send(zmq::buffer(bytes), zmq::send_flags::none).has_value());
  }
  dealer.set(zmq::sockopt::rcvtimeo, 200);
  std::uint64_t got = 0, out_of_order = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);  // a guard
  while (got < kRequests && std::chrono::steady_clock::now() < give_up) {
    zmq::message_t reply;
    if (!dealer.recv(reply)) continue;
    const wire::IpcMessage m = wire::decode_ipc(reply.data<std::uint8_t>(), reply.size());
    if (std::holds_alternative<wire::Keepalive>(m)) continue;
    const auto* answer = std::get_if<wire::ErrorReply>(&m);
    BOOST_TEST_REQUIRE(answer != nullptr, "answer " << got + 1 << " is no error");
    BOOST_TEST_REQUIRE((answer->code == ErrorCode::malformed_message));
    out_of_order += answer->request == got + 1 ? 0 : 1;
    ++got;
  }
  BOOST_TEST(got == kRequests, got << " of " << kRequests << " answers arrived");
  BOOST_TEST(out_of_order == 0u);
  BOOST_TEST(ring.daemon(1).running());
  ClientBatch after(ring, "none", 103, 2, kSizes);
  BOOST_TEST(after.finish() == "");
}
