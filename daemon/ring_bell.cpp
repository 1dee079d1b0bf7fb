// ring_bell.cpp - the ring thread's side of the bell (ring_worker.hpp,
// wire/bell.hpp): the requests clients ring there, each started at once as
// an op the io thread armed, or handed to the io thread.
#include <utility>
#include <variant>
#include <zring/error.hpp>

#include "log.hpp"
#include "request_age.hpp"
#include "ring_worker.hpp"
#include "wire/bell.hpp"

namespace zring::daemon {
namespace {

zmq::message_t message_of(std::span<const std::uint8_t> bytes) {
  return zmq::message_t(bytes.data(), bytes.size());
}

}  // namespace

std::string repeat_key(wire::Submit submit) {
  submit.request = 0;
  submit.wait = {};
  submit.block_stats.clear();  // each ring brings its own (RepeatOp::stats)
  const std::vector<std::uint8_t> encoded = wire::encode_ipc(submit);
  return std::string(encoded.begin(), encoded.end());
}

void RingWorker::take_bell(std::unique_ptr<BellSocket> bell,
                           std::function<void(std::vector<zmq::message_t>)> forward) {
  {
    std::lock_guard lock(mutex_);
    bell_handed_ = std::move(bell);
    forward_ = std::move(forward);
  }
  bell_waiting_ = true;
  jobs_wake_.signal();
}

void RingWorker::arm(std::shared_ptr<const RepeatOp> op) {
  std::lock_guard lock(mutex_);
  if (repeats_.size() != config_.local_ranks) repeats_.resize(config_.local_ranks);
  auto& ops = repeats_.at(op->local_rank);
  const std::string key = op->key;
  if (ops.size() >= kRepeatOps && !ops.contains(key)) ops.clear();  // a new set of ops
  ops[key] = std::move(op);
}

void RingWorker::disarm(std::size_t local_rank) {
  std::lock_guard lock(mutex_);
  if (local_rank < repeats_.size()) repeats_[local_rank].clear();
}

std::vector<RingWorker::Waiting> RingWorker::rung_waiting() {
  std::vector<Waiting> waiting;
  std::lock_guard lock(mutex_);
  if (rung_running_) waiting.push_back(*rung_running_);
  for (const OpJob& job : jobs_)
    if (job.rung) waiting.push_back({job.rung->op->client, job.rung->request});
  return waiting;
}

std::vector<OpDone> RingWorker::take_books() {
  std::lock_guard lock(mutex_);
  return std::exchange(books_, {});
}

void RingWorker::read_bell() {
  // One datagram per look: a client alone on its node rings once per op,
  // and a second read would only say that nothing more is there; if more
  // is, the next poll (at once) says so.
  if (const std::optional<std::size_t> size = bell_->receive(bell_buffer_))
    take_rung(bell_buffer_.data(), *size);
}

// A job when the datagram rings an armed op in time; else the io thread
// judges the request as any other (a datagram without a routing id has no
// one to answer, and is dropped).
void RingWorker::take_rung(const std::uint8_t* data, std::size_t size) {
  wire::BellRequest request;
  try {
    request = wire::decode_bell(data, size);
  } catch (const Error& e) {
    note_bad_bell(e.what());
    return;
  }
  std::optional<OpJob> job;
  try {
    wire::IpcMessage message = wire::decode_ipc(request.message.data(), request.message.size());
    if (auto* submit = std::get_if<wire::Submit>(&message))
      job = repeat_of(request.client, std::move(*submit));
  } catch (const Error&) {
    // The io thread says what is wrong with it, to its client.
  }
  if (job) {
    job->queued = collective::Clock::now();
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(*job));
    return;
  }
  std::function<void(std::vector<zmq::message_t>)> forward;
  {
    std::lock_guard lock(mutex_);
    forward = forward_;
  }
  std::vector<zmq::message_t> frames;
  frames.emplace_back(request.client.data(), request.client.size());
  frames.push_back(message_of(request.message));
  if (forward) forward(std::move(frames));
}

// The armed op this Submit rings, as a job, when its client sent it in
// time; nothing otherwise.
std::optional<OpJob> RingWorker::repeat_of(const std::string& client, wire::Submit submit) {
  const std::uint64_t request = submit.request;
  const wire::ClientWait wait = submit.wait;
  const std::uint32_t local_rank = submit.local_rank;
  std::vector<float> stats = std::move(submit.block_stats);
  const std::string key = repeat_key(std::move(submit));
  std::shared_ptr<const RepeatOp> op;
  {
    std::lock_guard lock(mutex_);
    if (local_rank >= repeats_.size()) return std::nullopt;
    const auto& ops = repeats_[local_rank];
    const auto it = ops.find(key);
    if (it == ops.end()) return std::nullopt;
    op = it->second;
  }
  // Another client, or statistics the op does not take (the io thread names
  // what is wrong with them).
  if (op->client != client || stats.size() != op->stats) return std::nullopt;
  // Read late, or after its client gave up: the io thread's to judge.
  if (op->clock_shared &&
      (read_too_late(wait, config_.timeout) || client_gave_up(wait, config_.heartbeat)))
    return std::nullopt;
  OpJob job = op->job;
  job.board_answers.at(0).request = request;
  job.input.given_stats = std::move(stats);
  job.rung = Rung{op, request, collective::Clock::now()};
  return job;
}

// A datagram nobody can be answered for: counted, and logged at most once a
// minute (anyone in zringd's group may write there).
void RingWorker::note_bad_bell(const std::string& why) {
  ++bad_bells_;
  const auto now = collective::Clock::now();
  if (bad_bell_logged_ && now - *bad_bell_logged_ < std::chrono::minutes(1)) return;
  bad_bell_logged_ = now;
  log_warn("dropped a datagram on the bell " + bell_->path() + ": " + why + " (" +
           std::to_string(bad_bells_) + " so far)");
}

}  // namespace zring::daemon
