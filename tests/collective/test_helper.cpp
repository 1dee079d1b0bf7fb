// The helper thread an op compresses on (workspace.hpp): its task's
// result, its errors, and the call that wakes the ring thread once the
// task is done.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <stdexcept>
#include <string>

#include "collective/workspace.hpp"

using zring::collective::Helper;

BOOST_AUTO_TEST_SUITE(helper)

// The finished call sees done() already true, and wait() returns only
// after it: what it touches may go away once wait() has returned.
BOOST_AUTO_TEST_CASE(finished_runs_after_done_and_before_wait_returns) {
  Helper helper;
  int value = 0;
  bool done_when_finished = false;
  std::atomic<bool> finished{false};
  helper.start([&] { value = 42; },
               [&] {
                 done_when_finished = helper.done();
                 finished = true;
               });
  helper.wait();
  BOOST_TEST(finished.load());
  BOOST_TEST(done_when_finished);
  BOOST_TEST(value == 42);
}

// A task that throws still calls finished (the ring thread must learn of
// it), and wait() rethrows what the task threw.
BOOST_AUTO_TEST_CASE(finished_runs_when_the_task_throws) {
  Helper helper;
  std::atomic<bool> finished{false};
  helper.start([] { throw std::runtime_error("prepare failed"); }, [&] { finished = true; });
  std::string what;
  try {
    helper.wait();
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  BOOST_TEST(what == "prepare failed");
  BOOST_TEST(finished.load());
  // The next task has no finished call of its own: the last one is not kept.
  finished = false;
  helper.start([] {});
  helper.wait();
  BOOST_TEST(!finished.load());
}

BOOST_AUTO_TEST_SUITE_END()
