// test_request_socket.cpp - clients' requests on zringd's plain Unix stream
// socket (daemon/request_socket.hpp): handed on in order as the ROUTER
// would, with their values, and the routing id echoed and the answers
// back on the client's own connection; a connection that does not start with a routing id, sends a
// bad frame, or is one too many is closed and counted.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "request_socket.hpp"
#include "wire/tcp_frames.hpp"

using zring::daemon::RequestSocket;
using Bytes = std::vector<std::uint8_t>;

namespace {

// What the handler saw: the frames of each request, as strings.
struct Seen {
  std::vector<std::vector<std::string>> requests;
};

struct Server {
  boost::asio::io_context io;
  std::string path = (std::filesystem::temp_directory_path() /
                      ("zring-req-" + std::to_string(::getpid()) + ".sock"))
                         .string();
  Seen seen;
  std::vector<std::string> undelivered;  // the headers of answers that went nowhere
  RequestSocket socket{
      io, 1 << 20, 2,
      [this](std::vector<zmq::message_t>& frames) {
        std::vector<std::string> r;
        for (const auto& f : frames) r.push_back(f.to_string());
        seen.requests.push_back(std::move(r));
      },
      [this](const std::string&, std::vector<std::uint8_t> header, std::optional<zmq::message_t>) {
        undelivered.emplace_back(header.begin(), header.end());
      }};
  Server() { socket.start(path); }
  // Runs the io_context until `done` or a few seconds passed.
  template <class Done>
  bool run_until(Done done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < give_up)
      io.run_for(std::chrono::milliseconds(10));
    return done();
  }
};

int connect_to(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

Bytes frame(const std::string& header, std::optional<std::string> payload = std::nullopt) {
  const auto prefix = zring::wire::encode_tcp_prefix(header.size(), payload.has_value(),
                                                     payload ? payload->size() : 0);
  Bytes b(prefix.begin(), prefix.end());
  b.insert(b.end(), header.begin(), header.end());
  if (payload) b.insert(b.end(), payload->begin(), payload->end());
  return b;
}

void write_all(int fd, const Bytes& bytes) {
  BOOST_REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
}

// Whether the server closed the connection (a read sees its end).
bool closed_by_server(Server& server, int fd) {
  return server.run_until([&] {
    char c;
    return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(request_socket)

BOOST_AUTO_TEST_CASE(requests_are_handed_on_in_order_with_the_routing_id_and_values) {
  Server server;
  const int fd = connect_to(server.path);
  Bytes stream = frame("id-1");
  for (const Bytes& b : {frame("first"), frame("second", std::string("values")), frame("third")})
    stream.insert(stream.end(), b.begin(), b.end());
  // Byte by byte, as a slow writer would.
  for (const std::uint8_t byte : stream) write_all(fd, Bytes{byte});
  BOOST_TEST_REQUIRE(server.run_until([&] { return server.seen.requests.size() == 3; }));
  using R = std::vector<std::string>;
  BOOST_TEST((server.seen.requests[0] == R{"id-1", "first"}));
  BOOST_TEST((server.seen.requests[1] == R{"id-1", "second", "values"}));
  BOOST_TEST((server.seen.requests[2] == R{"id-1", "third"}));
  BOOST_TEST(server.socket.refused() == 0u);
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(what_is_not_a_client_is_closed_and_counted) {
  Server server;
  const int no_id = connect_to(server.path);
  write_all(no_id, frame("id", std::string("a payload")));
  BOOST_TEST(closed_by_server(server, no_id));
  BOOST_TEST(server.socket.refused() == 1u);
  BOOST_TEST(server.socket.last_refusal() ==
             "request socket: the first frame is not a ZeroMQ routing id");

  const int garbage = connect_to(server.path);
  write_all(garbage, frame("id"));
  write_all(garbage, Bytes(zring::wire::kTcpPrefixBytes, 0));  // a header of 0 bytes
  BOOST_TEST(closed_by_server(server, garbage));
  BOOST_TEST(server.socket.refused() == 2u);
  BOOST_TEST(server.socket.last_refusal() ==
             "request socket: a frame with a header of 0 bytes (1 .. 1048576)");
  BOOST_TEST(server.seen.requests.empty());

  // Two connections at most here: a third is closed at once.
  const int a = connect_to(server.path), b = connect_to(server.path), c = connect_to(server.path);
  BOOST_TEST(closed_by_server(server, c));
  BOOST_TEST(server.socket.refused() == 3u);
  BOOST_TEST(server.socket.last_refusal() == "more connections than local ranks and tools make");
  for (const int fd : {no_id, garbage, a, b, c}) ::close(fd);
}

BOOST_AUTO_TEST_CASE(answers_go_back_on_the_connection_of_their_client) {
  Server server;
  const int fd = connect_to(server.path);
  write_all(fd, frame("id-7"));
  write_all(fd, frame("hello"));
  BOOST_TEST_REQUIRE(server.run_until([&] { return server.seen.requests.size() == 1; }));
  std::optional<zmq::message_t> values = zmq::message_t(std::string("the values"));
  BOOST_TEST((server.socket.send("id-7", Bytes{'a', 'n'}, values) == RequestSocket::Sent::queued));
  BOOST_TEST(!values.has_value());  // taken
  std::optional<zmq::message_t> none;
  BOOST_TEST((server.socket.send("id-7", Bytes{'k'}, none) == RequestSocket::Sent::queued));
  std::optional<zmq::message_t> kept = zmq::message_t(std::string("x"));
  BOOST_TEST((server.socket.send("id-8", Bytes{'z'}, kept) == RequestSocket::Sent::no_connection));
  BOOST_TEST(kept.has_value());  // left for the ROUTER
  // The routing id echoed (the connection was taken), then both answers,
  // in order, in the request socket's frames.
  zring::wire::TcpFrameReader reader(1 << 20);
  std::vector<zring::wire::TcpFrame> got;
  BOOST_TEST_REQUIRE(server.run_until([&] {
    const auto [at, room] = reader.room();
    const ssize_t n = ::recv(fd, at, room, MSG_DONTWAIT);
    if (n > 0) reader.filled(static_cast<std::size_t>(n));
    while (auto f = reader.next()) got.push_back(std::move(*f));
    return got.size() == 3;
  }));
  BOOST_TEST(std::string(got[0].header.begin(), got[0].header.end()) == "id-7");
  BOOST_TEST(!got[0].has_payload);
  BOOST_TEST(std::string(got[1].header.begin(), got[1].header.end()) == "an");
  BOOST_TEST(got[1].has_payload);
  BOOST_TEST(std::string(got[1].payload.get(), got[1].payload.get() + got[1].payload_bytes) ==
             "the values");
  BOOST_TEST(std::string(got[2].header.begin(), got[2].header.end()) == "k");
  BOOST_TEST(!got[2].has_payload);
  ::close(fd);
}

// A client that closed its connection (it went on on the DEALER): every
// answer queued for it comes back undelivered, for the ROUTER to carry,
// and once zringd has seen the end none is queued there any more.
BOOST_AUTO_TEST_CASE(answers_to_a_closed_connection_go_another_way_none_lost) {
  Server server;
  const int fd = connect_to(server.path);
  write_all(fd, frame("id-9"));
  write_all(fd, frame("request"));
  BOOST_TEST_REQUIRE(server.run_until([&] { return server.seen.requests.size() == 1; }));
  ::close(fd);
  std::size_t queued = 0;
  BOOST_TEST(server.run_until([&] {
    std::optional<zmq::message_t> values = zmq::message_t(std::string(1000, 'v'));
    const auto sent = server.socket.send("id-9", Bytes{'a'}, values);
    if (sent == RequestSocket::Sent::queued) ++queued;
    return sent == RequestSocket::Sent::no_connection;
  }));
  // Every answer, and not the echo of the routing id, which was for this connection only.
  BOOST_TEST(server.run_until([&] { return server.undelivered.size() == queued; }));
  for (const std::string& header : server.undelivered) BOOST_TEST(header == "a");
}

BOOST_AUTO_TEST_CASE(stop_removes_the_socket_file) {
  Server server;
  BOOST_TEST(std::filesystem::exists(server.path));
  server.socket.stop();
  BOOST_TEST(!std::filesystem::exists(server.path));
}

BOOST_AUTO_TEST_SUITE_END()
