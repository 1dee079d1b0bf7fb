#include "ipc_server.hpp"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <zring/error.hpp>

#include "log.hpp"
#include "transport/staging_board.hpp"

namespace zring::daemon {
namespace {

// What the stats, the log and the timeline call an op: its method, or
// "broadcast" (which compresses nothing, whatever its manifest's method).
std::string op_name(const collective::Manifest& manifest) {
  return manifest.kind == collective::OpKind::broadcast ? std::string("broadcast")
                                                        : manifest.method;
}

// Shares a result buffer with a ZeroMQ message: every local rank gets the
// same bytes, none copied.
zmq::message_t share(const std::shared_ptr<float[]>& values, std::size_t elements) {
  if (elements == 0) return zmq::message_t();
  auto* keep = new std::shared_ptr<float[]>(values);
  return zmq::message_t(
      values.get(), elements * sizeof(float),
      [](void*, void* hint) { delete static_cast<std::shared_ptr<float[]>*>(hint); }, keep);
}

std::string ipc_path(const std::string& endpoint) { return endpoint.substr(std::strlen("ipc://")); }

// Whether files in dir live in memory (tmpfs, ramfs): shared buffers must,
// or every op's values are written back to a disk.
bool in_memory(const std::filesystem::path& dir) {
  struct statfs fs {};
  if (::statfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return false;
  return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

// Where this daemon's shared buffers go, as a path prefix: next to the IPC
// socket (under systemd /run/zring, a tmpfs), or in /dev/shm when the
// socket's directory is on a disk, named after the socket so that only
// this daemon's files carry the prefix.
std::string region_prefix(const std::string& socket) {
  const std::filesystem::path path(socket);
  if (in_memory(path.parent_path())) return socket + ".shm.";
  const std::filesystem::path shm("/dev/shm");
  if (in_memory(shm) && ::access(shm.c_str(), W_OK) == 0) {
    std::string name = socket;
    for (char& c : name)
      if (c == '/') c = '_';
    return (shm / ("zring" + name)).string() + ".shm.";
  }
  log_warn(
      "shared buffers for large tensors go to " + path.parent_path().string() +
      ", which is not in memory (no tmpfs there or at /dev/shm): every op writes them to disk");
  return socket + ".shm.";
}

// Removes the buffers a daemon on the same socket left when it died (their
// names would collide with this one's).
void remove_stale_regions(const std::string& prefix) {
  const std::filesystem::path p(prefix);
  const std::string stem = p.filename().string();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(p.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) == 0) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

IpcServer::IpcServer(boost::asio::io_context& io, zmq::context_t& context, const RingConfig& config,
                     RingWorker& worker)
    : io_(io),
      config_(config),
      worker_(worker),
      socket_(context, zmq::socket_type::router),
      fd_(io),
      // Every local rank and a few tools (zringctl) at once.
      requests_(
          io, config.max_message_bytes, 4 * config.local_ranks + 16,
          [this](std::vector<zmq::message_t>& frames) {
            if (running_) handle(frames);
          },
          [this](const std::string& client, std::vector<std::uint8_t> header,
                 std::optional<zmq::message_t> values) {
            // Its request socket connection broke: the ROUTER, then.
            if (running_) resend(client, {std::move(header), std::move(values)});
          }),
      stall_timer_(io),
      keepalive_timer_(io),
      backlog_timer_(io),
      backlog_(kBacklogBytes),
      ranks_(config) {}

IpcServer::~IpcServer() {
  if (fd_.is_open()) fd_.release();  // the descriptor is ZeroMQ's, not ours to close
}

void IpcServer::start() {
  const std::string path = ipc_path(config_.ipc);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (!ec) ::chmod(dir.c_str(), 0750);
  }
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::router_mandatory, 1);  // tell us when a client is gone
  // A client names its DEALER itself (its request socket connection says
  // which): one that connects again gets its name back at once.
  socket_.set(zmq::sockopt::router_handover, 1);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(config_.max_message_bytes));
  socket_.set(zmq::sockopt::sndhwm, 10000);
  socket_.set(zmq::sockopt::rcvhwm, 10000);
  try {
    socket_.bind(config_.ipc);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::connection_failed,
                "cannot listen on " + config_.ipc + ": " + e.what() +
                    " (does the directory exist and is it writable?)");
  }
  // Only the daemon's user and group may talk to it.
  if (::chmod(path.c_str(), 0660) != 0)
    log_warn("cannot set mode 0660 on " + path + ": " + std::strerror(errno));
  requests_.start(path + ".req");
  // Requests the ring thread does not take itself, as if read here.
  worker_.take_bell(std::make_unique<BellSocket>(path + ".bell"),
                    [this](std::vector<zmq::message_t> frames) {
                      auto held = std::make_shared<std::vector<zmq::message_t>>(std::move(frames));
                      boost::asio::post(io_, [this, held] {
                        if (running_) handle(*held);
                      });
                    });
  region_prefix_ = region_prefix(path);
  remove_stale_regions(region_prefix_);
  log_info("shared buffers for large tensors: " + region_prefix_ + "*");
  fd_.assign(socket_.get(zmq::sockopt::fd));
  running_ = true;
  arm();
  arm_keepalive();
  boost::asio::post(io_, [this] { drain(); });
}

void IpcServer::stop(const std::string& why, ErrorCode code) {
  if (!running_) return;
  for (const Refusal& r : ranks_.clear(code, why)) refuse(r);  // the shared buffers' files go
  for (std::size_t l = 0; l < config_.local_ranks; ++l) worker_.disarm(l);
  for (const RingWorker::Waiting& w : worker_.rung_waiting())
    send_error(w.client, w.request, code, why);
  running_ = false;
  stall_timer_.cancel();
  keepalive_timer_.cancel();
  backlog_timer_.cancel();
  if (fd_.is_open()) {
    fd_.cancel();
    fd_.release();
  }
  requests_.stop();
  socket_.close();
}

// --- reading -------------------------------------------------------------------

void IpcServer::arm() {
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 [this](const boost::system::error_code& ec) {
                   if (ec || !running_) return;
                   drain();
                   arm();
                 });
}

// ZMQ_FD is edge-triggered: read until ZeroMQ says nothing is left.
void IpcServer::drain() {
  while (running_ && (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN)) {
    std::vector<zmq::message_t> frames;
    do {
      zmq::message_t frame;
      if (!socket_.recv(frame, zmq::recv_flags::dontwait)) break;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    } while (true);
    if (!frames.empty()) handle(frames);
  }
}

// One submission from every local rank makes an op.
void IpcServer::assemble() {
  take(ranks_.assemble());
  arm_stall_timer();
}

// Jobs go to the ring; stale ops end here, counted as failed ops.
void IpcServer::take(LocalRanks::Made made) {
  for (std::shared_ptr<const RepeatOp>& op : made.repeats) worker_.arm(std::move(op));
  for (OpJob& job : made.jobs) worker_.submit(std::move(job));
  for (const LocalRanks::StaleOp& op : made.stale) {
    stats_.op_failed(op_name(op.manifest), op.failure);
    for (const Refusal& r : op.answers) refuse(r);
  }
}

void IpcServer::arm_stall_timer() {
  const Clock::time_point deadline = ranks_.stall_deadline();
  if (deadline == Clock::time_point::max()) {
    stall_timer_.cancel();
    return;
  }
  stall_timer_.expires_at(deadline);
  stall_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && running_) on_stall();
  });
}

// Some local ranks submitted, others did not within the timeout: the ring
// learns why, and fails the op everywhere.
void IpcServer::on_stall() {
  LocalRanks::Made made = ranks_.fail_late(Clock::now());
  for (const OpJob& job : made.jobs) log_warn(job.input.failure->text);
  take(std::move(made));
  assemble();
}

void IpcServer::arm_keepalive() {
  keepalive_timer_.expires_after(config_.heartbeat);
  keepalive_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;
    take_books();
    for (const Request* r : ranks_.pending()) send(r->client, wire::Keepalive{r->id});
    for (const RingWorker::Waiting& w : worker_.rung_waiting())
      send(w.client, wire::Keepalive{w.request});
    arm_keepalive();
  });
}

// --- answers -------------------------------------------------------------------

void IpcServer::on_op_done(OpDone done) {
  take_books();  // the ops before it first
  account(std::move(done));
}

// What the ring thread left in its books, in order, each with the ring's
// state after it (only its byte counts moved).
void IpcServer::take_books() {
  for (OpDone& done : worker_.take_books()) {
    std::optional<RingState> state = std::move(done.state);
    account(std::move(done));
    if (state) ring_reported(*state);
  }
}

void IpcServer::account(OpDone done) {
  const std::vector<Request> requests =
      done.rung ? rung_requests(*done.rung) : ranks_.finish(done.id);
  if (requests.empty()) return;  // stopped meanwhile
  if (!done.failure && !done.output)
    done.failure = Status{ErrorCode::internal, "the ring answered op " + std::to_string(done.op) +
                                                   " with neither a result nor a failure"};
  if (done.failure) {
    stats_.op_failed(requests.empty() ? "?" : op_name(requests.front().manifest), *done.failure);
    log_warn("op " + std::to_string(done.op) + " failed: " + done.failure->text);
    for (const Request& r : requests)
      send_error(r.client, r.id, done.failure->code, done.failure->text);
    record(requests, done);
    return;
  }
  const std::uint64_t dense = requests.front().manifest.elements() * sizeof(float);
  Clock::time_point assembled = requests.front().at;  // the last local rank's submission
  for (const Request& r : requests) assembled = std::max(assembled, r.at);
  // Until the answer: when the ring thread gave it on the boards, not when
  // this thread took the books (a rung op's may wait up to a heartbeat).
  const Clock::time_point answered = done.answered_on_board.value_or(Clock::now());
  stats_.op_succeeded(op_name(requests.front().manifest), dense, config_.nodes.size(),
                      std::chrono::duration<double>(answered - assembled).count());
  if (log_level() >= LogLevel::debug)
    log_debug("op " + std::to_string(done.op) + " done: " + op_name(requests.front().manifest) +
              ", " + std::to_string(requests.front().manifest.tensors.size()) + " tensors, " +
              std::to_string(done.output->stats.bytes_sent) + " bytes on the ring");
  if (done.rung) ++stats_.ops_rung;
  // The ring thread answered them already when they all wait on boards.
  if (!done.answered_on_board) reply_results(requests, done, dense);
  record(requests, done);
}

// The request a rung job answered, as if this thread had read it (none
// once stopped).
std::vector<Request> IpcServer::rung_requests(const Rung& rung) const {
  if (!running_) return {};
  const RepeatOp& op = *rung.op;
  Request r;
  r.client = op.client;
  r.id = rung.request;
  r.local_rank = op.local_rank;
  r.manifest = op.job.input.manifest;
  r.method = op.job.input.method;
  r.region = op.job.board_answers.at(0).region;
  r.staged = !op.job.staged.empty();
  r.at = rung.at;
  return {std::move(r)};
}

// The op's times on both threads, for the timeline; called once every rank
// has its answer (or, with a full pipe, has it waiting in the backlog).
void IpcServer::record(const std::vector<Request>& requests, const OpDone& done) {
  OpRecord r;
  r.op = done.op;
  if (!requests.empty()) {
    r.method = op_name(requests.front().manifest);
    r.tensors = requests.front().manifest.tensors.size();
    r.elements = requests.front().manifest.elements();
    r.first_submitted = r.last_submitted = requests.front().at;
  }
  for (const Request& q : requests) {
    r.first_submitted = std::min(r.first_submitted, q.at);
    r.last_submitted = std::max(r.last_submitted, q.at);
  }
  r.local_ranks = requests.size();
  r.nodes = config_.nodes.size();
  if (done.failure) r.error = done.failure->code;
  if (done.output) {
    r.wire_bytes = done.output->stats.bytes_sent;
    r.ring_began = done.output->phases.began;
    r.prepared = done.output->phases.prepared;
    r.summarized = done.output->phases.summarized;
    r.data_done = done.output->phases.finished;
  }
  r.answered = done.answered_on_board.value_or(Clock::now());
  timeline_.add(std::move(r));
}

// Messages first: the averages may be in a rank's shared buffer, which its
// client refills as soon as its board is answered, so a message then holds
// a copy of its own. The client reads the average where it wrote its
// gradients, and the answer on the buffer's board: no message, so it need
// not wait for ZeroMQ's I/O threads (two hops of thread wake-ups) to hear it.
void IpcServer::reply_results(const std::vector<Request>& requests, const OpDone& done,
                              std::uint64_t dense) {
  const collective::OpOutput& out = *done.output;
  const auto* values = reinterpret_cast<const std::uint8_t*>(out.values.get());
  const std::size_t bytes = out.elements * sizeof(float);
  std::vector<BoardAnswer> boards;
  for (const Request& r : requests)
    if (r.region) boards.push_back({r.region, r.id, r.local_rank});
  const bool in_a_buffer = std::any_of(boards.begin(), boards.end(), [&](const BoardAnswer& b) {
    return b.region->data() == values;
  });
  for (const Request& r : requests) {
    if (r.region) continue;
    const wire::Result result =
        result_of(done, r.id, r.local_rank, config_.local_ranks, dense, false);
    if (!in_a_buffer) {
      send(r.client, result, share(out.values, out.elements));
      continue;
    }
    zmq::message_t copy(bytes);
    if (bytes != 0) std::memcpy(copy.data(), values, bytes);
    send(r.client, result, std::move(copy));
  }
  answer_boards(done, boards, config_.local_ranks, dense);
}

void IpcServer::on_ring_state(const RingState& state) {
  take_books();  // the ops that moved those bytes first
  ring_reported(state);
}

void IpcServer::ring_reported(const RingState& state) {
  if (state.up && !stats_.ring.up)
    log_info("ring up (generation " + std::to_string(state.generation) + ")");
  if (!state.up && stats_.ring.up) log_warn("ring down: " + state.reason);
  for (std::size_t n = 0; n < state.mismatches.size(); ++n) {
    const std::string& was = n < stats_.ring.mismatches.size() ? stats_.ring.mismatches[n] : "";
    if (state.mismatches[n] == was) continue;
    const std::string node =
        "node '" + config_.nodes.at(n).name + "' (" + config_.nodes.at(n).address + ")";
    if (!state.mismatches[n].empty())
      log_error(node + " has other settings than this node: " + state.mismatches[n] +
                "; its ring file differs, and it stays out of the ring until they agree");
    else
      log_info(node + " has the same settings as this node again");
  }
  const transport::RingCounters& counted = state.counters;
  const transport::RingCounters& before = stats_.ring.counters;
  if (counted.dropped > before.dropped)
    log_debug(std::to_string(counted.dropped - before.dropped) + " ring messages dropped");
  for (std::size_t n = 0; n < state.data_on_tcp.size(); ++n) {
    const bool was = n < stats_.ring.data_on_tcp.size() && stats_.ring.data_on_tcp[n];
    if (state.data_on_tcp[n] == was) continue;
    const std::string to = "ring messages to node '" + config_.nodes.at(n).name + "' ";
    if (state.data_on_tcp[n])
      log_info(to + "go on a TCP connection to its data port (tcp_data)");
    else
      log_info(to + "go on ZeroMQ again: their TCP connection broke");
  }
  // Refused connections are worth a warning, but a stranger retrying must
  // not flood the log: the first one, then at most one line a minute.
  const std::uint64_t refused =
      counted.auth_rejected + counted.handshakes_failed + counted.data_refused;
  if (refused > before.auth_rejected + before.handshakes_failed + before.data_refused) {
    const auto now = Clock::now();
    if (!refusal_logged_ || now - *refusal_logged_ >= std::chrono::minutes(1)) {
      refusal_logged_ = now;
      log_warn(
          "ring port: " + std::to_string(counted.auth_rejected) + " connections refused by key, " +
          std::to_string(counted.handshakes_failed) + " failed handshakes so far" +
          (counted.last_rejection.empty() ? "" : "; last key refused: " + counted.last_rejection) +
          (counted.last_handshake_failure.empty()
               ? ""
               : "; last failed handshake: " + counted.last_handshake_failure) +
          (counted.data_refused == 0
               ? ""
               : "; data port: " + std::to_string(counted.data_refused) +
                     " connections closed, the last for: " + counted.last_data_refusal));
    }
  }
  stats_.ring_reported(state);
}

}  // namespace zring::daemon
