// ring_worker.hpp - the daemon's ring thread (daemon-internal).
//
// Owns the ring's ZeroMQ sockets and runs, one at a time, the ops the IPC
// side hands it; between ops it keeps the ring's membership protocol going.
// Jobs arrive through submit() (any thread); results leave through the
// on_done / on_state callbacks, called on the ring thread (the daemon
// posts them to its io_context; the state after an op rides in its
// OpDone). Between ops it also reads the bell (bell_socket.hpp): an op
// the io thread armed (arm) starts there at once, without the io thread;
// other requests go to the io thread. No exception leaves the thread:
// failures travel as values.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zring/compression.hpp>
#include <zring/config.hpp>
#include <zring/error.hpp>

#include "bell_socket.hpp"
#include "collective/allreduce_op.hpp"
#include "collective/link.hpp"
#include "collective/manifest.hpp"
#include "status.hpp"
#include "transport/membership.hpp"
#include "transport/shared_region.hpp"
#include "transport/wakeup.hpp"
#include "transport/zmq_ring.hpp"
#include "wire/wire.hpp"

namespace zring::daemon {

// A local rank of an op that waits for its answer on its shared buffer's
// board: that buffer and the request to answer.
struct BoardAnswer {
  std::shared_ptr<transport::SharedRegion> region;
  std::uint64_t request = 0;
  std::size_t local_rank = 0;
};

struct RepeatOp;

// A request rung on the bell that the ring thread took itself: the op it
// repeats, the client's request id, and when the ring thread read it.
struct Rung {
  std::shared_ptr<const RepeatOp> op;
  std::uint64_t request = 0;
  std::chrono::steady_clock::time_point at;
};

// One op (all-reduce or broadcast, as its manifest says) of this node's
// local ranks, or a request to forget a local rank's error-feedback
// residuals (a new process took the rank).
struct OpJob {
  std::uint64_t id = 0;
  // The op as the ring runs it: its manifest and parsed method; where the
  // averages go when local rank 0 handed its values over in a shared buffer
  // (that buffer itself, so no copy is needed to return them); and
  // input.failure when the node cannot take part. The ring thread points
  // input.ranks at `values` (copying what ZeroMQ left misaligned) and sets
  // input.staging.
  collective::OpInput input;
  // Per local rank, the fused float32 values (in a ZeroMQ message or a
  // shared buffer, kept alive by the Bytes).
  std::vector<collective::Bytes> values;
  // Per local rank whose values are still being copied in (submit_staged):
  // its shared buffer (with the progress board), else nullptr; empty when
  // no rank staged. staged_who names the ranks in errors.
  std::vector<std::shared_ptr<transport::SharedRegion>> staged;
  std::vector<std::string> staged_who;
  // When every local rank's request is answered on its shared buffer's
  // board: each rank's board. The ring thread then answers them itself the
  // moment the op succeeds, without the hop through the io thread (which
  // keeps the rest of the bookkeeping).
  std::vector<BoardAnswer> board_answers;
  std::optional<Rung> rung;                      // made by the ring thread from the bell
  std::optional<std::size_t> reset_rank;         // a reset job, not an op
  unsigned runs = 0;                             // how often the ring began it (a ring change can
                                                 // make it run again)
  std::chrono::steady_clock::time_point queued;  // when submit() took it
};

// An op of a node with one local rank that its client may ring again on
// the bell: the io thread checked its Submit once and arms it; a datagram
// from the same client with the same Submit (but for its request id, wait
// and block statistics, of which it brings as many) then becomes `job`
// again on the ring thread, its board answer under the new request id and
// its statistics the op's, if it was sent within the times the io thread
// allows (request_age.hpp).
// RepeatOp::key of a Submit: the Submit without its request id, wait and
// block statistics, encoded. The io thread arms an op under it and the ring
// thread looks a ring up by it, so both make it here.
std::string repeat_key(wire::Submit submit);

struct RepeatOp {
  std::string client;  // the routing id that may ring it
  std::size_t local_rank = 0;
  std::string key;            // the Submit, request 0, no wait, no block statistics, encoded
  bool clock_shared = false;  // the rank's send times are on zringd's clock
  std::size_t stats = 0;      // block statistics each ring brings (Submit::block_stats)
  OpJob job;                  // one request answered on its board; id 0, no given_stats
};

// The ring's health as the ring thread sees it, reported to the io thread.
struct RingState {
  bool up = false;
  std::string reason;  // why not up
  std::uint64_t generation = 0;
  // Drops, formations, bytes on the ring and refusals at the ring port,
  // since start, as the transport counts them.
  transport::RingCounters counters;
  // Per listed node, in file order, what the membership knows of it (its
  // name in reports: transport::peer_state_name).
  std::vector<transport::PeerState> peers;
  std::vector<std::string> members;  // the ring (when up) or the one forming, by name
  std::string last_change;           // the last change of members, and why
  // Per listed node: whether this node's messages to it go on its TCP data
  // connection (transport/tcp_data.hpp) rather than on ZeroMQ.
  std::vector<bool> data_on_tcp;
  // Per listed node: what differs between its settings and this node's
  // (Membership::mismatch); empty while they agree.
  std::vector<std::string> mismatches;

  bool operator==(const RingState&) const = default;
};

struct OpDone {
  std::uint64_t id = 0;
  std::uint64_t op = 0;
  // The ring that ran the op: how many nodes, and this one's position.
  std::size_t ring_nodes = 0;
  std::size_t ring_position = 0;
  std::optional<Status> failure;
  // What run_allreduce returned: the averages (manifest order), what this
  // node put on the ring, and where the time went (the timeline). Unset
  // when the op failed before run_allreduce; when run_allreduce threw, only
  // output->phases.began is set.
  std::optional<collective::OpOutput> output;
  // When the ring thread answered the job's board_answers (the op succeeded).
  std::optional<std::chrono::steady_clock::time_point> answered_on_board;
  std::optional<Rung> rung;  // the job's: its request is the io thread's to account for
  // The ring's state after the op when it changed (it does after every op
  // that moved bytes: the counters), handed over with the answer, so that
  // the io thread is woken once per op, not twice.
  std::optional<RingState> state;
};

// The answer to one local rank's request of a successful op (done.output
// set): on its buffer's board, or as a message with the averages.
wire::Result result_of(const OpDone& done, std::uint64_t request, std::size_t local_rank,
                       std::size_t local_ranks, std::uint64_t dense_bytes, bool in_shared_buffer);

// A rank's answer to a successful op, ready to be given on its buffer's board.
struct ReadyAnswer {
  std::shared_ptr<transport::SharedRegion> region;
  wire::Result result;
};

// Answers a successful op's ranks on their boards: the averages first copied
// into every buffer that does not hold them (ready_board_answers), then
// every answer (give_board_answers). They may sit in one of those buffers,
// whose client refills it as soon as it has its answer.
void answer_boards(const OpDone& done, const std::vector<BoardAnswer>& boards,
                   std::size_t local_ranks, std::uint64_t dense_bytes);
std::vector<ReadyAnswer> ready_board_answers(const OpDone& done,
                                             const std::vector<BoardAnswer>& boards,
                                             std::size_t local_ranks, std::uint64_t dense_bytes);
void give_board_answers(const std::vector<ReadyAnswer>& answers) noexcept;

class RingWorker {
 public:
  // on_done answers each op job; on_state reports the ring's state; on_died
  // says the thread stopped by itself (a broken invariant: every job still
  // queued, and every job submitted from then on, is answered with the same
  // failure). All three are called on the ring thread, and on_done also on
  // the submitting thread once the ring thread is gone.
  RingWorker(zmq::context_t& context, const RingConfig& config, std::function<void(OpDone)> on_done,
             std::function<void(RingState)> on_state, std::function<void(Status)> on_died);
  ~RingWorker();
  RingWorker(const RingWorker&) = delete;
  RingWorker& operator=(const RingWorker&) = delete;

  // Binds the ring socket (throws zring::Error if it cannot) and starts the thread.
  void start();
  // Aborts a running op, stops the thread and closes the sockets. Idempotent.
  void stop() noexcept;
  // Queues a job (call from one thread: the daemon's io thread). After the
  // ring thread died, answers it at once with the failure it died of.
  void submit(OpJob job);

  // The bell, from then on read by the ring thread; requests it does not
  // take itself go to `forward` (frames as the ROUTER's: routing id, IPC
  // message), called on the ring thread.
  void take_bell(std::unique_ptr<BellSocket> bell,
                 std::function<void(std::vector<zmq::message_t>)> forward);
  // Lets an op be rung again (it replaces the one of the same key); a rank
  // keeps at most kRepeatOps. disarm forgets every op of a rank: another
  // process took it, or its shared buffer is replaced.
  void arm(std::shared_ptr<const RepeatOp> op);
  void disarm(std::size_t local_rank);
  static constexpr std::size_t kRepeatOps = 1024;  // DDP buckets, parameters one by one
  // The requests of rung jobs queued or running: the io thread keeps their
  // clients waiting (keepalives), as it does for its own.
  struct Waiting {
    std::string client;
    std::uint64_t request = 0;
  };
  [[nodiscard]] std::vector<Waiting> rung_waiting();
  // The answers (OpDone, with the ring's state after each) of rung ops that
  // succeeded and were answered on their boards, oldest first: they wait
  // here for the io thread (which takes them whenever it wakes, and at
  // least every heartbeat) instead of waking it, unless kMostBooks wait
  // already or the ring changed more than its byte counts.
  [[nodiscard]] std::vector<OpDone> take_books();
  static constexpr std::size_t kMostBooks = 1024;

 private:
  void run() noexcept;
  void loop();
  std::optional<OpJob> take_ready_job();
  void report_state();
  // The ring's state when it changed since the last one reported (and then
  // it counts as reported); with bytes_may_wait, not when only the byte
  // counts moved. *only_bytes (if given) says whether they alone moved.
  std::optional<RingState> changed_state(bool bytes_may_wait, bool* only_bytes = nullptr);
  // How long report_state lets a change of the byte counts alone wait.
  static constexpr std::chrono::seconds kBytesEvery{1};
  void execute(OpJob& job);
  // The bell (ring_bell.cpp): the next datagram waiting there, taken as a
  // job or forwarded.
  void read_bell();
  void take_rung(const std::uint8_t* data, std::size_t size);
  std::optional<OpJob> repeat_of(const std::string& client, wire::Submit submit);
  void note_bad_bell(const std::string& why);
  // The answers of a job whose ranks all wait on their boards, ready to be
  // given once the op is in the io thread's books or queue.
  std::vector<ReadyAnswer> ready_on_boards(const OpJob& job, OpDone& done) const;
  bool keep_in_books(OpDone& done);
  void answer_queued(const Status& failure);  // with mutex_ held
  // Takes mutex_ itself.
  void fail_queued_before(std::chrono::steady_clock::time_point noticed, const std::string& why);

  zmq::context_t& context_;
  const RingConfig& config_;
  std::function<void(OpDone)> on_done_;
  std::function<void(RingState)> on_state_;
  std::function<void(Status)> on_died_;
  // submit() and stop() signal it; the ring thread's poll watches it
  // between ops (an eventfd: no ZeroMQ socket to look at in every poll).
  transport::Wakeup jobs_wake_;
  std::mutex mutex_;
  std::deque<OpJob> jobs_;
  std::optional<Status> died_;  // why the ring thread stopped by itself
  // Per local rank, the ops that may be rung again, by key.
  std::vector<std::map<std::string, std::shared_ptr<const RepeatOp>>> repeats_;
  std::optional<Waiting> rung_running_;      // the rung job the ring thread runs
  std::vector<OpDone> books_;                // take_books()'s
  std::unique_ptr<BellSocket> bell_handed_;  // take_bell's, until the ring thread takes it
  std::atomic<bool> bell_waiting_{false};
  std::function<void(std::vector<zmq::message_t>)> forward_;
  // The ring thread's alone: the bell once taken, what it reads into, and
  // the last warning about a datagram it could not read.
  std::unique_ptr<BellSocket> bell_;
  std::vector<std::uint8_t> bell_buffer_;
  std::optional<std::chrono::steady_clock::time_point> bad_bell_logged_;
  std::uint64_t bad_bells_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  struct Ring;
  std::unique_ptr<Ring> ring_;  // lives on the thread after start()
};

}  // namespace zring::daemon
