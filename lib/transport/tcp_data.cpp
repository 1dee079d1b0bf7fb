#include "transport/tcp_data.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <zring/error.hpp>

namespace zring::transport {
namespace {

// A connection that failed is tried again this much later.
constexpr std::chrono::milliseconds kRetry{1000};
// A connect that takes longer is given up (a host cut off answers no SYN:
// the kernel would retry for minutes) and tried again.
constexpr std::chrono::milliseconds kConnectTimeout{2000};
// Messages a connection holds before the ring may read them; it is not
// read further until they go.
constexpr std::size_t kMaxHeld = 1024;
// Incoming connections at once: two per peer (one closing, one new) and a few more.
constexpr std::size_t kSpareIncoming = 8;
// Frames written with one sendmsg.
constexpr std::size_t kMaxIov = 64;
// What hold(false) writes to each peer before writing the rest to any.
constexpr std::size_t kFirstWrite = 64 * 1024;
// A read of fewer bytes than this and than there was room for emptied the socket.
constexpr std::size_t kSmallRead = 16 * 1024;

// The first address of host (a literal, or a name looked up: this blocks).
bool resolve(const std::string& host, bool numeric, sockaddr_storage& storage, socklen_t& length) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = numeric ? AI_NUMERICHOST : 0;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "0", &hints, &found) != 0 || !found) return false;
  std::memcpy(&storage, found->ai_addr, found->ai_addrlen);
  length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return true;
}

void set_port(sockaddr_storage& storage, std::uint16_t port) {
  if (storage.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  else
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
}

int stream_socket(int family) {
  return ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

void no_delay(int fd) {
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small frames go at once
}

// What the connection sent and the peer did not acknowledge for `timeout`
// (a cut link, a host gone) ends it (ETIMEDOUT), so that the ring goes
// back to ZeroMQ and connects anew a second later. Kept, such a connection
// would carry data again only at the kernel's next retransmission, which
// backs off while the link is down: tens of seconds after a long cut.
void give_up_unacknowledged(int fd, std::chrono::milliseconds timeout) {
  const unsigned int ms = static_cast<unsigned int>(
      std::clamp<std::int64_t>(timeout.count(), 1, std::numeric_limits<int>::max()));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
}

// Names the congestion control of a socket this node sends on; false (and
// errno) when the kernel refuses it.
bool set_congestion(int fd, const std::string& name) {
  return name.empty() || ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                                      static_cast<socklen_t>(name.size())) == 0;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

TcpData::TcpData(TcpDataOptions options)
    : options_(std::move(options)),
      out_(listed()),
      addresses_(listed()),
      peer_port_(listed(), 0),
      retry_at_(listed()),
      route_tcp_(listed(), false),
      switched_in_(listed()),
      next_nonce_((static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                  std::random_device{}()) {
  Address here;
  const std::string where = "the TCP data port on " + options_.bind_host + ": ";
  if (!resolve(options_.bind_host, true, here.storage, here.length))
    throw Error(ErrorCode::connection_failed, where + "not a numeric address");
  listen_fd_ = stream_socket(here.storage.ss_family);
  if (listen_fd_ < 0 ||
      ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&here.storage), here.length) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    const std::string why = std::strerror(errno);
    close_fd(listen_fd_);
    throw Error(ErrorCode::connection_failed, where + why);
  }
  // Asked of the listening socket first, so that a name the kernel does not
  // have, or does not let this user choose, is refused at start.
  if (!set_congestion(listen_fd_, options_.congestion)) {
    const std::string why = std::strerror(errno);
    close_fd(listen_fd_);
    throw Error(ErrorCode::config_invalid,
                "tcp_congestion: the kernel refuses '" + options_.congestion + "' (" + why +
                    "; net.ipv4.tcp_allowed_congestion_control lists what it allows)");
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  (void)::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  // Host names are looked up here, at start-up, not on the ring thread's way.
  for (std::size_t p = 0; p < listed(); ++p) {
    Address& a = addresses_[p];
    if (p != options_.self && !resolve(options_.hosts[p], true, a.storage, a.length) &&
        !resolve(options_.hosts[p], false, a.storage, a.length))
      a.length = 0;  // this peer's messages stay on ZeroMQ
  }
}

TcpData::~TcpData() {
  close_fd(listen_fd_);
  for (Outgoing& o : out_) close_fd(o.fd);
  for (auto& in : in_) close_fd(in->fd);
}

// --- sending ----------------------------------------------------------------------

bool TcpData::via_tcp(std::size_t peer) const noexcept {
  return peer < listed() && route_tcp_[peer];
}

std::size_t TcpData::queued(std::size_t peer) const noexcept {
  return peer < listed() ? out_[peer].queue.size() : 0;
}

bool TcpData::last_has_payload(std::size_t peer) const noexcept {
  return queued(peer) != 0 && out_[peer].queue.back().has_payload;
}

void TcpData::send(std::size_t peer, const std::vector<std::uint8_t>& header,
                   std::optional<collective::Bytes> payload) {
  if (!via_tcp(peer)) return;
  Queued q;
  q.has_payload = payload.has_value();
  if (payload) q.payload = std::move(*payload);
  const auto prefix = wire::encode_tcp_prefix(header.size(), q.has_payload, q.payload.size());
  q.head.reserve(prefix.size() + header.size());
  q.head.insert(q.head.end(), prefix.begin(), prefix.end());
  q.head.insert(q.head.end(), header.begin(), header.end());
  out_[peer].queue.push_back(std::move(q));
  if (!held_) flush(peer, Clock::now());
}

void TcpData::hold(bool on) {
  held_ = on;
  if (on) return;
  // Every peer's first messages (its summary) before any peer's bulk.
  const Deadline now = Clock::now();
  for (const std::size_t budget : {kFirstWrite, std::numeric_limits<std::size_t>::max()})
    for (std::size_t peer = 0; peer < listed(); ++peer)
      if (!out_[peer].queue.empty()) flush(peer, now, budget);
}

void TcpData::drop_unstarted_payloads() {
  for (Outgoing& o : out_) {
    std::deque<Queued> kept;
    for (Queued& q : o.queue)
      if (!q.has_payload || q.written != 0) kept.push_back(std::move(q));
    o.queue = std::move(kept);
  }
}

// Writes what the connection takes now, several messages a call.
void TcpData::flush(std::size_t peer, Deadline now, std::size_t budget) {
  Outgoing& o = out_[peer];
  std::size_t flushed = 0;
  while (o.fd >= 0 && o.connected && !o.queue.empty() && flushed < budget) {
    iovec iov[kMaxIov];
    std::size_t n = 0;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < o.queue.size() && n + 2 <= kMaxIov && flushed + bytes < budget;
         ++i) {
      const Queued& q = o.queue[i];
      // A piece, cut to what the budget leaves (the rest goes in a later write).
      const auto add = [&](const std::uint8_t* at, std::size_t size) {
        if (flushed + bytes >= budget) return;
        size = std::min(size, budget - flushed - bytes);
        iov[n++] = {const_cast<std::uint8_t*>(at), size};
        bytes += size;
      };
      std::size_t skip = q.written;
      if (skip < q.head.size()) {
        add(q.head.data() + skip, q.head.size() - skip);
        skip = 0;
      } else {
        skip -= q.head.size();
      }
      if (q.payload.size() > skip) add(q.payload.data() + skip, q.payload.size() - skip);
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    const ssize_t sent = ::sendmsg(o.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // the poll says when it takes more
      fail(peer, now);
      return;
    }
    counters_.bytes_sent += static_cast<std::uint64_t>(sent);
    flushed += static_cast<std::size_t>(sent);
    for (std::size_t left = static_cast<std::size_t>(sent); left != 0;) {
      Queued& q = o.queue.front();
      const std::size_t take = std::min(left, q.size() - q.written);
      q.written += take;
      left -= take;
      if (q.written == q.size()) {
        o.queue.pop_front();
        ++counters_.frames_sent;
      }
    }
  }
}

// --- connecting ---------------------------------------------------------------------

void TcpData::heard_port(std::size_t peer, std::uint32_t port, Deadline now) {
  if (peer >= listed() || peer == options_.self || port == peer_port_[peer]) return;
  if (out_[peer].fd >= 0) fail(peer, now);  // the peer restarted: its old port is gone
  peer_port_[peer] = port;
  retry_at_[peer].reset();
  if (port != 0) connect(peer, now);
}

void TcpData::connect(std::size_t peer, Deadline now) {
  Outgoing& o = out_[peer];
  Address there = addresses_[peer];
  if (there.length == 0) return;  // its host did not resolve: ZeroMQ only
  set_port(there.storage, static_cast<std::uint16_t>(peer_port_[peer]));
  o.fd = stream_socket(there.storage.ss_family);
  if (o.fd < 0) {
    retry_at_[peer] = now + kRetry;
    return;
  }
  no_delay(o.fd);
  give_up_unacknowledged(o.fd, options_.timeout);
  (void)set_congestion(o.fd, options_.congestion);  // the listening socket took it
  o.connected = false;
  o.since = now;
  o.nonce = ++next_nonce_;
  o.queue.clear();
  const int rc = ::connect(o.fd, reinterpret_cast<const sockaddr*>(&there.storage), there.length);
  if (rc != 0 && errno != EINPROGRESS) {
    close_fd(o.fd);
    retry_at_[peer] = now + kRetry;
    return;
  }
  // The hello goes first, whenever the connection is up.
  Queued hello;
  const auto bytes =
      wire::encode_tcp_hello({static_cast<std::uint32_t>(options_.self), o.nonce, options_.ring});
  hello.head.assign(bytes.begin(), bytes.end());
  o.queue.push_back(std::move(hello));
  if (rc == 0) connected(peer);
}

// The connection is up: everything from here on goes on it, behind the
// marker on ZeroMQ that tells the peer so.
void TcpData::connected(std::size_t peer) {
  Outgoing& o = out_[peer];
  o.connected = true;
  route_tcp_[peer] = true;
  switches_.push_back({peer, true, o.nonce});
  ++counters_.switches;
  flush(peer, Clock::now());
}

// The connection broke: back to ZeroMQ, behind the marker that says so,
// and a new connection a moment later.
void TcpData::fail(std::size_t peer, Deadline now) {
  Outgoing& o = out_[peer];
  close_fd(o.fd);
  o.connected = false;
  o.queue.clear();
  if (route_tcp_[peer]) {
    route_tcp_[peer] = false;
    switches_.push_back({peer, false, 0});
  }
  retry_at_[peer] = now + kRetry;
}

std::vector<TcpSwitch> TcpData::take_switches() { return std::exchange(switches_, {}); }

void TcpData::repeat_marker(std::size_t peer) {
  if (via_tcp(peer)) switches_.push_back({peer, true, out_[peer].nonce});
}

// --- receiving ----------------------------------------------------------------------

bool TcpData::from_zmq(std::size_t peer, wire::RingKind kind, std::uint64_t nonce) {
  if (peer >= listed() || peer == options_.self) return true;
  if (kind == wire::RingKind::data_via_tcp) {
    if (switched_in_[peer] && *switched_in_[peer] != nonce) close_used(peer);  // it reconnected
    switched_in_[peer] = nonce;
    return false;
  }
  if (kind == wire::RingKind::data_via_zmq) {
    if (switched_in_[peer]) close_used(peer);
    return false;
  }
  // Anything else is read as it comes: from a peer that restarted (it does
  // not know the old connection), or forged (dropped by the ring's checks,
  // as before; it must not end the peer's connection).
  return true;
}

// The connection the peer sends on ends, with what it still held.
void TcpData::close_used(std::size_t peer) {
  for (auto& in : in_)
    if (in->hello && in->hello->sender == peer && in->hello->nonce == switched_in_[peer]) drop(*in);
  switched_in_[peer].reset();
  sweep(Clock::now());
}

void TcpData::drop(Incoming& in) {
  close_fd(in.fd);
  in.held.clear();
}

bool TcpData::readable_now(const Incoming& in) const noexcept {
  return in.hello && switched_in_[in.hello->sender] == in.hello->nonce;
}

bool TcpData::has_arrival() const noexcept {
  return std::any_of(in_.begin(), in_.end(),
                     [&](const auto& in) { return !in->held.empty() && readable_now(*in); });
}

std::optional<TcpArrival> TcpData::take_arrival() {
  for (auto& in : in_) {
    if (in->held.empty() || !readable_now(*in)) continue;
    TcpArrival a = std::move(in->held.front());
    in->held.pop_front();
    ++counters_.frames_received;
    return a;
  }
  return std::nullopt;
}

void TcpData::accept_all(Deadline now) {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or nothing to do about it here
    if (in_.size() >= 2 * listed() + kSpareIncoming) {
      ::close(fd);
      ++counters_.refused;
      counters_.last_refusal = "more connections than the ring's nodes can make";
      continue;
    }
    auto in = std::make_unique<Incoming>();
    in->fd = fd;
    in->since = now;
    in_.push_back(std::move(in));
  }
}

void TcpData::refuse(Incoming& in, const std::string& why) {
  ++counters_.refused;
  counters_.last_refusal = why;
  drop(in);
}

void TcpData::read_hello(Incoming& in) {
  const ssize_t got = ::recv(in.fd, in.hello_bytes.data() + in.hello_have,
                             in.hello_bytes.size() - in.hello_have, MSG_DONTWAIT);
  if (got <= 0) {
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    close_fd(in.fd);
    in.ended = Clock::now();
    return;
  }
  in.hello_have += static_cast<std::size_t>(got);
  counters_.bytes_received += static_cast<std::uint64_t>(got);
  if (in.hello_have < in.hello_bytes.size()) return;
  wire::TcpHello hello;
  try {
    hello = wire::decode_tcp_hello(in.hello_bytes.data(), in.hello_bytes.size());
  } catch (const Error& e) {
    refuse(in, e.what());
    return;
  }
  if (hello.ring != options_.ring)
    return refuse(in, "tcp data connection: a hello from another ring file's node");
  if (hello.sender >= listed() || hello.sender == options_.self)
    return refuse(in, "tcp data connection: a hello from node #" + std::to_string(hello.sender) +
                          ", which is not another node of the ring file");
  in.hello = hello;
  in.reader = std::make_unique<wire::TcpFrameReader>(options_.max_message_bytes);
}

// Reads what is there, as long as the connection may hold more.
void TcpData::read(Incoming& in) {
  if (!in.hello) {
    read_hello(in);
    if (!in.hello || in.fd < 0) return;
  }
  while (in.fd >= 0 && in.held.size() < kMaxHeld) {
    const auto [at, room] = in.reader->room();
    const ssize_t got = ::recv(in.fd, at, room, MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) {  // the end: what was read whole stays readable in order
      close_fd(in.fd);
      in.ended = Clock::now();
      return;
    }
    counters_.bytes_received += static_cast<std::uint64_t>(got);
    in.reader->filled(static_cast<std::size_t>(got));
    try {
      while (std::optional<wire::TcpFrame> frame = in.reader->next()) {
        TcpArrival a;
        a.peer = in.hello->sender;
        a.header = std::move(frame->header);
        a.has_payload = frame->has_payload;
        if (frame->payload) {
          const std::uint8_t* bytes = frame->payload.get();
          a.payload = collective::Bytes(bytes, frame->payload_bytes, std::move(frame->payload));
        }
        in.held.push_back(std::move(a));
      }
    } catch (const Error& e) {
      refuse(in, std::string("tcp data connection: ") + e.what());
      return;
    }
    // A few small messages, less than there was room for: the socket is
    // empty now (the next poll says when more comes), and a recv to learn
    // it would be one system call more per wake-up. A stream of chunks is
    // read on while the sender keeps writing.
    if (static_cast<std::size_t>(got) < std::min(room, kSmallRead)) return;
  }
}

// Connections that are over and hold nothing more go, and so does one that
// ended a timeout ago without its marker (its sender is gone); one whose
// hello did not come within the timeout is closed.
void TcpData::sweep(Deadline now) {
  for (auto& in : in_)
    if (!in->hello && in->fd >= 0 && now - in->since > options_.timeout)
      refuse(*in, "tcp data connection: no hello within timeout_ms");
  in_.erase(std::remove_if(in_.begin(), in_.end(),
                           [&](const auto& in) {
                             if (in->fd >= 0) return false;
                             return in->held.empty() || !in->hello ||
                                    (!readable_now(*in) && in->ended &&
                                     now - *in->ended > options_.timeout);
                           }),
            in_.end());
}

// --- polling ------------------------------------------------------------------------

void TcpData::add_poll_items(std::vector<zmq::pollitem_t>& items) {
  polled_.clear();
  items.push_back({nullptr, listen_fd_, ZMQ_POLLIN, 0});
  polled_.emplace_back(Role::listen, 0);
  for (std::size_t p = 0; p < listed(); ++p) {
    const Outgoing& o = out_[p];
    if (o.fd < 0) continue;
    // POLLIN: the peer closed or reset it (it sends nothing on it).
    const short events =
        static_cast<short>(ZMQ_POLLIN | (!o.connected || !o.queue.empty() ? ZMQ_POLLOUT : 0));
    items.push_back({nullptr, o.fd, events, 0});
    polled_.emplace_back(Role::outgoing, p);
  }
  for (std::size_t i = 0; i < in_.size(); ++i) {
    if (in_[i]->fd < 0 || in_[i]->held.size() >= kMaxHeld) continue;
    items.push_back({nullptr, in_[i]->fd, ZMQ_POLLIN, 0});
    polled_.emplace_back(Role::incoming, i);
  }
}

void TcpData::after_poll(const zmq::pollitem_t* items, Deadline now) {
  const std::size_t incoming = in_.size();  // accept_all may add to in_
  for (std::size_t k = 0; k < polled_.size(); ++k) {
    const short revents = items[k].revents;
    if (revents == 0) continue;
    const auto [role, i] = polled_[k];
    if (role == Role::listen) {
      accept_all(now);
    } else if (role == Role::outgoing) {
      Outgoing& o = out_[i];
      if (o.fd < 0) continue;
      if (!o.connected && (revents & (ZMQ_POLLOUT | ZMQ_POLLERR))) {
        int error = 0;
        socklen_t length = sizeof error;
        (void)::getsockopt(o.fd, SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          fail(i, now);
          continue;
        }
        connected(i);
      }
      if (revents & (ZMQ_POLLIN | ZMQ_POLLERR)) {
        std::uint8_t byte;
        const ssize_t got = ::recv(o.fd, &byte, 1, MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          fail(i, now);
          continue;
        }
      }
      if (revents & ZMQ_POLLOUT) flush(i, now);
    } else if (i < incoming) {
      read(*in_[i]);
    }
  }
  for (std::size_t p = 0; p < listed(); ++p) {
    if (out_[p].fd >= 0 && !out_[p].connected && now - out_[p].since > kConnectTimeout)
      fail(p, now);
    if (retry_at_[p] && now >= *retry_at_[p] && out_[p].fd < 0 && peer_port_[p] != 0) {
      retry_at_[p].reset();
      connect(p, now);
    }
  }
  sweep(now);
}

TcpData::Deadline TcpData::next_timer() const noexcept {
  Deadline next = Deadline::max();
  for (std::size_t p = 0; p < listed(); ++p) {
    if (retry_at_[p] && out_[p].fd < 0) next = std::min(next, *retry_at_[p]);
    if (out_[p].fd >= 0 && !out_[p].connected)
      next = std::min(next, out_[p].since + kConnectTimeout);
  }
  for (const auto& in : in_)
    if (!in->hello && in->fd >= 0) next = std::min(next, in->since + options_.timeout);
  return next;
}

}  // namespace zring::transport
