// zringd's log: one line per event, with the level, the node and (for ops)
// the op; the level from the YAML file or --log-level; journald priorities
// only when stderr really is the journal.
#include <sys/stat.h>

#include <boost/test/unit_test.hpp>
#include <regex>

#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;

BOOST_AUTO_TEST_SUITE(logging)

BOOST_AUTO_TEST_CASE(every_line_is_one_event_with_level_and_node_and_ops_name_the_op) {
  proc::LocalRing ring(ring_options(2, 1000));
  Daemons daemons(ring);
  daemons.start(0);
  daemons.start(1);
  daemons.wait_up();
  Client a = start_client(ring, 0, "quant:8", 2, 5000, 1);
  Client b = start_client(ring, 1, "quant:8", 2, 5000, 1);
  BOOST_REQUIRE(a.process.wait(30s).value_or(-1) == 0);
  BOOST_REQUIRE(b.process.wait(30s).value_or(-1) == 0);
  // An op that fails: only n0's rank submits, n1's never does.
  Client lonely = start_client(ring, 0, "none", 1, 100, 2);
  BOOST_REQUIRE(lonely.process.wait(30s).value_or(-1) == 3);
  BOOST_REQUIRE(eventually([&] { return contains(daemons.log(0), "failed"); }, 5s));

  const std::regex line("zringd\\[n0\\] (error|warn|notice|info|debug): [^\\s].*");
  const auto all = lines(daemons.log(0));
  BOOST_TEST(all.size() >= 4u);
  for (const std::string& l : all)
    BOOST_TEST(std::regex_match(l, line), "not one event per line: '" << l << "'");
  BOOST_TEST(std::regex_search(daemons.log(0), std::regex("debug: op [0-9]+ done: quant:8")),
             daemons.log(0));
  BOOST_TEST(std::regex_search(daemons.log(0), std::regex("warn: op [0-9]+ failed: ")),
             daemons.log(0));
  // Where its messages to the other node go (tcp_data, on by default).
  BOOST_TEST(contains(daemons.log(0),
                      "info: ring messages to node 'n1' go on a TCP connection to its data port"),
             daemons.log(0));
}

BOOST_AUTO_TEST_CASE(level_from_the_file_and_from_the_command_line) {
  // The file says warn: none of the info lines of a start.
  proc::LocalRing quiet(ring_options(1, 2000, "warn"));
  Daemons q(quiet);
  q.start(0);
  q.wait_up();
  BOOST_TEST(!contains(q.log(0), "info:"), q.log(0));
  // The same file with --log-level debug: info and debug lines.
  proc::LocalRing loud(ring_options(1, 2000, "warn"));
  Daemons l(loud);
  l.start(0, {"--log-level", "debug"});
  l.wait_up();
  Client c = start_client(loud, 0, "fp16", 1, 100, 1);
  BOOST_REQUIRE(c.process.wait(30s).value_or(-1) == 0);
  BOOST_TEST(contains(l.log(0), "info: listening on"), l.log(0));
  BOOST_TEST(eventually([&] { return contains(l.log(0), "debug: op 0 done"); }, 5s), l.log(0));
  // A level that does not exist is a usage error (exit 2), before anything starts.
  const Run bad = run(
      {ZRING_ZRINGD_PATH, "--config", loud.config_path(), "--node", "n0", "--log-level", "loud"},
      loud.dir());
  BOOST_TEST(bad.status == 2, bad.out);
  BOOST_TEST(contains(bad.out, "log level 'loud' is not one of error, warn, info, debug"), bad.out);
}

// systemd passes JOURNAL_STREAM=DEVICE:INODE of the journal stream it gave
// as stderr; only then do lines carry <N> priorities.
BOOST_AUTO_TEST_CASE(journald_priorities_only_when_stderr_is_the_journal) {
  proc::LocalRing ring(ring_options(1, 2000, "info"));
  Daemons daemons(ring);
  proc::write_file(daemons.log_path(0), "");  // so its device and inode are known
  struct stat info {};
  BOOST_REQUIRE(::stat(daemons.log_path(0).c_str(), &info) == 0);
  const std::string same =
      "JOURNAL_STREAM=" + std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino);
  daemons.start(0, {}, {same});
  daemons.wait_up();
  BOOST_TEST(contains(daemons.log(0), "<6>zringd[n0] info: listening on"), daemons.log(0));
  for (const std::string& l : lines(daemons.log(0)))
    BOOST_TEST(std::regex_match(l, std::regex("<[3-7]>zringd\\[n0\\] .*")), l);

  // Inherited from a parent, but stderr is a file: plain lines.
  daemons.process(0).kill();
  ::unlink(daemons.log_path(0).c_str());
  daemons.start(0, {}, {"JOURNAL_STREAM=1:1"});
  daemons.wait_up();
  BOOST_TEST(contains(daemons.log(0), "zringd[n0] info: listening on"), daemons.log(0));
  BOOST_TEST(!contains(daemons.log(0), "<6>"), daemons.log(0));
}

BOOST_AUTO_TEST_SUITE_END()
