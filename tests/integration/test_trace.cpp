// zringctl trace against a real 2-node ring: after ops of two methods at
// two sizes (and one that fails on a manifest mismatch), the Chrome trace
// file it writes parses, names both nodes, and holds every op on both with
// its six phases in order, its method, size and result; the table holds a
// row per op.
#define BOOST_TEST_MODULE trace
#include <boost/test/unit_test.hpp>
#include <map>
#include <sstream>

#define BOOST_BIND_GLOBAL_PLACEHOLDERS  // property_tree still includes the old boost/bind.hpp
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include "proc/local_ring.hpp"

using namespace zring::proc;
using boost::property_tree::ptree;

namespace {

const std::vector<std::string> kPhases = {"assemble",  "queued", "prepare",
                                          "summaries", "data",   "finish"};

struct OpRun {
  std::string method;
  std::vector<std::size_t> elements;  // per node
  std::string result;                 // "ok" or the error kind
};

// One ring_client per node, `rounds` ops of one tensor; sizes[n] for node n.
// Returns each client's exit status.
std::vector<int> run_clients(LocalRing& ring, const std::string& method, int rounds,
                             const std::vector<std::size_t>& sizes, std::uint64_t seed) {
  std::vector<Process> clients;
  for (std::size_t n = 0; n < sizes.size(); ++n) {
    const std::string out = ring.dir() + "/client" + std::to_string(seed) + "-" + std::to_string(n);
    clients.push_back(
        Process::spawn({ZRING_RING_CLIENT_PATH, ring.ipc(n), "0", method, std::to_string(seed),
                        std::to_string(rounds), std::to_string(sizes[n]), out, "20000"},
                       out + ".log"));
  }
  std::vector<int> status;
  for (Process& c : clients) status.push_back(c.wait(std::chrono::seconds(120)).value_or(-1));
  return status;
}

// zringctl's exit status and what it printed.
std::pair<int, std::string> zringctl(const LocalRing& ring, const std::vector<std::string>& args) {
  std::vector<std::string> argv{ZRING_ZRINGCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = ring.dir() + "/zringctl.log";
  Process p = Process::spawn(argv, log);
  const int status = p.wait(std::chrono::seconds(60)).value_or(-1);
  return {status, read_file(log)};
}

// "1234.567" microseconds as nanoseconds, exactly (no floating point, so
// that phases that touch compare equal).
std::int64_t nanoseconds(const std::string& us) {
  const std::size_t dot = us.find('.');
  std::string fraction = dot == std::string::npos ? "" : us.substr(dot + 1);
  fraction.resize(3, '0');
  const std::int64_t whole = std::stoll(us.substr(0, dot));
  const std::int64_t part = std::stoll(fraction);
  return whole * 1000 + (us[0] == '-' ? -part : part);
}

struct Span {
  std::int64_t begin = 0, end = 0;
};

struct OpEvents {
  Span whole;  // on the ops track
  std::map<std::string, Span> phases;
  std::map<std::string, std::string> thread_of;  // phase -> its tid
  ptree args;                                    // of the op event
};

struct NodeEvents {
  std::string name;
  std::map<std::string, std::string> threads;  // tid -> thread name
  std::map<std::uint64_t, OpEvents> ops;       // by op number
};

// Every event of the file, by process (pid); checks ts and dur on the way.
std::map<std::string, NodeEvents> read_events(const ptree& trace) {
  std::map<std::string, NodeEvents> nodes;
  for (const auto& [key, e] : trace.get_child("traceEvents")) {
    NodeEvents& node = nodes[e.get<std::string>("pid")];
    const std::string ph = e.get<std::string>("ph");
    const std::string name = e.get<std::string>("name");
    if (ph == "M") {
      if (name == "process_name") node.name = e.get<std::string>("args.name");
      if (name == "thread_name")
        node.threads[e.get<std::string>("tid")] = e.get<std::string>("args.name");
      continue;
    }
    BOOST_TEST_REQUIRE(ph == "X");
    const std::int64_t ts = nanoseconds(e.get<std::string>("ts"));
    const std::int64_t dur = nanoseconds(e.get<std::string>("dur"));
    BOOST_TEST(ts >= 0, name << " at " << ts);
    BOOST_TEST(dur >= 0, name << " lasts " << dur);
    OpEvents& op = node.ops[std::stoull(e.get<std::string>("args.op"))];
    if (e.get<std::string>("cat") == "op") {
      op.whole = {ts, ts + dur};
      op.args = e.get_child("args");
    } else {
      BOOST_TEST(op.phases.count(name) == 0u, "a second " << name);
      op.phases[name] = {ts, ts + dur};
      op.thread_of[name] = e.get<std::string>("tid");
    }
  }
  return nodes;
}

void check_op(const NodeEvents& node, std::size_t n, const OpEvents& op, const OpRun& want) {
  BOOST_TEST(op.args.get<std::string>("method") == want.method);
  BOOST_TEST(std::stoull(op.args.get<std::string>("elements")) == want.elements.at(n));
  BOOST_TEST(std::stoull(op.args.get<std::string>("dense_bytes")) == want.elements.at(n) * 4);
  BOOST_TEST(op.args.get<std::string>("error") == want.result);
  if (want.result != "ok") {
    // Failed on the ring: its ring phases never ended, nor did it answer as a result.
    BOOST_TEST(op.phases.count("assemble") == 1u);
    BOOST_TEST(op.phases.count("queued") == 1u);
    BOOST_TEST(op.phases.count("data") == 0u);
    return;
  }
  BOOST_TEST(std::stoull(op.args.get<std::string>("wire_bytes")) > 0u);
  for (const std::string& phase : kPhases) {
    BOOST_TEST_REQUIRE(op.phases.count(phase) == 1u, "phase " << phase << " missing");
    const bool on_ring = phase == "prepare" || phase == "summaries" || phase == "data";
    BOOST_TEST(node.threads.at(op.thread_of.at(phase)) == (on_ring ? "ring" : "ipc"), phase);
  }
  BOOST_TEST(op.whole.begin <= op.phases.at("assemble").begin);
  for (std::size_t i = 1; i < kPhases.size(); ++i) {
    const Span& before = op.phases.at(kPhases[i - 1]);
    const Span& after = op.phases.at(kPhases[i]);
    BOOST_TEST(before.end <= after.begin,
               kPhases[i - 1] << " ends after " << kPhases[i] << " begins");
  }
  BOOST_TEST(op.phases.at("finish").end <= op.whole.end);
}

}  // namespace

BOOST_AUTO_TEST_CASE(zringctl_trace_writes_every_op_and_its_phases_for_perfetto) {
  LocalRingOptions options;
  options.zringd = ZRING_ZRINGD_PATH;
  options.nodes = 2;
  LocalRing ring(options);
  ring.start_all();
  ring.wait_up();

  constexpr int kRounds = 3;
  std::vector<OpRun> ran;
  std::uint64_t seed = 20;
  for (const char* method : {"none", "quant:8"})
    for (const std::size_t elements : {std::size_t{1000}, std::size_t{1} << 20}) {
      const std::vector<int> status =
          run_clients(ring, method, kRounds, {elements, elements}, ++seed);
      BOOST_TEST_REQUIRE((status == std::vector<int>{0, 0}), method << " of " << elements);
      for (int r = 0; r < kRounds; ++r) ran.push_back({method, {elements, elements}, "ok"});
    }
  // Node 1 submits other tensors: the op fails on both nodes, which record it too.
  const std::vector<int> mismatch = run_clients(ring, "none", 1, {10, 20}, ++seed);
  BOOST_TEST_REQUIRE((mismatch == std::vector<int>{3, 3}));
  ran.push_back({"none", {10, 20}, "manifest_mismatch"});

  const std::string file = ring.dir() + "/trace.json";
  const auto [status, out] = zringctl(
      ring, {"trace", "--endpoint", ring.ipc(0), "--endpoint", ring.ipc(1), "--out", file});
  BOOST_TEST_REQUIRE(status == 0, out);
  BOOST_TEST(out.find("wrote 26 ops of 2 nodes") != std::string::npos, out);

  ptree trace;
  std::istringstream in(read_file(file));
  BOOST_REQUIRE_NO_THROW(boost::property_tree::read_json(in, trace));
  BOOST_TEST(trace.get<std::string>("displayTimeUnit") == "ms");
  const std::map<std::string, NodeEvents> nodes = read_events(trace);
  BOOST_TEST_REQUIRE(nodes.size() == 2u);
  std::vector<std::uint64_t> op_numbers[2];
  for (const auto& [pid, node] : nodes) {
    BOOST_TEST_CONTEXT("node " << node.name) {
      const std::size_t n = node.name == "n0" ? 0 : 1;
      BOOST_TEST((node.name == "n" + std::to_string(n)));
      BOOST_TEST((node.threads ==
                  std::map<std::string, std::string>{{"1", "ops"}, {"2", "ipc"}, {"3", "ring"}}));
      BOOST_TEST_REQUIRE(node.ops.size() == ran.size());
      std::size_t i = 0;
      for (const auto& [number, op] : node.ops) {
        BOOST_TEST_CONTEXT("op " << number << " (#" << i << ")") { check_op(node, n, op, ran[i]); }
        op_numbers[n].push_back(number);
        ++i;
      }
    }
  }
  BOOST_TEST(op_numbers[0] == op_numbers[1], boost::test_tools::per_element());

  // Without --out, a table: a heading and a row per op.
  const auto [table_status, table] =
      zringctl(ring, {"trace", "--config", ring.config_path(), "--node", "n1"});
  BOOST_TEST_REQUIRE(table_status == 0, table);
  std::size_t rows = 0, quant = 0;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    rows += line.find(" n1 ") != std::string::npos;
    quant += line.find("quant:8") != std::string::npos;
  }
  BOOST_TEST(rows == ran.size(), table);
  BOOST_TEST(quant == 2u * kRounds, table);
  BOOST_TEST(table.find("manifest_mismatch") != std::string::npos, table);
}
