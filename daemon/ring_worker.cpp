#include "ring_worker.hpp"

#include <malloc.h>
#include <pthread.h>

#include <cstring>

#include "codec/error_feedback.hpp"
#include "collective/allreduce_op.hpp"
#include "log.hpp"
#include "signal_thread.hpp"
#include "transport/staging_board.hpp"
#include "transport/zmq_ring.hpp"

namespace zring::daemon {
namespace {

using collective::Clock;

// A job met ring changes before its summaries at most this often; then it fails.
constexpr unsigned kMostRuns = 3;

// The answer to a job that did not run: its id and, for a rung job, its request.
OpDone done_for(const OpJob& job) {
  OpDone done;
  done.id = job.id;
  done.rung = job.rung;
  return done;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

transport::ZmqRingOptions ring_options(const RingConfig& config) {
  transport::ZmqRingOptions options;
  for (const NodeConfig& node : config.nodes) {
    options.names.push_back(node.name);
    options.addresses.push_back(node.address);
  }
  options.self = config.self_index;
  options.min_nodes = config.min_nodes;
  options.timeout = config.timeout;
  options.heartbeat = config.heartbeat;
  options.max_message_bytes = config.max_message_bytes;
  options.tcp_data = config.tcp_data;
  options.busy_poll = config.busy_poll;
  options.settings.local_ranks = static_cast<std::uint32_t>(config.local_ranks);
  options.settings.chunk_bytes = config.chunk_bytes;
  options.settings.gather_bytes = config.gather_bytes;
  options.settings.direct_bytes = config.direct_bytes;
  options.tcp_congestion = config.tcp_congestion == "system" ? "" : config.tcp_congestion;
  if (config.curve) {
    transport::CurveKeys keys;
    for (const NodeConfig& node : config.nodes) keys.public_keys.push_back(node.public_key);
    keys.secret_key = config.curve->secret_key;
    options.curve = std::move(keys);
  }
  return options;
}

}  // namespace

struct RingWorker::Ring {
  Ring(zmq::context_t& context, const RingConfig& config)
      : ring(context, ring_options(config)), residuals(config.local_ranks) {}
  transport::ZmqRing ring;
  std::vector<codec::ErrorFeedback> residuals;     // per local rank
  collective::Workspace workspace;                 // buffers reused from op to op
  std::optional<Clock::time_point> waiting_since;  // the front job waits for the ring
  RingState reported;
  Clock::time_point bytes_reported{};  // when report_state last reported
};

RingWorker::RingWorker(zmq::context_t& context, const RingConfig& config,
                       std::function<void(OpDone)> on_done, std::function<void(RingState)> on_state,
                       std::function<void(Status)> on_died)
    : context_(context),
      config_(config),
      on_done_(std::move(on_done)),
      on_state_(std::move(on_state)),
      on_died_(std::move(on_died)) {}

RingWorker::~RingWorker() { stop(); }

void RingWorker::start() {
  // Chunks and ZeroMQ messages of up to 32 MiB come from the heap, and freed
  // memory is kept rather than given back: op after op reuses the same pages
  // instead of faulting in fresh ones (the cost is a resident size at its peak).
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ring_ = std::make_unique<Ring>(context_, config_);
  ring_->ring.set_interrupt(&stopping_);
  // Signals go to the daemon's main thread, whose io_context handles them:
  // the ring thread (and the compression helper it starts) never sees one,
  // so no wait of theirs ends early. Faults (SIGSEGV, ...) stay unblocked.
  const sigset_t before = block_async_signals();
  thread_ = std::thread([this] {                            // inherits the mask
    ::pthread_setname_np(::pthread_self(), "zringd-ring");  // as top -H and the tests see it
    run();
  });
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

void RingWorker::stop() noexcept {
  stopping_ = true;
  if (thread_.joinable()) {
    jobs_wake_.signal();
    thread_.join();
  }
  ring_.reset();
  bell_.reset();  // its file goes with it
  std::lock_guard lock(mutex_);
  bell_handed_.reset();
}

void RingWorker::submit(OpJob job) {
  job.queued = Clock::now();
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    if (died_) {
      answer_queued(*died_);
      return;
    }
  }
  jobs_wake_.signal();
}

void RingWorker::run() noexcept {
  std::optional<Status> died;
  try {
    loop();
  } catch (const std::exception& e) {
    died = Status{ErrorCode::internal, std::string("zringd's ring thread stopped: ") + e.what()};
  } catch (...) {
    died = Status{ErrorCode::internal, "zringd's ring thread stopped: an unknown exception"};
  }
  if (died) log_error(died->text);
  // Whatever is still queued will never run: answer it.
  std::lock_guard lock(mutex_);
  died_ = died;
  answer_queued(died ? *died : Status{ErrorCode::aborted, "zringd is shutting down"});
  if (died && on_died_) on_died_(*died);
}

void RingWorker::answer_queued(const Status& failure) {
  for (OpJob& job : jobs_) {
    if (job.reset_rank) continue;
    OpDone done = done_for(job);
    done.failure = failure;
    on_done_(std::move(done));
  }
  jobs_.clear();
}

// The ops queued before this thread found it had not run for a timeout:
// the other nodes failed them meanwhile (this node was silent), so they
// fail here too rather than run with the other nodes' next ops.
void RingWorker::fail_queued_before(Clock::time_point noticed, const std::string& why) {
  std::vector<OpDone> failed;
  {
    std::lock_guard lock(mutex_);
    std::deque<OpJob> kept;
    for (OpJob& job : jobs_) {
      if (job.reset_rank || job.queued > noticed) {
        kept.push_back(std::move(job));
        continue;
      }
      OpDone done = done_for(job);
      done.failure = Status{ErrorCode::peer_lost, why + ", and failed this op, queued here before"};
      failed.push_back(std::move(done));
    }
    jobs_ = std::move(kept);
  }
  if (!failed.empty()) log_warn(why + ": " + std::to_string(failed.size()) + " queued ops fail");
  for (OpDone& done : failed) on_done_(std::move(done));
}

void RingWorker::loop() {
  Ring& r = *ring_;
  while (!stopping_) {
    if (bell_waiting_.exchange(false)) {
      std::lock_guard lock(mutex_);
      bell_ = std::move(bell_handed_);
    }
    r.ring.between_ops();
    if (std::optional<transport::ZmqRing::Stall> stall = r.ring.take_stall()) {
      fail_queued_before(stall->noticed, stall->why);
      r.waiting_since.reset();  // a later job waits for the next ring from now
    }
    report_state();
    std::optional<OpJob> job = take_ready_job();
    if (job && job->reset_rank) {
      r.residuals.at(*job->reset_rank).clear();
    } else if (job && r.ring.up()) {
      execute(*job);
    } else if (job) {  // waited a whole timeout for the ring to come up
      OpDone done = done_for(*job);
      done.failure = Status{ErrorCode::peer_lost, "the ring is not up after " +
                                                      std::to_string(config_.timeout.count()) +
                                                      " ms: " + r.ring.down_reason()};
      on_done_(std::move(done));
    } else {
      auto until = Clock::now() + std::chrono::seconds(1);
      if (r.waiting_since) until = std::min(until, *r.waiting_since + config_.timeout);
      transport::ZmqRing::Readable bell{bell_ ? bell_->fd() : -1};
      r.ring.service(until, &jobs_wake_, &bell);
      if (bell.ready) read_bell();
    }
  }
}

// The next job to act on: a reset, an op when the ring is up, or an op that
// has waited a whole timeout for the ring (to be failed). Otherwise none,
// and waiting_since marks how long the first op has been waiting.
std::optional<OpJob> RingWorker::take_ready_job() {
  Ring& r = *ring_;
  std::lock_guard lock(mutex_);
  if (jobs_.empty()) return std::nullopt;
  const bool waited_enough = r.waiting_since && Clock::now() - *r.waiting_since >= config_.timeout;
  if (jobs_.front().reset_rank || r.ring.up() || waited_enough) {
    if (!jobs_.front().reset_rank) r.waiting_since.reset();
    OpJob job = std::move(jobs_.front());
    jobs_.pop_front();
    return job;
  }
  if (!r.waiting_since) r.waiting_since = Clock::now();
  return std::nullopt;
}

// Between ops the byte counts move with every heartbeat and with the next
// op's messages that come before its request: a report of those alone
// would wake the io thread for nothing new, so they wait for the op's
// answer (changed_state, from execute) or kBytesEvery.
void RingWorker::report_state() {
  Ring& r = *ring_;
  const auto now = Clock::now();
  std::optional<RingState> state = changed_state(now < r.bytes_reported + kBytesEvery);
  if (!state) return;
  r.bytes_reported = now;
  on_state_(*state);
}

std::optional<RingState> RingWorker::changed_state(bool bytes_may_wait, bool* only_bytes) {
  Ring& r = *ring_;
  RingState state;
  state.up = r.ring.up();
  state.reason = r.ring.down_reason();
  state.generation = r.ring.generation();
  state.counters = r.ring.counters();
  const transport::Membership& membership = r.ring.membership();
  const auto now = Clock::now();
  for (std::size_t n = 0; n < config_.nodes.size(); ++n) {
    state.peers.push_back(membership.peer(n, now));
    state.data_on_tcp.push_back(r.ring.data_on_tcp(n));
    state.mismatches.push_back(membership.mismatch(n));
  }
  for (const std::uint32_t m : membership.members())
    state.members.push_back(config_.nodes.at(m).name);
  state.last_change = membership.last_change();
  // Also reported when only the byte counts moved: the io thread attributes
  // the traffic between two reports to the op that finished between them.
  if (state == r.reported) return std::nullopt;
  if (bytes_may_wait || only_bytes) {
    RingState bytes_as_reported = state;
    bytes_as_reported.counters.bytes_sent = r.reported.counters.bytes_sent;
    bytes_as_reported.counters.bytes_received = r.reported.counters.bytes_received;
    const bool bytes_alone = bytes_as_reported == r.reported;
    if (bytes_may_wait && bytes_alone) return std::nullopt;
    if (only_bytes) *only_bytes = bytes_alone;
  }
  r.reported = state;
  return state;
}

void RingWorker::execute(OpJob& job) {
  Ring& r = *ring_;
  OpDone done = done_for(job);
  if (job.rung) {
    std::lock_guard lock(mutex_);
    rung_running_ = Waiting{job.rung->op->client, job.rung->request};
  }
  // Once the io thread has the answer it keeps the client waiting itself.
  struct NotRunning {
    RingWorker& w;
    ~NotRunning() {
      std::lock_guard lock(w.mutex_);
      w.rung_running_.reset();
    }
  } not_running{*this};
  collective::OpInput& input = job.input;  // a job that runs again is set up again
  input.ranks.clear();
  input.rank0_owner.reset();
  input.staging = nullptr;
  const std::size_t elements = input.manifest.elements();
  std::vector<std::vector<float>> aligned;  // copies of values ZeroMQ left misaligned
  for (const collective::Bytes& values : job.values) {
    if (input.failure) break;
    const std::uint8_t* p = values.data();
    if (values.size() != elements * sizeof(float)) {
      input.failure =
          Status{ErrorCode::internal, "values frame of the wrong size reached the ring"};
      break;
    }
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0) {
      if (input.ranks.empty()) input.rank0_owner = values.owner();
      input.ranks.push_back(reinterpret_cast<const float*>(p));
      continue;
    }
    auto& copy = aligned.emplace_back(elements);
    std::memcpy(copy.data(), p, elements * sizeof(float));
    input.ranks.push_back(copy.data());
  }
  if (input.output && reinterpret_cast<std::uintptr_t>(input.output) % alignof(float) != 0) {
    input.output = nullptr;  // the workspace's buffer, then
    input.output_owner.reset();
  }
  if (input.failure) input.ranks.clear();
  // Values still being copied in: the op waits for them as it needs them.
  std::optional<transport::RegionStaging> staging;
  if (!input.failure && !job.staged.empty()) {
    staging.emplace(job.staged, job.staged_who,
                    collective::staging_order(input.manifest, input.method, config_.nodes.size(),
                                              config_.self_index),
                    config_.timeout, r.ring.nodes(), r.ring.node());
    input.staging = &*staging;
  }
  // An op of at most a chunk waits for a few messages, not for a stream of
  // data: it looks for them without sleeping first (busy_poll_us).
  const bool short_op = elements * sizeof(float) <= config_.chunk_bytes;
  try {
    done.op = r.ring.begin_op(short_op);
  } catch (const Error& e) {
    done.failure = Status{e.code(), e.what()};
    on_done_(std::move(done));
    return;
  }
  collective::OpContext context;
  // The ranks of the nodes in this op's ring.
  done.ring_nodes = r.ring.nodes();
  done.ring_position = r.ring.node();
  context.world_size = done.ring_nodes * config_.local_ranks;
  context.local_ranks = config_.local_ranks;
  context.op_seed = mix(r.ring.generation() ^ mix(done.op));
  context.op_number = done.op;
  context.ring.chunk_bytes = config_.chunk_bytes;
  context.ring.gather_bytes = config_.gather_bytes;
  context.ring.direct_bytes = config_.direct_bytes;
  context.ring.timeout = config_.timeout;
  // A failed op must not eat what it did not send: run_allreduce changes
  // the residuals only when the op succeeds.
  const auto started = Clock::now();
  done.output.emplace().phases.began = started;
  std::vector<ReadyAnswer> board_answers;  // given once the op is handed over
  try {
    collective::OpOutput out =
        collective::run_allreduce(r.ring, context, input, r.residuals, r.workspace);
    r.ring.count_drops(out.stats.dropped, out.stats.last_drop);
    r.ring.end_op(std::nullopt);
    done.output = std::move(out);
    if (log_level() >= LogLevel::debug) {  // the line is built only when it is written
      const auto us = [](Clock::duration d) {
        return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
      };
      const collective::OpOutput::Phases& p = done.output->phases;
      log_debug("op " + std::to_string(done.op) + ": ring part took " + us(p.finished - started) +
                " us (prepare " + us(p.prepared - p.began) + ", summaries " +
                us(p.summarized - p.began) + ", data " + us(p.finished - p.summarized) + ") for " +
                std::to_string(done.output->stats.bytes_sent) + " bytes sent");
    }
    // Last in the try: an op that fails is never answered on its boards
    // (the io thread answers it with its failure).
    board_answers = ready_on_boards(job, done);
  } catch (const collective::AgreedFailure& e) {
    r.ring.end_op(Status{e.code(), e.what(), true});
    done.failure = Status{e.code(), e.what()};
  } catch (const Error& e) {
    // The ring changed before any node could write a result: every node
    // runs the op on the next ring, also the ones that had not begun it.
    const bool again = r.ring.op_may_run_again() && ++job.runs < kMostRuns;
    if (again && staging) staging->keep_open();
    r.ring.end_op(Status{e.code(), e.what(), false});
    if (again) {
      log_info("op " + std::to_string(done.op) + " runs again on the next ring: " + e.what());
      std::lock_guard lock(mutex_);
      jobs_.push_front(std::move(job));
      return;
    }
    done.failure = Status{e.code(), e.what()};
  } catch (const std::exception& e) {
    const std::string text = std::string("op failed inside zringd: ") + e.what();
    r.ring.end_op(Status{ErrorCode::internal, text, false});
    done.failure = Status{ErrorCode::internal, text};
  }
  // The op goes to the io thread's books (or queue) before its ranks hear
  // of it on their boards: a status query a client sends once it has its
  // answer then counts the op (the io thread takes the books, and runs what
  // was queued, before it reads a request that came later).
  if (job.rung && done.answered_on_board && keep_in_books(done)) {
    give_board_answers(board_answers);
    return;
  }
  if (!done.state) done.state = changed_state(false);
  on_done_(std::move(done));
  give_board_answers(board_answers);
}

// A rung op answered on its board leaves its books to the io thread's next
// wake (take_books) while the ring changed only its byte counts.
bool RingWorker::keep_in_books(OpDone& done) {
  bool only_bytes = true;
  done.state = changed_state(false, &only_bytes);
  if (!only_bytes) return false;  // more than bytes: the io thread hears of it now
  std::lock_guard lock(mutex_);
  if (books_.size() >= kMostBooks) return false;
  books_.push_back(std::move(done));
  return true;
}

// The answers of a successful op whose ranks all wait on their buffers'
// boards, as the io thread would write them (IpcServer::reply_results).
std::vector<ReadyAnswer> RingWorker::ready_on_boards(const OpJob& job, OpDone& done) const {
  if (job.board_answers.empty()) return {};
  std::vector<ReadyAnswer> answers = ready_board_answers(
      done, job.board_answers, config_.local_ranks, job.input.manifest.elements() * sizeof(float));
  done.answered_on_board = Clock::now();
  return answers;
}

void answer_boards(const OpDone& done, const std::vector<BoardAnswer>& boards,
                   std::size_t local_ranks, std::uint64_t dense_bytes) {
  give_board_answers(ready_board_answers(done, boards, local_ranks, dense_bytes));
}

std::vector<ReadyAnswer> ready_board_answers(const OpDone& done,
                                             const std::vector<BoardAnswer>& boards,
                                             std::size_t local_ranks, std::uint64_t dense_bytes) {
  const collective::OpOutput& out = *done.output;
  const auto* values = reinterpret_cast<const std::uint8_t*>(out.values.get());
  std::vector<ReadyAnswer> answers;
  answers.reserve(boards.size());
  for (const BoardAnswer& b : boards) {
    if (out.elements != 0 && values != b.region->data())
      std::memcpy(b.region->data(), values, out.elements * sizeof(float));
    answers.push_back(
        {b.region, result_of(done, b.request, b.local_rank, local_ranks, dense_bytes, true)});
  }
  return answers;
}

void give_board_answers(const std::vector<ReadyAnswer>& answers) noexcept {
  for (const ReadyAnswer& a : answers) transport::board_of(*a.region).answer(a.result);
}

wire::Result result_of(const OpDone& done, std::uint64_t request, std::size_t local_rank,
                       std::size_t local_ranks, std::uint64_t dense_bytes, bool in_shared_buffer) {
  wire::Result result;
  result.in_shared_buffer = in_shared_buffer;
  result.request = request;
  result.op = done.op;
  result.wire_bytes = done.output->stats.bytes_sent;
  result.dense_bytes = dense_bytes;
  // The ranks of the ring that ran the op, numbered node by node in it.
  result.world_size = static_cast<std::uint32_t>(done.ring_nodes * local_ranks);
  result.rank = static_cast<std::uint32_t>(done.ring_position * local_ranks + local_rank);
  return result;
}

}  // namespace zring::daemon
