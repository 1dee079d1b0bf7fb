// zring-demo - the main job: a ring of zringd daemons on loopback and a
// small model trained by several worker processes through them, once per
// compression method, showing what compression buys.
//
//   zring-demo [--nodes 4] [--steps 300] [--methods none,fp16,...] [--zringd PATH]
//              [--zringd-cpus spread|any]   (spread: node n's zringd on the n-th CPU it may use)
//   zring-demo --worker ENDPOINT METHOD STEPS OUT      (one training process)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zring/zring.hpp>

#include "mlp.hpp"
#include "proc/local_ring.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kBatch = 32;
constexpr float kLearningRate = 0.1f;
constexpr std::uint64_t kTaskSeed = 2026, kInitSeed = 7;

// --- one worker --------------------------------------------------------------------

int worker(const std::string& endpoint, const std::string& method, int steps,
           const std::string& out_path) {
  auto ar = zring::CompressedAllReduce::connect(endpoint, zring::CompressionMethod::parse(method));
  const ring_demo::Task task(kTaskSeed);
  ring_demo::Mlp model(kInitSeed);  // every worker starts from the same weights
  std::mt19937_64 rng(1000 + ar.rank());
  const ring_demo::Batch test = [&] {
    std::mt19937_64 test_rng(99);
    return task.sample(test_rng, 2000);
  }();
  double reduce_seconds = 0;
  for (int s = 0; s < steps; ++s) {
    const zring::TensorMap grads = model.gradients(task.sample(rng, kBatch));
    const auto t0 = Clock::now();
    const zring::TensorMap averaged = ar.all_reduce(grads);
    reduce_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    model.step(averaged, kLearningRate);
  }
  const ring_demo::Metrics m = model.evaluate(test);
  const auto traffic = ar.traffic();
  std::ofstream(out_path) << ar.rank() << " " << m.loss << " " << m.accuracy << " "
                          << traffic.wire_bytes / std::max<std::uint64_t>(traffic.ops, 1) << " "
                          << traffic.dense_bytes / std::max<std::uint64_t>(traffic.ops, 1) << " "
                          << reduce_seconds / steps * 1e3 << " " << model.checksum() << "\n";
  return 0;
}

// --- the launcher ------------------------------------------------------------------

volatile sig_atomic_t g_interrupted = 0;

struct Row {
  std::string method;
  double loss = 0, accuracy = 0, wire = 0, dense = 0, ms = 0;
  bool same_weights = true;
  std::string error;
};

Row run_method(zring::proc::LocalRing& ring, const std::string& self, const std::string& method,
               int steps) {
  Row row;
  row.method = method;
  std::vector<zring::proc::Process> workers;
  const std::size_t nodes = ring.options().nodes;
  for (std::size_t n = 0; n < nodes; ++n) {
    const std::string out = ring.dir() + "/worker" + std::to_string(n) + ".out";
    std::remove(out.c_str());
    workers.push_back(zring::proc::Process::spawn(
        {self, "--worker", ring.ipc(n), method, std::to_string(steps), out},
        ring.dir() + "/worker" + std::to_string(n) + ".log"));
  }
  std::uint64_t checksum = 0;
  for (std::size_t n = 0; n < nodes; ++n) {
    std::optional<int> status;
    while (!(status = workers[n].wait(std::chrono::milliseconds(100)))) {
      if (g_interrupted) return row;
    }
    const std::string out = ring.dir() + "/worker" + std::to_string(n) + ".out";
    std::ifstream in(out);
    std::size_t rank;
    double loss, acc, wire, dense, ms;
    std::uint64_t sum;
    if (*status != 0 || !(in >> rank >> loss >> acc >> wire >> dense >> ms >> sum)) {
      row.error = "worker " + std::to_string(n) + " failed: " +
                  zring::proc::read_file(ring.dir() + "/worker" + std::to_string(n) + ".log");
      return row;
    }
    if (n == 0) checksum = sum;
    row.same_weights = row.same_weights && sum == checksum;
    row.loss += loss / nodes, row.accuracy += acc / nodes, row.wire += wire / nodes;
    row.dense += dense / nodes, row.ms += ms / nodes;
  }
  return row;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');) out.push_back(item);
  return out;
}

std::string self_path(const char* argv0) {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : argv0;
}

int launcher(int argc, char** argv) {
  std::size_t nodes = 4;
  int steps = 300;
  std::string methods = "none,fp16,quant:8,quant:4,ef:topk:1%,topk:1%,ef:sign,sign,randomk:10%";
  std::string zringd = std::string(ZRING_DEMO_ZRINGD);
  bool spread_cpus = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--nodes")
      nodes = std::stoul(argv[i + 1]);
    else if (key == "--steps")
      steps = std::stoi(argv[i + 1]);
    else if (key == "--methods")
      methods = argv[i + 1];
    else if (key == "--zringd")
      zringd = argv[i + 1];
    else if (key == "--zringd-cpus") {
      const std::string where = argv[i + 1];
      if (where != "spread" && where != "any") {
        std::cerr << "zring-demo: --zringd-cpus takes spread or any, not '" << where << "'\n";
        return 2;
      }
      spread_cpus = where == "spread";
    } else {
      std::cerr << "zring-demo: unknown option " << key << "\n";
      return 2;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  zring::proc::LocalRingOptions options;
  options.zringd = zringd;
  options.nodes = nodes;
  options.log_level = "info";
  options.spread_cpus = spread_cpus;
  zring::proc::LocalRing ring(options);  // stops every daemon when it goes out of scope
  std::cout << "zring demo: " << nodes << " zringd on 127.0.0.1 (ports " << ring.port(0) << "..; "
            << (spread_cpus ? "node n's on the n-th CPU the demo may use, all its threads"
                            : "on any CPU")
            << "), " << nodes << " workers training a " << ring_demo::Mlp(0).parameters()
            << "-parameter MLP for " << steps << " steps per method\n";
  ring.start_all();
  ring.wait_up();
  std::printf("\n%-14s %9s %9s %14s %12s %9s %12s\n", "method", "test loss", "accuracy",
              "bytes/step", "vs float32", "ms/step", "same weights");
  std::fflush(stdout);
  for (const std::string& method : split(methods)) {
    if (g_interrupted) break;
    const Row r = run_method(ring, self_path(argv[0]), method, steps);
    if (g_interrupted) break;
    if (!r.error.empty()) {
      std::printf("%-14s failed: %s\n", method.c_str(), r.error.c_str());
      return 1;
    }
    // What a dense float32 ring would have sent per node: 2 (N - 1) / N of the gradient.
    const double dense_ring =
        r.dense * 2.0 * static_cast<double>(nodes - 1) / static_cast<double>(nodes);
    std::printf("%-14s %9.4f %8.2f%% %14.0f %11.1fx %9.2f %12s\n", method.c_str(), r.loss,
                100 * r.accuracy, r.wire, dense_ring / std::max(r.wire, 1.0), r.ms,
                r.same_weights ? "yes" : "NO");
    std::fflush(stdout);
  }
  if (g_interrupted) {
    std::cout << "\ninterrupted: stopping the daemons and workers\n";
    return 130;
  }
  std::cout << "\nbytes/step: what each node put on the ring per all-reduce; vs float32: how many "
               "times less than a dense float32 ring (2(N-1)/N of the gradient per node);\n"
               "ms/step: time in all_reduce; same weights: every worker ended with bit-identical "
               "weights.\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::strcmp(argv[1], "--worker") == 0) {
      if (argc != 6) return 2;
      return worker(argv[2], argv[3], std::stoi(argv[4]), argv[5]);
    }
    return launcher(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "zring-demo: " << e.what() << "\n";
    return 1;
  }
}
