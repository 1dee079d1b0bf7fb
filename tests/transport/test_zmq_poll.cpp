// test_zmq_poll.cpp - transport::poll_items (zmq_calls.hpp): zmq::poll's
// contract in fewer system calls. Level-triggered for ZeroMQ sockets too
// (a message left unread is reported again without anything new), plain
// descriptors beside them, a wake-up by a message sent while it sleeps,
// a wait that looks without sleeping first, and a hung-up descriptor
// reported as an error.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <thread>
#include <zmq.hpp>

#include "transport/zmq_calls.hpp"

namespace {

using namespace std::chrono_literals;
using zring::transport::poll_items;

// A connected PUSH/PULL pair on inproc.
struct Pipe {
  zmq::context_t context{1};
  zmq::socket_t pull{context, zmq::socket_type::pull};
  zmq::socket_t push{context, zmq::socket_type::push};
  Pipe() {
    pull.bind("inproc://poll-test");
    push.connect("inproc://poll-test");
  }
  void send(const char* text) { push.send(zmq::buffer(std::string(text))); }
};

// A pipe(2) whose ends close with it.
struct Fds {
  int read = -1;
  int write = -1;
  Fds() {
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    read = fds[0];
    write = fds[1];
  }
  ~Fds() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(poll_items_suite)

BOOST_AUTO_TEST_CASE(a_message_left_unread_is_reported_again) {
  Pipe pipe;
  pipe.send("one");
  pipe.send("two");
  zmq::pollitem_t item{pipe.pull.handle(), 0, ZMQ_POLLIN, 0};
  BOOST_TEST(poll_items(&item, 1, 10s) == 1);
  BOOST_TEST(item.revents == ZMQ_POLLIN);
  zmq::message_t got;
  BOOST_TEST_REQUIRE(pipe.pull.recv(got, zmq::recv_flags::dontwait).has_value());
  BOOST_TEST(got.to_string() == "one");
  // Nothing new came: only ZMQ_EVENTS knows "two" is still there.
  BOOST_TEST(poll_items(&item, 1, 10s) == 1);
  BOOST_TEST(item.revents == ZMQ_POLLIN);
  BOOST_TEST_REQUIRE(pipe.pull.recv(got, zmq::recv_flags::dontwait).has_value());
  BOOST_TEST(got.to_string() == "two");
  BOOST_TEST(poll_items(&item, 1, 0ms) == 0);
  BOOST_TEST(item.revents == 0);
}

BOOST_AUTO_TEST_CASE(plain_descriptors_beside_a_socket_and_the_time_running_out) {
  Pipe pipe;
  Fds fds;
  zmq::pollitem_t items[] = {{pipe.pull.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, fds.read, ZMQ_POLLIN, 0},
                             {nullptr, fds.write, ZMQ_POLLOUT, 0}};
  // Only the write end is ready.
  BOOST_TEST(poll_items(items, 3, 10s) == 1);
  BOOST_TEST(items[0].revents == 0);
  BOOST_TEST(items[1].revents == 0);
  BOOST_TEST(items[2].revents == ZMQ_POLLOUT);
  // Nothing ready: it returns 0 once the time is up, not before.
  const auto began = std::chrono::steady_clock::now();
  BOOST_TEST(poll_items(items, 2, 30ms) == 0);
  BOOST_TEST((std::chrono::steady_clock::now() - began >= 30ms));
  BOOST_TEST(::write(fds.write, "x", 1) == 1);
  pipe.send("m");
  BOOST_TEST(poll_items(items, 2, 10s) == 2);
  BOOST_TEST(items[0].revents == ZMQ_POLLIN);
  BOOST_TEST(items[1].revents == ZMQ_POLLIN);
}

// Also with no end to the wait (a negative timeout, as zmq::poll takes it).
BOOST_AUTO_TEST_CASE(a_message_sent_while_it_sleeps_wakes_it) {
  for (const std::chrono::milliseconds timeout : {std::chrono::milliseconds(60s), -1ms}) {
    BOOST_TEST_CONTEXT("timeout " << timeout.count() << " ms") {
      Pipe pipe;
      zmq::pollitem_t item{pipe.pull.handle(), 0, ZMQ_POLLIN, 0};
      std::jthread sender([&] {
        std::this_thread::sleep_for(50ms);
        pipe.send("late");
      });
      const auto began = std::chrono::steady_clock::now();
      BOOST_TEST(poll_items(&item, 1, timeout) == 1);
      BOOST_TEST(item.revents == ZMQ_POLLIN);
      BOOST_TEST((std::chrono::steady_clock::now() - began < 30s));  // woken, not timed out
    }
  }
}

// The busy part of a wait (looking without sleeping) sees what comes in it,
// then sleeps for the rest; it never runs past the time given, and a wait of
// no time has no busy part.
BOOST_AUTO_TEST_CASE(a_busy_wait_sees_what_comes_then_sleeps_for_the_rest) {
  for (const auto& [busy, late] : {std::pair{std::chrono::microseconds(10s), 20ms},
                                   std::pair{std::chrono::microseconds(5ms), 100ms}}) {
    BOOST_TEST_CONTEXT("busy " << busy.count() << " us, sent after " << late.count() << " ms") {
      Pipe pipe;
      Fds fds;
      zmq::pollitem_t items[] = {{pipe.pull.handle(), 0, ZMQ_POLLIN, 0},
                                 {nullptr, fds.read, ZMQ_POLLIN, 0}};
      std::jthread sender([&] {
        std::this_thread::sleep_for(late);
        pipe.send("late");
        BOOST_TEST(::write(fds.write, "x", 1) == 1);
      });
      // The message and the byte may come in two looks.
      const auto began = std::chrono::steady_clock::now();
      do {
        BOOST_TEST_REQUIRE(poll_items(items, 2, 60s, busy) >= 1);
      } while (items[0].revents != ZMQ_POLLIN || items[1].revents != ZMQ_POLLIN);
      // Seen when it came, not once a busy part of 10 s was over.
      BOOST_TEST((std::chrono::steady_clock::now() - began < 5s));
    }
  }
  Pipe pipe;
  zmq::pollitem_t item{pipe.pull.handle(), 0, ZMQ_POLLIN, 0};
  BOOST_TEST(poll_items(&item, 1, 0ms, std::chrono::microseconds(10s)) == 0);
  const auto began = std::chrono::steady_clock::now();
  BOOST_TEST(poll_items(&item, 1, 30ms, std::chrono::microseconds(60s)) == 0);
  const auto took = std::chrono::steady_clock::now() - began;
  BOOST_TEST((took >= 30ms));
  BOOST_TEST((took < 30s));  // the time given, not the busy part's
  pipe.send("there");
  BOOST_TEST(poll_items(&item, 1, 10s, std::chrono::microseconds(10s)) == 1);
  BOOST_TEST(item.revents == ZMQ_POLLIN);
}

BOOST_AUTO_TEST_CASE(a_hung_up_descriptor_is_reported_as_an_error) {
  Fds fds;
  ::close(fds.write);
  fds.write = -1;
  zmq::pollitem_t item{nullptr, fds.read, ZMQ_POLLIN, 0};
  BOOST_TEST(poll_items(&item, 1, 10s) == 1);
  BOOST_TEST((item.revents & ZMQ_POLLERR) != 0);
}

BOOST_AUTO_TEST_SUITE_END()
