// daemon_channel.cpp - the DEALER socket to zringd: sending, polling, errors.
#include "client/daemon_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "transport/zmq_calls.hpp"
#include "transport/zmq_payload.hpp"
#include "wire/bell.hpp"
#include "wire/tcp_frames.hpp"

namespace zring::client {
namespace {

// The largest frame a client accepts from zringd (ZMQ_MAXMSGSIZE): values
// below the shared-buffer threshold, and headers naming many tensors.
constexpr std::size_t kMaxReplyBytes = std::size_t{256} << 20;

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// An ipc:// endpoint whose socket file is missing cannot be served: say so
// at once instead of waiting for the timeout.
void check_endpoint(const std::string& endpoint) {
  const std::string prefix = "ipc://";
  if (endpoint.rfind(prefix, 0) != 0) return;
  const std::string path = endpoint.substr(prefix.size());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(ErrorCode::connection_failed,
                "connect: no zringd socket at " + path + " (" + std::strerror(errno) +
                    "); is zringd running with `ipc: " + endpoint + "` in its config?");
  }
}

// The address of the Unix socket at path; none when the path does not fit.
std::optional<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof address.sun_path) return std::nullopt;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// A routing id of this process's own (16 random bytes, the first not 0,
// which ZeroMQ keeps for the ids it makes): the request socket names it.
std::string random_routing_id() {
  std::random_device random;
  std::string id(16, '\0');
  for (char& c : id) c = static_cast<char>(random() & 0xff);
  id[0] = static_cast<char>((static_cast<unsigned char>(id[0]) % 255) + 1);
  return id;
}

}  // namespace

DaemonChannel::DaemonChannel(const std::string& endpoint, std::chrono::milliseconds timeout,
                             std::function<void()> given_up)
    : endpoint_(endpoint),
      timeout_(timeout),
      given_up_(std::move(given_up)),
      socket_(context_, zmq::socket_type::dealer) {
  check_endpoint(endpoint);
  // ZRING_IPC_REQUESTS=zeromq keeps every request on the DEALER, =stream
  // every one on the request socket, none on the bell (to compare the ways).
  const char* way = std::getenv("ZRING_IPC_REQUESTS");
  const std::string ways = way ? way : "";
  if (endpoint.rfind("ipc://", 0) == 0 && ways != "zeromq") {
    requests_path_ = endpoint.substr(6) + ".req";
    if (ways != "stream") bell_address_ = unix_address(endpoint.substr(6) + ".bell");
  }
  socket_.set(zmq::sockopt::linger, 0);
  routing_id_ = random_routing_id();
  socket_.set(zmq::sockopt::routing_id, routing_id_);
  // Large values travel in the shared buffer: no reply needs more.
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(kMaxReplyBytes));
  try {
    transport::retry_interrupted([&] { socket_.connect(endpoint); });
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::invalid_argument,
                "connect: '" + endpoint + "' is not an endpoint ZeroMQ can connect to (" +
                    e.what() +
                    "); zringd's is the `ipc:` of its config, for example "
                    "ipc:///run/zring/zring.sock");
  }
}

// When this process gives up on the request: after its timeout of silence
// from now (steady_clock is the host's CLOCK_MONOTONIC, as zringd's). A
// zringd that reads it too late refuses it rather than run it with the
// other ranks' next op.
wire::ClientWait DaemonChannel::wait_from_now() const {
  wire::ClientWait wait;
  wait.timeout_ms = static_cast<std::uint32_t>(
      std::min<std::int64_t>(timeout_.count(), std::numeric_limits<std::uint32_t>::max()));
  wait.sent_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
  return wait;
}

DaemonChannel::~DaemonChannel() {
  close_request_stream();
  if (bell_fd_ >= 0) ::close(bell_fd_);
}

// The bell's socket is connected to the path once, so that a ring does not
// look the path up (a tenth of a small op's client CPU went to sendto's
// lookup). A zringd that restarted binds the path anew: a send to the old
// one's socket fails (ECONNREFUSED), and the bell connects again, once.
bool DaemonChannel::ring_bell(const std::vector<std::uint8_t>& message) {
  if (!use_bell_ || 1 + routing_id_.size() + message.size() > wire::kMaxBellBytes) return false;
  const std::vector<std::uint8_t> datagram = wire::encode_bell(routing_id_, message);
  watch_.sending();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (bell_fd_ < 0 && !connect_bell()) return false;
    ssize_t sent;
    do {  // whole or not at all
      sent = ::send(bell_fd_, datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent == static_cast<ssize_t>(datagram.size())) return true;
    if (sent >= 0 || errno == EAGAIN || errno == EWOULDBLOCK) return false;  // full: not now
    ::close(bell_fd_);
    bell_fd_ = -1;
  }
  return false;
}

bool DaemonChannel::connect_bell() {
  bell_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (bell_fd_ < 0) return false;
  int rc;
  do {
    rc = ::connect(bell_fd_, reinterpret_cast<const sockaddr*>(&*bell_address_),
                   sizeof *bell_address_);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) return true;
  ::close(bell_fd_);
  bell_fd_ = -1;
  return false;
}

void DaemonChannel::close_request_stream() noexcept {
  if (requests_fd_ >= 0) ::close(requests_fd_);
  requests_fd_ = -1;
  stream_reader_.reset();
}

// A zringd without one (another release), or one that cannot be reached:
// the requests go on the DEALER.
void DaemonChannel::open_request_stream() {
  close_request_stream();
  const std::optional<sockaddr_un> address = unix_address(requests_path_);
  if (!address) return;
  requests_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (requests_fd_ < 0) return;
  stream_reader_.emplace(kMaxReplyBytes, kMaxReplyBytes);
  int rc;
  do {
    rc = ::connect(requests_fd_, reinterpret_cast<const sockaddr*>(&*address), sizeof *address);
  } while (rc != 0 && errno == EINTR);
  const std::vector<std::uint8_t> first(routing_id_.begin(), routing_id_.end());
  if (rc != 0 || !send_on_stream(first, nullptr) || !stream_taken(first)) close_request_stream();
}

// Whether zringd echoed the routing id (it took the connection) within
// kStreamTaken. Until then no request goes there: one that zringd refused
// (it has too many) would lose what was written to it.
bool DaemonChannel::stream_taken(const std::vector<std::uint8_t>& id) {
  const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(timeout_, kStreamTaken);
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd wait{requests_fd_, POLLIN, 0};
    const int ready = ::poll(&wait, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    read_request_stream();
    if (requests_fd_ < 0) return false;  // closed: refused
    if (stream_answers_.empty()) continue;
    const wire::TcpFrame echo = std::move(stream_answers_.front());
    stream_answers_.pop_front();
    return !echo.has_payload && echo.header == id && stream_answers_.empty();
  }
}

// The request whole on the stream, or false (and the stream closed): the
// daemon drops a frame cut short, so the request can go on the DEALER then.
bool DaemonChannel::send_on_stream(const std::vector<std::uint8_t>& header,
                                   const zmq::message_t* data) {
  if (requests_fd_ < 0) return false;
  const auto prefix =
      wire::encode_tcp_prefix(header.size(), data != nullptr, data ? data->size() : 0);
  const std::pair<const void*, std::size_t> parts[3] = {
      {prefix.data(), prefix.size()},
      {header.data(), header.size()},
      {data ? data->data() : nullptr, data ? data->size() : 0}};
  std::size_t total = 0;
  for (const auto& [at, size] : parts) total += size;
  const auto deadline = Clock::now() + timeout_;  // a zringd that reads nothing for that long
  for (std::size_t done = 0; done < total;) {
    iovec iov[3];
    int n = 0;
    for (std::size_t skip = done; const auto& [at, size] : parts) {
      if (skip >= size) {
        skip -= size;
        continue;
      }
      iov[n++] = {const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(at)) + skip,
                  size - skip};
      skip = 0;
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t sent = ::sendmsg(requests_fd_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      done += static_cast<std::size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && left.count() > 0) {
      pollfd wait{requests_fd_, POLLOUT, 0};
      (void)::poll(&wait, 1, static_cast<int>(left.count()));
      continue;
    }
    close_request_stream();
    return false;
  }
  return true;
}

void DaemonChannel::send(const std::vector<std::uint8_t>& header,
                         std::optional<zmq::message_t> data, bool may_stream) {
  watch_.sending();
  if (may_stream && send_on_stream(header, data ? &*data : nullptr)) return;
  // Never blocks: with no zringd on the socket, ZeroMQ queues requests up
  // to its high-water mark and would then wait for one forever.
  const auto more = data ? zmq::send_flags::sndmore : zmq::send_flags::none;
  if (!transport::retry_interrupted([&] {
        return socket_.send(zmq::buffer(header.data(), header.size()),
                            more | zmq::send_flags::dontwait);
      }))
    throw Error(ErrorCode::connection_failed,
                "zringd at " + endpoint_ +
                    " takes no requests (its queue is full: it has been "
                    "gone for a while); is zringd running (systemctl status zringd)?");
  if (data)  // the rest of a message goes with it
    transport::retry_interrupted(
        [&] { return socket_.send(std::move(*data), zmq::send_flags::none); });
}

// One look at the socket and the connection's state, sleeping up to
// `wait` for either (no longer than the watch needs to decide). A reply
// that is there counts, even if the connection closed behind it.
std::optional<DaemonChannel::Waited> DaemonChannel::look(std::chrono::milliseconds wait) {
  if (!stream_answers_.empty()) return Waited::reply;
  zmq::pollitem_t items[3] = {
      {socket_.handle(), 0, ZMQ_POLLIN, 0}, watch_.item(), {nullptr, requests_fd_, ZMQ_POLLIN, 0}};
  const std::size_t count = requests_fd_ >= 0 ? 3 : 2;
  const auto decides_by = watch_.decides_by();
  if (wait.count() > 0 && decides_by != Clock::time_point::max())
    wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(decides_by - Clock::now()),
                      std::chrono::milliseconds(0), wait);
  if (transport::poll_items(items, count, wait) > 0) {
    if (count == 3 && items[2].revents != 0) read_request_stream(true);
    if ((items[0].revents & ZMQ_POLLIN) || !stream_answers_.empty()) return Waited::reply;
  }
  switch (watch_.check()) {
    case DaemonWatch::State::open:
      return std::nullopt;
    case DaemonWatch::State::closed_during:
      break;
    case DaemonWatch::State::gone:
      return Waited::gone;
  }
  // What the daemon sent before its end closed is queued ahead of the news.
  if (requests_fd_ >= 0) read_request_stream();
  zmq::pollitem_t dealer{socket_.handle(), 0, ZMQ_POLLIN, 0};
  if (!stream_answers_.empty() ||
      transport::poll_items(&dealer, 1, std::chrono::milliseconds(0)) > 0)
    return Waited::reply;
  return Waited::closed_during;
}

// Whole answers the request socket brought; its end (zringd went away) or
// anything it cannot read closes it, and the DEALER carries on.
void DaemonChannel::read_request_stream(bool stop_when_short) {
  while (requests_fd_ >= 0) {
    const auto [at, room] = stream_reader_->room();
    const ssize_t got = ::recv(requests_fd_, at, room, MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) {
      close_request_stream();
      return;
    }
    stream_reader_->filled(static_cast<std::size_t>(got));
    try {
      while (std::optional<wire::TcpFrame> frame = stream_reader_->next())
        stream_answers_.push_back(std::move(*frame));
    } catch (const Error&) {
      close_request_stream();
    }
    // Less than there was room for: the socket was empty, and a recv to
    // learn it would be one system call more per answer (its end, if it
    // came meanwhile, the next poll reports).
    if (stop_when_short && static_cast<std::size_t>(got) < room) return;
  }
}

// Whether the reply is there within `wait`, or what happened instead.
// With a staged op in flight (and not finished), it copies out what
// zringd publishes meanwhile, sleeping on the board between looks.
DaemonChannel::Waited DaemonChannel::wait_reply(std::chrono::milliseconds wait,
                                                StagedTransfer* staged, Board board) {
  const auto until = Clock::now() + wait;
  constexpr auto kSlice = std::chrono::microseconds(2000);  // between looks at the socket
  while (staged && !staged->complete() && !staged->finished()) {
    staged->take_published();
    if (const auto got = look(std::chrono::milliseconds(0))) return *got;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
    if (left.count() <= 0) return Waited::silence;
    if (!staged->complete()) staged->sleep(std::min(left, kSlice));
  }
  // Asleep on the board, woken by its answer, looking at the socket (an
  // error, a keepalive, zringd gone) between slices. The first slice comes
  // before the first look: most answers come within it, and a look is five
  // system calls (the DEALER's and the monitor's events, a poll); an error
  // or a zringd that went away is seen a slice later at most.
  for (bool slept = false; board.board; slept = true) {
    const std::uint32_t seen = board.board->published_seq.load(std::memory_order_acquire);
    if (board.board->answer_to(board.id)) return Waited::on_board;
    if (slept)
      if (const auto got = look(std::chrono::milliseconds(0))) return *got;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
    if (left.count() <= 0) return Waited::silence;
    transport::StagingBoard::sleep_while(board.board->published_seq, seen, std::min(left, kSlice));
  }
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) return Waited::silence;
    if (const auto got = look(left)) return *got;
  }
}

// The next message from zringd by `deadline` (its values frame, if any, in
// `data`), whichever request it answers. Throws when none comes, after
// given_up_ ran.
wire::IpcMessage DaemonChannel::next_reply(Clock::time_point deadline, bool connecting,
                                           StagedTransfer* staged, Board board,
                                           zmq::message_t& data) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  const Waited waited = left.count() <= 0 ? Waited::silence : wait_reply(left, staged, board);
  if (waited == Waited::on_board) {
    last_reply_was_silence_ = false;
    return *board.board->answer_to(board.id);
  }
  if (waited != Waited::reply) {
    last_reply_was_silence_ = true;
    given_up_();
    throw waited == Waited::silence ? silence(connecting) : closed(connecting, waited);
  }
  last_reply_was_silence_ = false;
  if (!stream_answers_.empty()) {  // an answer on the request socket
    wire::TcpFrame answer = std::move(stream_answers_.front());
    stream_answers_.pop_front();
    if (answer.payload_bytes != 0)
      data = transport::message_over(std::move(answer.payload), answer.payload_bytes);
    return wire::decode_ipc(answer.header.data(), answer.header.size());
  }
  zmq::message_t frame;
  const auto receive = [this](zmq::message_t& into) {
    // The reply is queued (look() said so); its frames come together.
    return transport::retry_interrupted([&] { return socket_.recv(into, zmq::recv_flags::none); });
  };
  (void)receive(frame);
  if (frame.more()) (void)receive(data);
  while (data.more()) (void)receive(data);  // never expected: drop extras
  return wire::decode_ipc(frame.data<std::uint8_t>(), frame.size());
}

Error DaemonChannel::unexpected(std::uint64_t id, const wire::IpcMessage& reply) const {
  return Error(ErrorCode::malformed_message,
               "zringd at " + endpoint_ + " answered request " + std::to_string(id) +
                   " with an IPC message of kind " +
                   std::to_string(static_cast<int>(wire::kind_of(reply))));
}

Error DaemonChannel::silence(bool connecting) const {
  if (connecting)
    return Error(ErrorCode::connection_failed,
                 "connect: no answer from zringd at " + endpoint_ + " within " + ms(timeout_) +
                     "; is zringd running (systemctl status zringd)?");
  return Error(ErrorCode::timeout, "all_reduce: zringd at " + endpoint_ + " (node '" + node_ +
                                       "') went silent for " + ms(timeout_) +
                                       " during the op; it may have died or been stopped");
}

// The daemon's end of the socket closed: during the op, or before it
// and it did not come back.
Error DaemonChannel::closed(bool connecting, Waited waited) const {
  const std::string how = waited == Waited::closed_during
                              ? std::string(connecting ? "before it answered" : "during the op") +
                                    ": it died or was restarted"
                              : std::string(connecting ? "before the hello" : "before the op") +
                                    " and did not come back within " + ms(DaemonWatch::kComeBack) +
                                    ": it died or was stopped";
  if (connecting)
    return Error(ErrorCode::connection_failed,
                 "connect: zringd at " + endpoint_ + " closed the connection " + how +
                     "; is zringd running (systemctl status zringd)?");
  return Error(ErrorCode::peer_lost,
               "all_reduce: zringd at " + endpoint_ + " (node '" + node_ +
                   "') closed the connection " + how +
                   "; retry the step once it is back (systemctl status zringd)");
}

}  // namespace zring::client
