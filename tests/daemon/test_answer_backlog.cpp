// test_answer_backlog.cpp - answers to a client whose pipe is full wait,
// in order, within a bound, and go when the client does.
#define BOOST_TEST_MODULE zringd parts
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "answer_backlog.hpp"

using zring::daemon::AnswerBacklog;

namespace {

AnswerBacklog::Answer answer(std::uint8_t tag, std::size_t bytes = 1) {
  return {std::vector<std::uint8_t>(bytes, tag), std::nullopt};
}

// A socket stand-in: takes up to `room` answers per client, records them.
struct Socket {
  std::map<std::string, std::size_t> room;
  std::map<std::string, std::vector<std::uint8_t>> got;  // first byte of each answer
  std::set<std::string> gone;
  AnswerBacklog::Sent operator()(const std::string& client, AnswerBacklog::Answer& a) {
    if (gone.count(client)) return AnswerBacklog::Sent::gone;
    if (room[client] == 0) return AnswerBacklog::Sent::full;
    --room[client];
    got[client].push_back(a.header.at(0));
    return AnswerBacklog::Sent::yes;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(answer_backlog)

BOOST_AUTO_TEST_CASE(answers_go_out_in_order_as_the_client_makes_room) {
  AnswerBacklog backlog(1 << 20);
  for (std::uint8_t i = 1; i <= 5; ++i) BOOST_TEST(backlog.park("a", answer(i)));
  BOOST_TEST(backlog.park("b", answer(9)));
  BOOST_TEST(backlog.holds("a"));
  BOOST_TEST(backlog.answers() == 6u);
  Socket socket;
  socket.room["a"] = 2;
  socket.room["b"] = 5;
  BOOST_TEST(backlog.flush(std::ref(socket)) == 3u);
  BOOST_TEST(socket.got["a"] == (std::vector<std::uint8_t>{1, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(!backlog.holds("b"));
  BOOST_TEST(backlog.holds("a"));
  BOOST_TEST(backlog.flush(std::ref(socket)) == 0u);  // still full: nothing lost, nothing sent
  socket.room["a"] = 10;
  BOOST_TEST(backlog.flush(std::ref(socket)) == 3u);
  BOOST_TEST(socket.got["a"] == (std::vector<std::uint8_t>{1, 2, 3, 4, 5}),
             boost::test_tools::per_element());
  BOOST_TEST(backlog.empty());
}

BOOST_AUTO_TEST_CASE(a_client_that_is_gone_loses_its_answers_and_no_one_else_does) {
  AnswerBacklog backlog(1 << 20);
  BOOST_TEST(backlog.park("gone", answer(1)));
  BOOST_TEST(backlog.park("gone", answer(2)));
  BOOST_TEST(backlog.park("here", answer(3)));
  Socket socket;
  socket.gone.insert("gone");
  socket.room["here"] = 1;
  BOOST_TEST(backlog.flush(std::ref(socket)) == 1u);
  BOOST_TEST(!backlog.holds("gone"));
  BOOST_TEST(socket.got["here"] == (std::vector<std::uint8_t>{3}),
             boost::test_tools::per_element());
  BOOST_TEST(backlog.empty());
}

BOOST_AUTO_TEST_CASE(beyond_the_bound_answers_are_refused_but_one_always_fits) {
  AnswerBacklog backlog(100);
  BOOST_TEST(backlog.park("a", answer(1, 60)));
  BOOST_TEST(backlog.park("a", answer(2, 40)));   // exactly the bound
  BOOST_TEST(!backlog.park("a", answer(3, 1)));   // one byte over
  BOOST_TEST(backlog.park("b", answer(4, 500)));  // alone, even over the bound
  BOOST_TEST(!backlog.park("b", answer(5, 1)));
  BOOST_TEST(backlog.answers() == 3u);
  Socket socket;
  socket.room["a"] = 1;
  BOOST_TEST(backlog.flush(std::ref(socket)) == 1u);
  BOOST_TEST(backlog.park("a", answer(6, 60)));  // room again after one went
  BOOST_TEST(!backlog.park("a", answer(7, 1)));
}

BOOST_AUTO_TEST_SUITE_END()
