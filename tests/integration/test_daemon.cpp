// Real zringd processes on 127.0.0.1 and real client processes: every
// method's result on every rank against the reference average, identical
// bytes on every rank, odd sizes, empty and many-tensor ops, local ranks,
// and the manifest-mismatch error.
#define BOOST_TEST_MODULE daemon
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "proc/local_ring.hpp"
#include "support/reference.hpp"

using namespace zring;
using namespace zring::testing;
using namespace zring::proc;

namespace {

LocalRingOptions ring_options(std::size_t nodes, std::size_t local_ranks) {
  LocalRingOptions options;
  options.zringd = ZRING_ZRINGD_PATH;
  options.nodes = nodes;
  options.local_ranks = local_ranks;
  return options;
}

struct ClientRun {
  std::vector<std::string> output;  // per rank: result bytes of every round
  std::vector<std::string> error;   // per rank: "" or the error text
  std::vector<int> status;
};

std::string join(const std::vector<std::size_t>& sizes) {
  if (sizes.empty()) return "-";
  std::string s;
  for (std::size_t n : sizes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

// Runs one client per rank, all at once; `sizes_of(rank)` lets a test make one rank differ.
ClientRun run_clients(LocalRing& ring, const std::string& method, std::uint64_t seed, int rounds,
                      const std::function<std::vector<std::size_t>(std::size_t)>& sizes_of) {
  const std::size_t local = ring.options().local_ranks, world = ring.options().nodes * local;
  std::vector<Process> clients;
  std::vector<std::string> outs;
  for (std::size_t r = 0; r < world; ++r) {
    const std::string out = ring.dir() + "/rank" + std::to_string(r) + "-" + std::to_string(seed);
    outs.push_back(out);
    clients.push_back(Process::spawn(
        {std::string(ZRING_RING_CLIENT_PATH), ring.ipc(r / local), std::to_string(r % local),
         method, std::to_string(seed), std::to_string(rounds), join(sizes_of(r)), out, "20000"},
        out + ".log"));
  }
  ClientRun run;
  for (std::size_t r = 0; r < world; ++r) {
    const auto status = clients[r].wait(std::chrono::seconds(120));
    run.status.push_back(status.value_or(-1));
    run.output.push_back(read_file(outs[r]));
    run.error.push_back(
        read_file(outs[r] + ".err") + (status ? "" : "client hung") +
        (status.value_or(0) != 0 && status.value_or(0) != 3 ? read_file(outs[r] + ".log") : ""));
  }
  return run;
}

TensorMap round_result(const std::string& bytes, std::size_t round, const TensorMap& like) {
  std::size_t per_round = 0;
  for (const auto& [n, t] : like) per_round += t.numel() * sizeof(float);
  return tensors_from_bytes(bytes, round * per_round, like);
}

// Every rank succeeded with identical bytes, equal to the reference.
void check_run(const ClientRun& run, const std::string& method_text, std::uint64_t seed, int rounds,
               const std::vector<std::size_t>& sizes) {
  const std::size_t world = run.output.size();
  for (std::size_t r = 0; r < world; ++r) {
    BOOST_TEST_REQUIRE(run.status[r] == 0, method_text << ": rank " << r << ": " << run.error[r]);
    BOOST_TEST(run.output[r] == run.output[0], method_text << ": rank " << r << " got other bytes");
  }
  const CompressionMethod method = CompressionMethod::parse(method_text);
  std::vector<std::map<std::string, std::vector<float>>> residuals(world);
  for (int round = 0; round < rounds; ++round) {
    std::vector<TensorMap> inputs;
    for (std::size_t r = 0; r < world; ++r) inputs.push_back(make_gradients(seed, round, r, sizes));
    const TensorMap result = round_result(run.output[0], round, inputs[0]);
    if (method.kind() == CompressionKind::randomk) {
      if (!method.has_error_feedback() || round == 0) {
        const std::string problem = check_randomk(method, result, inputs);
        BOOST_TEST(problem.empty(), method_text << ": " << problem);
      }
      continue;
    }
    const Expected expected = expected_average(method, inputs, &residuals);
    const Comparison cmp = compare(result, expected);
    BOOST_TEST(cmp.ok(), method_text << " round " << round << ": " << cmp.bad << " bad, "
                                     << cmp.at_boundary << " at a boundary of " << cmp.elements
                                     << "; first: " << cmp.first_bad);
  }
}

const std::vector<std::string> kAllMethods = {
    "none",    "fp16",          "bf16",       "quant:8",    "quant:4", "sign",
    "topk:1%", "threshold:1.5", "randomk:5%", "ef:topk:1%", "ef:sign", "ef:quant:2"};

void every_method(std::size_t nodes, std::size_t local, const std::vector<std::size_t>& sizes) {
  LocalRing ring(ring_options(nodes, local));
  ring.start_all();
  ring.wait_up();
  std::uint64_t seed = 100;
  for (const std::string& method : kAllMethods) {
    const int rounds = method.rfind("ef:", 0) == 0 ? 3 : 1;
    const ClientRun run =
        run_clients(ring, method, ++seed, rounds, [&](std::size_t) { return sizes; });
    check_run(run, method, seed, rounds, sizes);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_nodes_every_method) { every_method(2, 1, {1, 7, 5000, 70001}); }

BOOST_AUTO_TEST_CASE(three_nodes_every_method) { every_method(3, 1, {1, 7, 12289}); }

BOOST_AUTO_TEST_CASE(four_nodes_every_method_with_a_million_and_three) {
  every_method(4, 1, {1, 7, 1000003});
}

BOOST_AUTO_TEST_CASE(two_local_ranks_per_node) { every_method(2, 2, {3, 4097, 999}); }

// An affine op of 2 Mi values or more is staged in waves, the client's
// statistics of each block beside the values and each wave's sent as soon
// as it is in (collective::staging_order): every form of the op, six
// rounds, gives the reference.
BOOST_AUTO_TEST_CASE(three_nodes_quant_and_sign_in_waves) {
  LocalRing ring(ring_options(3, 1));
  ring.start_all();
  ring.wait_up();
  const std::vector<std::size_t> sizes{5, 1100003, 1048580};
  std::uint64_t seed = 60;
  for (const char* method : {"quant:8", "sign"}) {
    const ClientRun run = run_clients(ring, method, ++seed, 6, [&](std::size_t) { return sizes; });
    check_run(run, method, seed, 6, sizes);
  }
}

namespace {

// The CPUs a thread may run on, as /proc says ("0", "0-1", ...).
std::string cpus_allowed(const std::string& status_path) {
  std::istringstream status(read_file(status_path));
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return line.substr(line.find_last_of(" \t") + 1);
  return "?";
}

}  // namespace

// The demo's placement: node n's zringd, every thread of it, on the n-th of
// this process's CPUs; the ring then works as anywhere else.
BOOST_AUTO_TEST_CASE(spread_cpus_keeps_every_thread_of_a_node_on_its_cpu) {
  const std::vector<unsigned> cpus = allowed_cpus();
  BOOST_TEST_REQUIRE(!cpus.empty());
  LocalRingOptions options = ring_options(3, 1);
  options.spread_cpus = true;
  LocalRing ring(options);
  ring.start_all();
  ring.wait_up();
  const std::vector<std::size_t> sizes{5, 70001};
  check_run(run_clients(ring, "quant:8", 7, 1, [&](std::size_t) { return sizes; }), "quant:8", 7, 1,
            sizes);
  for (std::size_t n = 0; n < 3; ++n) {
    const std::string expected = std::to_string(cpus[n % cpus.size()]);
    const std::string tasks = "/proc/" + std::to_string(ring.daemon(n).pid()) + "/task";
    std::size_t threads = 0;
    for (const auto& task : std::filesystem::directory_iterator(tasks)) {
      ++threads;
      const std::string got = cpus_allowed(task.path().string() + "/status");
      BOOST_TEST(got == expected, "node " << n << " thread " << task.path().filename().string()
                                          << " may run on CPUs " << got << ", not " << expected);
    }
    BOOST_TEST(threads >= 3u,
               "node " << n << " has " << threads << " threads");  // io, ring, ZeroMQ's
  }
}

BOOST_AUTO_TEST_CASE(empty_map_and_200_small_tensors) {
  LocalRing ring(ring_options(3, 1));
  ring.start_all();
  ring.wait_up();
  const ClientRun empty =
      run_clients(ring, "quant:8", 7, 2, [](std::size_t) { return std::vector<std::size_t>{}; });
  for (std::size_t r = 0; r < 3; ++r) {
    BOOST_TEST(empty.status[r] == 0, empty.error[r]);
    BOOST_TEST(empty.output[r].empty());
  }
  std::vector<std::size_t> many;
  for (std::size_t t = 0; t < 200; ++t) many.push_back(1 + (t * 37) % 300);
  for (const char* method : {"none", "quant:8", "ef:topk:10%"}) {
    const ClientRun run = run_clients(ring, method, 8, 2, [&](std::size_t) { return many; });
    check_run(run, method, 8, 2, many);
  }
}

// Seven rounds go through all six forms (ring_client), SharedTensors twice:
// SharedTensors without a copy throughout, while each op of a TensorMap or
// views of over 256 KiB between them is staged through the rank's other
// shared buffer; the same bits every time.
BOOST_AUTO_TEST_CASE(shared_tensors_keep_their_buffer_beside_the_other_forms) {
  LocalRing ring(ring_options(3, 1));
  ring.start_all();
  ring.wait_up();
  const std::vector<std::size_t> sizes = {1, 7, 70001};
  for (const char* method : {"none", "quant:8", "ef:topk:10%"}) {
    // Seed 14: forms 2, 3, 4, 5, 0, 1, 2.
    const ClientRun run = run_clients(ring, method, 14, 7, [&](std::size_t) { return sizes; });
    check_run(run, method, 14, 7, sizes);
  }
}

// Signals landing in a client while it waits for zringd (a SIGALRM every
// 300 us, its handler without SA_RESTART) change nothing: every op of every
// path gives the reference's bits. A poll that a signal ended used to escape
// the API as zmq::error_t (EINTR).
BOOST_AUTO_TEST_CASE(signals_landing_in_a_client_mid_op_change_nothing) {
  LocalRing ring(ring_options(2, 1));
  ring.start_all();
  ring.wait_up();
  const std::vector<std::size_t> sizes = {5, 70001, 300000};  // values frame and staged
  struct Alarms {  // the clients inherit it; gone again however the test ends
    Alarms() { ::setenv("ZRING_CLIENT_ALARM_US", "300", 1); }
    ~Alarms() { ::unsetenv("ZRING_CLIENT_ALARM_US"); }
  } alarms;
  std::uint64_t seed = 40;
  for (const char* method : {"none", "quant:8"}) {
    const ClientRun run = run_clients(ring, method, ++seed, 12, [&](std::size_t) { return sizes; });
    check_run(run, method, seed, 12, sizes);
  }
}

// A Tensor whose data() was resized after it was made: refused with the
// tensor's name before anything is copied (it used to abort inside libzmq
// at 8 values, and overrun the buffer at 100,000).
BOOST_AUTO_TEST_CASE(a_resized_tensor_is_refused_naming_it) {
  LocalRing ring(ring_options(1, 1));
  ring.start_all();
  ring.wait_up();
  for (const char* values : {"8", "3", "100000"}) {
    const std::string out = ring.dir() + "/resized-" + values;
    Process client = Process::spawn(
        {std::string(ZRING_RING_CLIENT_PATH), "--resized", ring.ipc(0), values}, out);
    const auto status = client.wait(std::chrono::seconds(60));
    const std::string text = read_file(out);
    BOOST_TEST(status.value_or(-1) == 0, values << " values: " << text);
    for (const char* form :
         {"all_reduce: error invalid_argument tensor 'w': its shape holds 4 elements but it has ",
          "all_reduce_in_place: error invalid_argument tensor 'w': its shape holds 4 elements but "
          "it has "})
      BOOST_TEST(text.find(std::string(form) + values + " values") != std::string::npos, text);
  }
}

BOOST_AUTO_TEST_CASE(manifest_mismatch_fails_every_rank_naming_tensor_and_ranks) {
  LocalRing ring(ring_options(3, 1));
  ring.start_all();
  ring.wait_up();
  const ClientRun run = run_clients(ring, "none", 9, 1, [](std::size_t rank) {
    return rank == 2 ? std::vector<std::size_t>{10, 21} : std::vector<std::size_t>{10, 20};
  });
  for (std::size_t r = 0; r < 3; ++r) {
    BOOST_TEST(run.status[r] == 3);
    BOOST_TEST(run.error[r].find("manifest_mismatch") != std::string::npos, run.error[r]);
    BOOST_TEST(run.error[r].find("'t001'") != std::string::npos, run.error[r]);
    BOOST_TEST(run.error[r].find("rank 2") != std::string::npos, run.error[r]);
  }
  // The ring is still usable afterwards.
  const ClientRun ok = run_clients(ring, "none", 10, 1, [](std::size_t) {
    return std::vector<std::size_t>{10, 20};
  });
  check_run(ok, "none", 10, 1, {10, 20});
}

BOOST_AUTO_TEST_CASE(local_ranks_that_disagree_are_named) {
  LocalRing ring(ring_options(2, 2));
  ring.start_all();
  ring.wait_up();
  const ClientRun run = run_clients(ring, "fp16", 11, 1, [](std::size_t rank) {
    return rank == 1 ? std::vector<std::size_t>{5} : std::vector<std::size_t>{6};
  });
  for (std::size_t r = 0; r < 4; ++r) {
    BOOST_TEST(run.status[r] == 3);
    BOOST_TEST(run.error[r].find("manifest_mismatch") != std::string::npos, run.error[r]);
    BOOST_TEST(run.error[r].find("rank 1") != std::string::npos, run.error[r]);
  }
}

// A process alone on its node rings its repeated ops on zringd's bell; when
// another process takes its rank (its hello alone), zringd forgets them: the
// old process's next op (the same request, rung on the bell) is refused as
// from a process that no longer holds the rank, before and after the new
// one's ops, which give the reference's bits.
BOOST_AUTO_TEST_CASE(a_rank_taken_by_another_process_refuses_the_old_ones_rung_ops) {
  LocalRing ring(ring_options(1, 1));
  ring.start_all();
  ring.wait_up();
  const auto talker = [&](const std::string& tag) {
    Process p = Process::spawn_talking(
        {ZRING_RING_CLIENT_PATH, "--talk", ring.ipc(0), "0", "none", "31", "5,700", "20000"},
        ring.dir() + "/" + tag + ".err");
    const auto ready = p.read_line(std::chrono::seconds(20));
    BOOST_TEST_REQUIRE(ready.value_or("") == "ready 0");
    return p;
  };
  const auto ask = [](Process& p, const std::string& line) {
    p.send_line(line);
    return p.read_line(std::chrono::seconds(30)).value_or("no answer");
  };
  const std::string f = ring.dir() + "/taken-";
  Process old_one = talker("old");
  for (int round = 0; round < 3; ++round)  // the first armed, the others rung
    BOOST_TEST_REQUIRE(ask(old_one, "round " + std::to_string(round) + " " + f + "old") == "ok");
  Process new_one = talker("new");  // its hello takes the rank; it has run nothing yet
  BOOST_TEST(ask(old_one, "round 3 " + f + "old") ==
             "error invalid_argument local rank 0 is held by another process");
  for (int round = 0; round < 3; ++round) {
    const std::string file = f + "new" + std::to_string(round);
    BOOST_TEST_REQUIRE(ask(new_one, "round " + std::to_string(round) + " " + file) == "ok");
    std::string own;  // a ring of one: the average is the rank's own values
    for (const auto& [name, t] : make_gradients(31, round, 0, {5, 700}))
      own.append(reinterpret_cast<const char*>(t.data().data()), t.numel() * sizeof(float));
    BOOST_TEST((read_file(file) == own), "round " << round);
  }
  BOOST_TEST(ask(old_one, "round 4 " + f + "old") ==
             "error invalid_argument local rank 0 is held by another process");
  old_one.send_line("quit");
  new_one.send_line("quit");
}
