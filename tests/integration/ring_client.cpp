// ring_client - a training process stand-in for the integration tests.
//
//   ring_client ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT [TIMEOUT_MS]
//
// Connects to its zringd, and for each round all-reduces the gradients
// make_gradients(SEED, round, rank, SIZES) (SIZES: comma separated, "-" for
// none) and appends the result's floats to OUT (tensors in name order);
// odd rounds use all_reduce_in_place, even ones all_reduce. On
// an error it writes "ERROR <kind>: <message>" to OUT.err and exits 3.
//
//   ring_client --talk ENDPOINT LOCAL_RANK METHOD SEED SIZES [TIMEOUT_MS]
//
// Stays connected and takes commands on stdin, one per line: "round N FILE"
// all-reduces round N's gradients, writes the result to FILE and answers
// "ok" or "error <kind> <message>" on stdout; "quit" ends it. The test that
// drives it decides when the ranks move on, as a training loop would.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <zring/zring.hpp>

#include "support/reference.hpp"

namespace {

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> sizes;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');)
    if (item != "-") sizes.push_back(std::stoull(item));
  return sizes;
}

void write_result(const zring::TensorMap& result, std::ostream& out) {
  for (const auto& [name, t] : result)
    out.write(reinterpret_cast<const char*>(t.data().data()),
              static_cast<std::streamsize>(t.numel() * sizeof(float)));
}

int talk(int argc, char** argv) {
  zring::ConnectOptions options;
  options.local_rank = std::stoul(argv[3]);
  if (argc > 7) options.timeout = std::chrono::milliseconds(std::stol(argv[7]));
  const std::uint64_t seed = std::stoull(argv[5]);
  const auto sizes = parse_sizes(argv[6]);
  auto ar = zring::CompressedAllReduce::connect(argv[2], zring::CompressionMethod::parse(argv[4]),
                                                options);
  std::cout << "ready " << ar.rank() << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream command(line);
    std::string verb, file;
    std::uint64_t round = 0;
    command >> verb >> round >> file;
    if (verb == "quit") return 0;
    try {
      const auto result = ar.all_reduce(zring::testing::make_gradients(seed, round, ar.rank(), sizes));
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

int main(int argc, char** argv) {
  if (argc >= 7 && std::string(argv[1]) == "--talk") {
    try {
      return talk(argc, argv);
    } catch (const zring::Error& e) {
      std::cout << "error " << zring::to_string(e.code()) << " " << e.what() << std::endl;
      return 3;
    }
  }
  if (argc < 8) {
    std::cerr << "usage: ring_client ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT [TIMEOUT_MS]\n";
    return 2;
  }
  const std::string endpoint = argv[1], out_path = argv[7];
  const std::vector<std::size_t> sizes = parse_sizes(argv[6]);
  try {
    zring::ConnectOptions options;
    options.local_rank = std::stoul(argv[2]);
    if (argc > 8) options.timeout = std::chrono::milliseconds(std::stol(argv[8]));
    auto ar = zring::CompressedAllReduce::connect(endpoint, zring::CompressionMethod::parse(argv[3]),
                                                  options);
    std::ofstream out(out_path, std::ios::binary);
    for (std::uint64_t round = 0; round < std::stoull(argv[5]); ++round) {
      const zring::TensorMap grads =
          zring::testing::make_gradients(std::stoull(argv[4]), round, ar.rank(), sizes);
      // Odd rounds take the in-place form: both must give the same bits.
      zring::TensorMap result;
      if (round % 2 == 0) {
        result = ar.all_reduce(grads);
      } else {
        result = grads;
        ar.all_reduce_in_place(result);
      }
      for (const auto& [name, t] : result)
        if (t.shape() != grads.at(name).shape()) throw std::runtime_error("shape changed: " + name);
      write_result(result, out);
      out.flush();
    }
    std::cout << "rank " << ar.rank() << " of " << ar.world_size() << " done, "
              << ar.traffic().wire_bytes << " wire bytes for " << ar.traffic().dense_bytes
              << " dense\n";
    return 0;
  } catch (const zring::Error& e) {
    std::ofstream(out_path + ".err") << "ERROR " << zring::to_string(e.code()) << ": " << e.what();
    std::cerr << "ERROR " << zring::to_string(e.code()) << ": " << e.what() << "\n";
    return 3;
  }
}
