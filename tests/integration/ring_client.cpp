// ring_client - a training process stand-in for the integration tests.
//
//   ring_client ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT [TIMEOUT_MS]
//
// Connects to its zringd, and for each round all-reduces the gradients
// make_gradients(SEED, round, rank, SIZES) (SIZES: comma separated, "-" for
// none) and appends the result's floats to OUT (tensors in name order). On
// an error it writes "ERROR <kind>: <message>" to OUT.err and exits 3.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <zring/zring.hpp>

#include "support/reference.hpp"

int main(int argc, char** argv) {
  if (argc < 8) {
    std::cerr << "usage: ring_client ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT [TIMEOUT_MS]\n";
    return 2;
  }
  const std::string endpoint = argv[1], out_path = argv[7];
  std::vector<std::size_t> sizes;
  std::stringstream list(argv[6]);
  for (std::string item; std::getline(list, item, ',');)
    if (item != "-") sizes.push_back(std::stoull(item));
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
      const zring::TensorMap result = ar.all_reduce(grads);
      for (const auto& [name, t] : result) {
        if (t.shape() != grads.at(name).shape()) throw std::runtime_error("shape changed: " + name);
        out.write(reinterpret_cast<const char*>(t.data().data()),
                  static_cast<std::streamsize>(t.numel() * sizeof(float)));
      }
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
