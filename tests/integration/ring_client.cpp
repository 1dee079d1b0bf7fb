// ring_client - a training process stand-in for the integration tests.
//
//   ring_client ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT [TIMEOUT_MS]
//
// Connects to its zringd, and for each round all-reduces the gradients
// make_gradients(SEED, round, rank, SIZES) (SIZES: comma separated, "-" for
// none) and appends the result's floats to OUT (tensors in name order).
// Round r takes form (r + SEED) % 6 of the op: all_reduce, all_reduce_in_place
// of a TensorMap, all_reduce_in_place of SharedTensors (made once, then
// reused), of TensorViews, all_reduce of a map given up (std::move),
// whose result must be that map's own memory (exit 5 otherwise), or
// all_reduce out of place into views of other memory, which must leave its
// inputs as they were (an error "changed: ..." otherwise); all must give
// the same bits. The SharedTensors must
// report zero_copy() throughout: the ops of the other forms, staged or not, go through a shared
// buffer of their own (exit 4 otherwise). On an error it writes "ERROR <kind>: <message>" to
// OUT.err and exits 3.
//
//   ring_client --talk ENDPOINT LOCAL_RANK METHOD SEED SIZES [TIMEOUT_MS [RETRIES]]
//
// Stays connected and takes commands on stdin, one per line: "round N FILE"
// all-reduces round N's gradients, writes the result to FILE and answers
// "ok" or "error <kind> <message>" on stdout; "shared N FILE" does the same
// through SharedTensors (made at the first, then kept); "dump 0 FILE" writes
// what those SharedTensors hold now and answers "ok zero_copy=0|1";
// "broadcast N FILE ROOT FORM" broadcasts round N's gradients from ROOT,
// with odd bits in them (a NaN with a payload naming the rank, -0.0, a
// denormal), writing what it sent to FILE.in and what it got to FILE,
// through a TensorMap (FORM "map"), TensorViews ("views") or a TensorMap
// of the first tensor alone ("small"); "world" answers "world W rank R"
// (the ring of the last op); "inplace N FILE" is "round" through
// all_reduce_in_place of a TensorMap, and also checks that a failed op left
// the values as they were (else "error KIND changed: ..."); "outof N FILE"
// is "round" through all_reduce(inputs, outputs) of TensorViews, and checks
// that the inputs stay as they were, whether the op fails or not; "changes"
// answers "changes C", how many ops met a change of the ring and ran again
// (RETRIES: ConnectOptions::ring_change_retries); "quit" ends it. The test that
// drives it decides when the ranks move on, as a training loop would.
//
// With ZRING_CLIENT_ALARM_US=N in its environment, a SIGALRM (handler
// without SA_RESTART, as a profiler's or a training loop's watchdog) lands
// every N microseconds while it reduces; it prints how many did.
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <zring/zring.hpp>

#include "support/reference.hpp"

namespace {

std::atomic<std::uint64_t> alarms{0};

void count_alarm(int) { alarms.fetch_add(1, std::memory_order_relaxed); }

void start_alarms() {
  const char* every = std::getenv("ZRING_CLIENT_ALARM_US");
  if (!every) return;
  struct sigaction action {};
  action.sa_handler = count_alarm;
  action.sa_flags = 0;  // no SA_RESTART: a wait the signal lands in ends with EINTR
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGALRM, &action, nullptr);
  const long us = std::stol(every);
  itimerval timer{{us / 1000000, us % 1000000}, {us / 1000000, us % 1000000}};
  ::setitimer(ITIMER_REAL, &timer, nullptr);
}

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> sizes;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');)
    if (item != "-") sizes.push_back(std::stoull(item));
  return sizes;
}

bool same_bits(const zring::TensorMap& a, const zring::TensorMap& b) {
  for (const auto& [name, t] : a) {
    const auto& other = b.at(name).data();
    if (std::memcmp(t.data().data(), other.data(), t.numel() * sizeof(float)) != 0) return false;
  }
  return true;
}

// all_reduce(inputs, outputs) of views of a copy of grads into views of a
// map of -7s (a value it leaves unwritten shows); zring::Error "changed:
// ..." when the inputs are not as they were afterwards, whether the op went
// through or failed.
zring::TensorMap reduce_out_of_place(zring::CompressedAllReduce& ar,
                                     const zring::TensorMap& grads) {
  zring::TensorMap inputs = grads;
  zring::TensorMap result = grads;
  for (auto& [name, t] : result) std::fill(t.data().begin(), t.data().end(), -7.0f);
  zring::TensorViews in, outs;
  for (auto& [name, t] : inputs) in.push_back({name, t.shape(), t.data().data()});
  for (auto& [name, t] : result) outs.push_back({name, t.shape(), t.data().data()});
  try {
    ar.all_reduce(in, outs);
  } catch (const zring::Error& e) {
    if (!same_bits(inputs, grads))
      throw zring::Error(e.code(), std::string("changed: ") + e.what());
    throw;
  }
  if (!same_bits(inputs, grads))
    throw zring::Error(zring::ErrorCode::internal,
                       "changed: all_reduce out of place wrote its inputs");
  return result;
}

void write_result(const zring::TensorMap& result, std::ostream& out) {
  for (const auto& [name, t] : result)
    out.write(reinterpret_cast<const char*>(t.data().data()),
              static_cast<std::streamsize>(t.numel() * sizeof(float)));
}

// Round `round`'s gradients with bit patterns arithmetic would not keep.
zring::TensorMap odd_bits(zring::TensorMap grads, std::size_t rank) {
  for (auto& [name, t] : grads) {
    std::vector<float>& v = t.data();
    const std::uint32_t nan_bits = 0x7fc00000u | static_cast<std::uint32_t>(0x100 + rank);
    if (v.size() > 0) std::memcpy(&v[0], &nan_bits, sizeof(float));
    if (v.size() > 1) v[1] = -0.0f;
    if (v.size() > 2)
      v[2] = std::numeric_limits<float>::denorm_min() * static_cast<float>(rank + 1);
  }
  return grads;
}

// "broadcast N FILE ROOT FORM": see the top of the file.
void broadcast(zring::CompressedAllReduce& ar, zring::TensorMap grads, const std::string& file,
               std::size_t root, const std::string& form) {
  if (form == "small") grads = zring::TensorMap{*grads.begin()};
  {
    std::ofstream in(file + ".in", std::ios::binary);
    write_result(grads, in);
  }
  if (form == "views") {
    zring::TensorViews views;
    for (auto& [name, t] : grads) views.push_back({name, t.shape(), t.data().data()});
    ar.broadcast(views, root);
  } else if (form == "map" || form == "small") {
    ar.broadcast(grads, root);
  } else {
    throw zring::Error(zring::ErrorCode::invalid_argument, "no broadcast form '" + form + "'");
  }
  std::ofstream out(file, std::ios::binary);
  write_result(grads, out);
}

int talk(int argc, char** argv) {
  zring::ConnectOptions options;
  options.local_rank = std::stoul(argv[3]);
  if (argc > 7) options.timeout = std::chrono::milliseconds(std::stol(argv[7]));
  if (argc > 8) options.ring_change_retries = std::stoul(argv[8]);
  std::size_t changes = 0;
  options.on_ring_change = [&changes](const zring::Error& e) {
    ++changes;
    std::cerr << "ring_client: running the op again: " << e.what() << std::endl;
  };
  const std::uint64_t seed = std::stoull(argv[5]);
  const auto sizes = parse_sizes(argv[6]);
  auto ar = zring::CompressedAllReduce::connect(argv[2], zring::CompressionMethod::parse(argv[4]),
                                                options);
  std::cout << "ready " << ar.rank() << std::endl;
  // Gradients are drawn from the rank in the ring file's full ring: a
  // smaller ring renumbers the ranks (world_size() and rank() follow it).
  const std::size_t listed_rank = ar.rank();
  std::optional<zring::SharedTensors> shared;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream command(line);
    std::string verb, file;
    std::uint64_t round = 0;
    command >> verb >> round >> file;
    if (verb == "quit") return 0;
    if (verb == "world") {
      std::cout << "world " << ar.world_size() << " rank " << ar.rank() << std::endl;
      continue;
    }
    if (verb == "changes") {
      std::cout << "changes " << changes << std::endl;
      continue;
    }
    try {
      if (verb == "dump") {
        if (!shared) throw zring::Error(zring::ErrorCode::invalid_argument, "no SharedTensors yet");
        std::ofstream out(file, std::ios::binary);
        write_result(shared->to_tensors(), out);
        std::cout << "ok zero_copy=" << shared->zero_copy() << std::endl;
        continue;
      }
      const auto grads = zring::testing::make_gradients(seed, round, listed_rank, sizes);
      if (verb == "broadcast") {
        std::size_t root = 0;
        std::string form;
        command >> root >> form;
        broadcast(ar, odd_bits(grads, listed_rank), file, root, form);
        std::cout << "ok" << std::endl;
        continue;
      }
      zring::TensorMap result;
      if (verb == "shared") {
        if (!shared) {
          zring::TensorShapes shapes;
          for (const auto& [name, t] : grads) shapes.emplace(name, t.shape());
          shared = ar.make_shared_tensors(shapes);
        }
        shared->assign(grads);
        ar.all_reduce_in_place(*shared);
        result = shared->to_tensors();
      } else if (verb == "inplace") {
        result = grads;
        try {
          ar.all_reduce_in_place(result);
        } catch (const zring::Error& e) {
          if (!same_bits(result, grads))
            throw zring::Error(e.code(), std::string("changed: ") + e.what());
          throw;
        }
      } else if (verb == "outof") {
        result = reduce_out_of_place(ar, grads);
      } else {
        result = ar.all_reduce(grads);
      }
      std::ofstream out(file, std::ios::binary);
      write_result(result, out);
      std::cout << "ok" << std::endl;
    } catch (const zring::Error& e) {
      std::cout << "error " << zring::to_string(e.code()) << " " << e.what() << std::endl;
    }
  }
  return 0;
}

}  // namespace

// ring_client --resized ENDPOINT VALUES: a tensor of shape {4} whose data()
// was resized to VALUES, through each connected form; prints each error.
int resized(const std::string& endpoint, std::size_t values) {
  auto ar = zring::CompressedAllReduce::connect(endpoint, zring::CompressionMethod::parse("none"));
  zring::TensorMap grads;
  grads.emplace("w", zring::Tensor(std::vector<float>(4, 1.0f), {4}));
  grads.at("w").data().resize(values, 1.0f);
  int refused = 0;
  auto attempt = [&](const char* form, const auto& call) {
    try {
      call();
      std::cout << form << ": no error\n";
    } catch (const zring::Error& e) {
      std::cout << form << ": error " << zring::to_string(e.code()) << " " << e.what() << "\n";
      refused += e.code() == zring::ErrorCode::invalid_argument;
    }
  };
  attempt("all_reduce", [&] { (void)ar.all_reduce(grads); });
  attempt("all_reduce_in_place", [&] { ar.all_reduce_in_place(grads); });
  return refused == 2 ? 0 : 5;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--resized")
    return resized(argv[2], std::stoul(argv[3]));
  if (argc >= 7 && std::string(argv[1]) == "--talk") {
    try {
      return talk(argc, argv);
    } catch (const zring::Error& e) {
      std::cout << "error " << zring::to_string(e.code()) << " " << e.what() << std::endl;
      return 3;
    }
  }
  if (argc < 8) {
    std::cerr
        << "usage: ring_client ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT [TIMEOUT_MS]\n";
    return 2;
  }
  const std::string endpoint = argv[1], out_path = argv[7];
  const std::vector<std::size_t> sizes = parse_sizes(argv[6]);
  start_alarms();
  try {
    zring::ConnectOptions options;
    options.local_rank = std::stoul(argv[2]);
    if (argc > 8) options.timeout = std::chrono::milliseconds(std::stol(argv[8]));
    auto ar = zring::CompressedAllReduce::connect(
        endpoint, zring::CompressionMethod::parse(argv[3]), options);
    std::ofstream out(out_path, std::ios::binary);
    const std::uint64_t seed = std::stoull(argv[4]);
    std::optional<zring::SharedTensors> shared;
    bool expect_zero_copy = false;
    for (std::uint64_t round = 0; round < std::stoull(argv[5]); ++round) {
      const zring::TensorMap grads = zring::testing::make_gradients(seed, round, ar.rank(), sizes);
      std::size_t bytes = 0;
      for (const auto& [name, t] : grads) bytes += t.numel() * sizeof(float);
      zring::TensorMap result;
      switch ((round + seed) % 6) {
        case 0:
          result = ar.all_reduce(grads);
          break;
        case 1:
          result = grads;
          ar.all_reduce_in_place(result);
          break;
        case 3: {
          result = grads;  // the caller's own memory, in place
          zring::TensorViews views;
          for (auto& [name, t] : result) views.push_back({name, t.shape(), t.data().data()});
          ar.all_reduce_in_place(views);
          break;
        }
        case 4: {
          zring::TensorMap given = grads;
          std::vector<const float*> where;
          for (const auto& [name, t] : given) where.push_back(t.data().data());
          result = ar.all_reduce(std::move(given));
          std::size_t i = 0;
          for (const auto& [name, t] : result) {
            if (t.data().data() != where[i++]) {
              std::cerr << "round " << round << ": the averages of " << name
                        << " are not in the memory of the map given up\n";
              return 5;
            }
          }
          break;
        }
        case 5:  // out of place: the inputs only read, the averages into outputs of their own
          result = reduce_out_of_place(ar, grads);
          break;
        default:
          if (!shared) {
            zring::TensorShapes shapes;
            for (const auto& [name, t] : grads) shapes.emplace(name, t.shape());
            shared = ar.make_shared_tensors(shapes);
            expect_zero_copy = bytes != 0;
          }
          if (shared->zero_copy() != expect_zero_copy) {
            std::cerr << "round " << round << ": zero_copy() is " << shared->zero_copy() << "\n";
            return 4;
          }
          shared->assign(grads);
          ar.all_reduce_in_place(*shared);
          result = shared->to_tensors();
      }
      for (const auto& [name, t] : result)
        if (t.shape() != grads.at(name).shape()) throw std::runtime_error("shape changed: " + name);
      write_result(result, out);
      out.flush();
    }
    std::cout << "rank " << ar.rank() << " of " << ar.world_size() << " done, "
              << ar.traffic().wire_bytes << " wire bytes for " << ar.traffic().dense_bytes
              << " dense\n";
    if (std::getenv("ZRING_CLIENT_ALARM_US")) std::cout << "alarms " << alarms.load() << "\n";
    return 0;
  } catch (const zring::Error& e) {
    std::ofstream(out_path + ".err") << "ERROR " << zring::to_string(e.code()) << ": " << e.what();
    std::cerr << "ERROR " << zring::to_string(e.code()) << ": " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {  // the API let something else than a zring::Error through
    std::ofstream(out_path + ".err") << "NOT A zring::Error: " << e.what();
    std::cerr << "NOT A zring::Error: " << e.what() << "\n";
    return 6;
  }
}
