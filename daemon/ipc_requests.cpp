// ipc_requests.cpp - IpcServer's requests from clients (daemon-internal).
//
// What each IPC message asks of zringd: a hello takes a local rank, a
// submission joins the rank's next op, an attach makes a shared buffer,
// and status and trace queries read the daemon's stats and timeline. A
// request read too late (zringd stopped or starved) is judged here.
#include <unistd.h>

#include <zring/error.hpp>

#include "ipc_server.hpp"
#include "log.hpp"
#include "metrics.hpp"
#include "request_age.hpp"

namespace zring::daemon {

void IpcServer::handle(std::vector<zmq::message_t>& frames) {
  take_books();  // a status or trace query, or the ops' order, counts them
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
    worker_.disarm(l);  // the ops the rank's old process rang
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
  if (const std::optional<std::string> why =
          block_stats_refusal(submit, r.method, config_.nodes.size())) {
    send_error(client, submit.request, ErrorCode::malformed_message, *why);
    return;
  }
  r.block_stats = submit.block_stats;
  const std::uint64_t bytes = submit.manifest.elements() * sizeof(float);
  r.staged = submit.values == wire::ValuesIn::staged;
  const bool shared = submit.values != wire::ValuesIn::frame;
  if (shared) r.region = ranks_.region(l, submit.buffer);
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
    // The client mapped the buffer before it asked for an op in it: its
    // name is no longer needed, and gone, it cannot outlive this zringd.
    r.region->remove_file();
    r.values = collective::Bytes(r.region->data(), bytes, r.region);
    if (config_.local_ranks == 1) r.repeat_key = repeat_key(submit);
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
  if (!ranks_.clock_shared(l) || !read_too_late(wait, config_.timeout)) return std::nullopt;
  const std::chrono::milliseconds age = request_age(wait);
  return ranks_.rank_name(l) + "'s zringd read its " + what + " " + std::to_string(age.count()) +
         " ms after it was sent (zringd was stopped or starved), beyond timeout_ms " +
         std::to_string(config_.timeout.count()) +
         ": the other nodes are past that op, and it fails on this node without running";
}

bool IpcServer::given_up(const wire::ClientWait& wait) const {
  return client_gave_up(wait, config_.heartbeat);
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
  // Some of its armed ops were in the buffer this one replaces (those of
  // the other buffer are armed again at their next run).
  worker_.disarm(l);
  try {
    ranks_.set_region(l, attach.buffer, transport::SharedRegion::create(path, attach.bytes));
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

}  // namespace zring::daemon
