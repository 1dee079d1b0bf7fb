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
#include "metrics.hpp"

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
  running_ = false;
  stall_timer_.cancel();
  keepalive_timer_.cancel();
  backlog_timer_.cancel();
  if (fd_.is_open()) {
    fd_.cancel();
    fd_.release();
  }
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

void IpcServer::handle(std::vector<zmq::message_t>& frames) {
  const std::string client = frames[0].to_string();
  if (frames.size() < 2 || frames.size() > 3) {
    log_warn("dropped an IPC message of " + std::to_string(frames.size()) + " frames");
    return;
  }
  wire::IpcMessage message;
  try {
    message = wire::decode_ipc(frames[1].data<std::uint8_t>(), frames[1].size());
  } catch (const Error& e) {
    log_warn(std::string("dropped a malformed IPC message: ") + e.what());
    send_error(client, 0, e.code(), std::string("zringd could not read the request: ") + e.what());
    return;
  }
  std::optional<zmq::message_t> values;
  if (frames.size() == 3) values = std::move(frames[2]);
  if (const auto* hello = std::get_if<wire::Hello>(&message)) return on_hello(client, *hello);
  if (const auto* submit = std::get_if<wire::Submit>(&message))
    return on_submit(client, *submit, std::move(values));
  if (const auto* attach = std::get_if<wire::Attach>(&message)) return on_attach(client, *attach);
  if (const auto* query = std::get_if<wire::StatusQuery>(&message))
    return on_status(client, *query);
  if (const auto* query = std::get_if<wire::TraceQuery>(&message)) return on_trace(client, *query);
  send_error(client, wire::request_of(message), ErrorCode::malformed_message,
             "zringd does not take requests of this kind from clients");
}

void IpcServer::on_hello(const std::string& client, const wire::Hello& hello) {
  const std::size_t l = hello.local_rank;
  if (l >= config_.local_ranks) {
    send_error(client, hello.request, ErrorCode::invalid_argument,
               "local_rank " + std::to_string(l) + " is out of range: node '" + config_.self +
                   "' has local_ranks: " + std::to_string(config_.local_ranks) + " (" +
                   config_.source + ")");
    return;
  }
  // Whether the client's send times can be read on this clock: a hello is
  // read at once, so anything but a small gap means another clock (a time
  // namespace) or a zringd that was frozen then: its requests are not
  // judged by their age.
  const auto sent = hello.wait.sent_ns;
  const auto gap = Clock::now() - Clock::time_point(std::chrono::nanoseconds(sent));
  const bool clock_shared =
      sent != 0 && gap > -std::chrono::seconds(1) && gap < std::chrono::seconds(1);
  const LocalRanks::Hello taken = ranks_.hello(client, l, clock_shared);
  for (const Refusal& r : taken.refused) refuse(r);
  if (taken.taken) {
    OpJob reset;
    reset.reset_rank = l;
    worker_.submit(std::move(reset));
    log_info("client connected as " + ranks_.rank_name(l));
  }
  wire::Welcome welcome;
  welcome.request = hello.request;
  welcome.world_size = static_cast<std::uint32_t>(config_.world_size());
  welcome.rank = static_cast<std::uint32_t>(config_.self_index * config_.local_ranks + l);
  welcome.local_ranks = static_cast<std::uint32_t>(config_.local_ranks);
  welcome.timeout_ms = static_cast<std::uint32_t>(config_.timeout.count());
  welcome.heartbeat_ms = static_cast<std::uint32_t>(config_.heartbeat.count());
  welcome.node = config_.self;
  send(client, welcome);
}

void IpcServer::on_submit(const std::string& client, const wire::Submit& submit,
                          std::optional<zmq::message_t> values) {
  const std::size_t l = submit.local_rank;
  if (!check_owner(client, submit.local_rank, submit.request)) return;
  Request r;
  r.client = client;
  r.id = submit.request;
  r.local_rank = l;
  r.manifest = submit.manifest;
  r.at = Clock::now();
  try {
    r.method = CompressionMethod::parse(submit.manifest.method);
  } catch (const Error& e) {
    send_error(client, submit.request, e.code(), e.what());
    return;
  }
  const std::uint64_t bytes = submit.manifest.elements() * sizeof(float);
  r.staged = submit.values == wire::ValuesIn::staged;
  const bool shared = submit.values != wire::ValuesIn::frame;
  if (shared) r.region = ranks_.region(l);
  const std::uint64_t room =
      shared ? (r.region ? r.region->size() : 0) : (values ? values->size() : 0);
  if (shared ? room < bytes : room != bytes) {
    send_error(client, submit.request, ErrorCode::size_mismatch,
               std::string(shared ? "the shared buffer holds " : "the values frame holds ") +
                   std::to_string(room) + " bytes but the manifest's " +
                   std::to_string(submit.manifest.elements()) + " float32 elements need " +
                   std::to_string(bytes));
    return;
  }
  // Read a whole ring timeout after it was sent (or after the request for
  // the shared buffer that came with it): zringd was stopped or starved
  // meanwhile, and every node that waited for this op has failed it (as
  // this one would have). Run, it would be paired with the other nodes'
  // next op: it fails here, off the ring.
  const std::optional<std::string> late_buffer = ranks_.take_late(l);
  r.stale = read_late(l, submit.wait, "request");
  if (!r.stale) r.stale = late_buffer;
  const auto age = request_age(submit.wait);
  if (r.stale) {
    log_warn(*r.stale);
  } else if (ranks_.clock_shared(l) && given_up(submit.wait)) {
    // zringd read it after the client stopped waiting (zringd was stopped
    // or starved). Run, it would average the client's abandoned values;
    // dropped, the other ranks' op would be paired with this rank's next
    // one. It takes its place in the op, which fails on every rank: every
    // rank has one failed op, and they stay in step.
    r.given_up = ranks_.rank_name(l) + "'s zringd read its request " + std::to_string(age.count()) +
                 " ms after it was sent, when its client (timeout " +
                 std::to_string(submit.wait.timeout_ms) + " ms) had given up on it";
    log_warn(*r.given_up + ": the op fails on every rank");
  } else if (shared) {
    r.values = collective::Bytes(r.region->data(), bytes, r.region);
  } else {
    // No frame at all is a frame of 0 bytes (room == bytes == 0 here).
    auto message = std::make_shared<zmq::message_t>(values ? std::move(*values) : zmq::message_t());
    r.values = collective::Bytes(message->data<std::uint8_t>(), message->size(), message);
  }
  if (const std::optional<Refusal> refusal = ranks_.submit(std::move(r))) return refuse(*refusal);
  assemble();
}

// Why the op that `what` (from local rank l) is part of fails on this node
// alone, when zringd read it timeout_ms or more after it was sent; nothing
// when it did not, or the rank's clock is not zringd's.
std::optional<std::string> IpcServer::read_late(std::size_t l, const wire::ClientWait& wait,
                                                const std::string& what) const {
  if (!ranks_.clock_shared(l) || wait.sent_ns == 0) return std::nullopt;
  const std::chrono::milliseconds age = request_age(wait);
  if (age < config_.timeout) return std::nullopt;
  return ranks_.rank_name(l) + "'s zringd read its " + what + " " + std::to_string(age.count()) +
         " ms after it was sent (zringd was stopped or starved), beyond timeout_ms " +
         std::to_string(config_.timeout.count()) +
         ": the other nodes are past that op, and it fails on this node without running";
}

// How long ago the client sent the request, on zringd's clock.
std::chrono::milliseconds IpcServer::request_age(const wire::ClientWait& wait) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - Clock::time_point(std::chrono::nanoseconds(wait.sent_ns)));
}

// Whether the client had given up on the request by the time zringd read
// it, or will before the first keepalive for it (a heartbeat away) can
// reach it; the margin is at most a quarter of the client's timeout.
bool IpcServer::given_up(const wire::ClientWait& wait) const {
  if (wait.timeout_ms == 0 || wait.sent_ns == 0) return false;
  const auto timeout = std::chrono::milliseconds(wait.timeout_ms);
  const auto margin = std::min<Clock::duration>(config_.heartbeat, timeout / 4);
  return request_age(wait) >= timeout - margin;
}

bool IpcServer::check_owner(const std::string& client, std::uint32_t local_rank,
                            std::uint64_t request) {
  const std::optional<Refusal> refusal = ranks_.check_owner(client, local_rank, request);
  if (refusal) refuse(*refusal);
  return !refusal;
}

// A client with large tensors asks for a buffer both sides map.
void IpcServer::on_attach(const std::string& client, const wire::Attach& attach) {
  const std::size_t l = attach.local_rank;
  if (!check_owner(client, attach.local_rank, attach.request)) return;
  constexpr std::uint64_t kMaxShared = std::uint64_t{1} << 36;  // 64 GiB
  if (attach.bytes == 0 || attach.bytes > kMaxShared) {
    send_error(client, attach.request, ErrorCode::resource_limit,
               "a shared buffer of " + std::to_string(attach.bytes) +
                   " bytes is not offered (1 byte .. 64 GiB)");
    return;
  }
  // The pid keeps names unguessable in a shared directory such as /dev/shm.
  const std::string path = region_prefix_ + std::to_string(::getpid()) + "." + std::to_string(l) +
                           "." + std::to_string(++regions_made_);
  try {
    ranks_.set_region(l, transport::SharedRegion::create(path, attach.bytes));
  } catch (const Error& e) {
    send_error(client, attach.request, e.code(), e.what());
    return;
  }
  // A buffer asked for while zringd was stopped: the op it came with (the
  // rank's next) is over on the other nodes.
  if (std::optional<std::string> late = read_late(l, attach.wait, "request for a shared buffer"))
    ranks_.mark_late(l, std::move(*late));
  send(client, wire::Attached{attach.request, path, attach.bytes});
}

// One submission from every local rank makes an op.
void IpcServer::assemble() {
  take(ranks_.assemble());
  arm_stall_timer();
}

// Jobs go to the ring; stale ops end here, counted as failed ops.
void IpcServer::take(LocalRanks::Made made) {
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
    for (const Request* r : ranks_.pending()) send(r->client, wire::Keepalive{r->id});
    arm_keepalive();
  });
}

// --- answers -------------------------------------------------------------------

void IpcServer::on_op_done(OpDone done) {
  const std::vector<Request> requests = ranks_.finish(done.id);
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
  stats_.op_succeeded(op_name(requests.front().manifest), dense, config_.nodes.size(),
                      std::chrono::duration<double>(Clock::now() - assembled).count());
  log_debug("op " + std::to_string(done.op) + " done: " + op_name(requests.front().manifest) +
            ", " + std::to_string(requests.front().manifest.tensors.size()) + " tensors, " +
            std::to_string(done.output->stats.bytes_sent) + " bytes on the ring");
  for (const Request& r : requests) reply_result(r, done, dense);
  record(requests, done);
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
  r.answered = Clock::now();
  timeline_.add(std::move(r));
}

void IpcServer::reply_result(const Request& r, const OpDone& done, std::uint64_t dense) {
  wire::Result result;
  result.in_shared_buffer = r.region != nullptr;
  result.request = r.id;
  const collective::OpOutput& out = *done.output;
  result.op = done.op;
  result.wire_bytes = out.stats.bytes_sent;
  result.dense_bytes = dense;
  // The ranks of the ring that ran the op, numbered node by node in it.
  result.world_size = static_cast<std::uint32_t>(done.ring_nodes * config_.local_ranks);
  result.rank = static_cast<std::uint32_t>(done.ring_position * config_.local_ranks + r.local_rank);
  if (!r.region) {
    send(r.client, result, share(out.values, out.elements));
    return;
  }
  // The client reads the average where it wrote its gradients.
  const auto* values = reinterpret_cast<const std::uint8_t*>(out.values.get());
  if (out.elements != 0 && values != r.region->data())
    std::memcpy(r.region->data(), values, out.elements * sizeof(float));
  send(r.client, result);
}

void IpcServer::on_ring_state(const RingState& state) {
  if (state.up && !stats_.ring.up)
    log_info("ring up (generation " + std::to_string(state.generation) + ")");
  if (!state.up && stats_.ring.up) log_warn("ring down: " + state.reason);
  const transport::RingCounters& counted = state.counters;
  const transport::RingCounters& before = stats_.ring.counters;
  if (counted.dropped > before.dropped)
    log_debug(std::to_string(counted.dropped - before.dropped) + " ring messages dropped");
  // Refused connections are worth a warning, but a stranger retrying must
  // not flood the log: the first one, then at most one line a minute.
  const std::uint64_t refused = counted.auth_rejected + counted.handshakes_failed;
  if (refused > before.auth_rejected + before.handshakes_failed) {
    const auto now = Clock::now();
    if (!refusal_logged_ || now - *refusal_logged_ >= std::chrono::minutes(1)) {
      refusal_logged_ = now;
      log_warn(
          "ring port: " + std::to_string(counted.auth_rejected) + " connections refused by key, " +
          std::to_string(counted.handshakes_failed) + " failed handshakes so far" +
          (counted.last_rejection.empty() ? "" : "; last key refused: " + counted.last_rejection) +
          (counted.last_handshake_failure.empty()
               ? ""
               : "; last failed handshake: " + counted.last_handshake_failure));
    }
  }
  stats_.ring_reported(state);
}

void IpcServer::on_status(const std::string& client, const wire::StatusQuery& query) {
  send(client, wire::StatusReport{query.request, status_report(stats_, config_)});
}

// The timeline travels in a frame of its own: 4096 ops are far more than an
// IPC text may hold.
void IpcServer::on_trace(const std::string& client, const wire::TraceQuery& query) {
  const std::vector<std::uint8_t> trace = wire::encode_trace(timeline_.export_trace(config_.self));
  send(client, wire::TraceReply{query.request, config_.self},
       zmq::message_t(trace.data(), trace.size()));
}

// An answer goes out at once unless the client's pipe is full or answers
// to it already wait: then it waits in the backlog, in order. A keepalive
// is not worth keeping: such a client has messages to read.
void IpcServer::send(const std::string& client, const wire::IpcMessage& message,
                     std::optional<zmq::message_t> values) {
  if (!running_) return;
  AnswerBacklog::Answer answer{wire::encode_ipc(message), std::move(values)};
  const bool keepalive = std::holds_alternative<wire::Keepalive>(message);
  if (backlog_.holds(client)) {
    if (!keepalive) park(client, std::move(answer));
  } else if (try_send(client, answer) == AnswerBacklog::Sent::full && !keepalive) {
    park(client, std::move(answer));
  }
  // Sending can swallow the edge of ZMQ_FD: look for input again.
  boost::asio::post(io_, [this] { drain(); });
}

AnswerBacklog::Sent IpcServer::try_send(const std::string& client, AnswerBacklog::Answer& answer) {
  try {
    if (!socket_.send(zmq::buffer(client), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return AnswerBacklog::Sent::full;
    // The rest of a message whose first frame went in always follows it.
    socket_.send(zmq::buffer(answer.header.data(), answer.header.size()),
                 answer.values ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (answer.values) socket_.send(std::move(*answer.values), zmq::send_flags::none);
    return AnswerBacklog::Sent::yes;
  } catch (const zmq::error_t& e) {
    log_debug("could not answer a client (" + std::string(e.what()) + "): it has gone");
    return AnswerBacklog::Sent::gone;
  }
}

void IpcServer::park(const std::string& client, AnswerBacklog::Answer answer) {
  if (!backlog_.park(client, std::move(answer))) {
    ++answers_dropped_;
    const auto now = Clock::now();
    if (!drop_logged_ || now - *drop_logged_ >= std::chrono::seconds(10)) {
      drop_logged_ = now;
      log_warn("a client that reads nothing has " + std::to_string(kBacklogBytes >> 20) +
               " MiB of answers waiting: further answers to it are dropped (" +
               std::to_string(answers_dropped_) + " so far)");
    }
    return;
  }
  if (!backlog_armed_) {
    backlog_retry_ = std::chrono::milliseconds(1);
    arm_backlog_timer();
  }
}

// Retries the backlog, sooner while it moves, up to every 50 ms while it does not.
void IpcServer::arm_backlog_timer() {
  backlog_armed_ = true;
  backlog_timer_.expires_after(backlog_retry_);
  backlog_timer_.async_wait([this](const boost::system::error_code& ec) {
    backlog_armed_ = false;
    if (ec || !running_) return;
    const std::size_t sent =
        backlog_.flush([this](const std::string& client, AnswerBacklog::Answer& answer) {
          return try_send(client, answer);
        });
    if (backlog_.empty()) return;
    backlog_retry_ = sent > 0 ? std::chrono::milliseconds(1)
                              : std::min(backlog_retry_ * 2, std::chrono::milliseconds(50));
    arm_backlog_timer();
    boost::asio::post(io_, [this] { drain(); });
  });
}

void IpcServer::refuse(const Refusal& refusal) {
  send_error(refusal.client, refusal.request, refusal.code, refusal.text);
}

void IpcServer::send_error(const std::string& client, std::uint64_t id, ErrorCode code,
                           const std::string& text) {
  send(client, wire::ErrorReply{id, code, text});
}

}  // namespace zring::daemon
