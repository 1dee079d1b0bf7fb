// mpi_client.cpp - the all-reduce benchmark with MPI_Allreduce, the peer.
//
//   mpirun -np N --mca btl tcp,self mpi_allreduce_client
//       --plan BYTES:WARMUP:ITERS,... --out-dir DIR
//
// Every rank writes DIR/rank-R.csv. MPI_Allreduce(MPI_FLOAT, MPI_SUM) from a
// send buffer into a receive buffer, so every op sums the same gradient.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "harness.hpp"

namespace zb = zring::bench;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  try {
    const zb::Args args(argc, argv, {"plan", "out-dir"});
    const std::vector<zb::SizeStep> plan = zb::parse_plan(args.get("plan"));
    std::size_t largest = 0;
    for (const zb::SizeStep& s : plan) largest = std::max(largest, s.elements());
    const std::vector<float> gradient =
        zb::make_gradient(largest, static_cast<std::uint64_t>(rank));
    std::vector<float> result(largest);

    zb::TimingsFile out(args.get("out-dir") + "/rank-" + std::to_string(rank) + ".csv");
    MPI_Barrier(MPI_COMM_WORLD);
    for (const zb::SizeStep& step : plan) {
      const int n = static_cast<int>(step.elements());
      for (int i = 0; i < step.warmup + step.iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);  // every op starts together (untimed)
        const std::int64_t start = zb::now_ns();
        MPI_Allreduce(gradient.data(), result.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double seconds = zb::seconds_since(start);
        if (i >= step.warmup)
          out.row(step.bytes, i - step.warmup, seconds, std::nullopt,
                  zb::checksum(result.data(), step.elements()));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_allreduce_client (rank %d): %s\n", rank, e.what());
    status = 1;
  }
  if (status != 0) MPI_Abort(MPI_COMM_WORLD, status);
  MPI_Finalize();
  return status;
}
