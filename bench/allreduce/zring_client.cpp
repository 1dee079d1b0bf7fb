// zring_client.cpp - one rank of the all-reduce benchmark through zringd.
//
//   zring_allreduce_client --endpoint ipc://... --method quant:8 --rank R
//       [--local-rank L] --plan BYTES:WARMUP:ITERS,... --out FILE [--timeout-ms T]
//
// Connects to its node's daemon exactly as a training process would
// (CompressedAllReduce::connect) and times each all_reduce_in_place of one
// tensor, as a training loop would call it: the copy into the shared buffer
// (or the IPC message), the ring, and the averages copied back over the
// tensor. Like the peers' inputs, the tensor is restored before each op,
// outside the timed region. The
// wire bytes of an op are the growth of traffic().wire_bytes: what this
// rank's node sent on the ring. A size whose ops fail is reported on stderr
// ("error at BYTES bytes: ...") and left out of the timings.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <zring/zring.hpp>

#include "harness.hpp"

namespace zb = zring::bench;

namespace {

void run_step(zring::CompressedAllReduce& ar, const zring::TensorMap& grads,
              const zb::SizeStep& step, zb::TimingsFile& out) {
  zring::TensorMap work = grads;
  for (int i = 0; i < step.warmup; ++i) {
    work = grads;
    ar.all_reduce_in_place(work);
  }
  for (int i = 0; i < step.iters; ++i) {
    work.at("grad").data() = grads.at("grad").data();  // the same storage, refilled
    const std::uint64_t wire_before = ar.traffic().wire_bytes;
    const std::int64_t start = zb::now_ns();
    ar.all_reduce_in_place(work);
    const double seconds = zb::seconds_since(start);
    const auto& values = work.at("grad").data();
    out.row(step.bytes, i, seconds, ar.traffic().wire_bytes - wire_before,
            zb::checksum(values.data(), values.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const zb::Args args(argc, argv,
                        {"endpoint", "method", "rank", "local-rank", "plan", "out", "timeout-ms"});
    zring::ConnectOptions options;
    options.local_rank = static_cast<std::size_t>(args.get_int("local-rank", 0));
    options.timeout = std::chrono::milliseconds(args.get_int("timeout-ms", 120000));
    const auto method = zring::CompressionMethod::parse(args.get("method"));
    const std::vector<zb::SizeStep> plan = zb::parse_plan(args.get("plan"));
    std::size_t largest = 0;
    for (const zb::SizeStep& s : plan) largest = std::max(largest, s.elements());
    const std::vector<float> gradient =
        zb::make_gradient(largest, static_cast<std::uint64_t>(args.get_int("rank", 0)));

    auto ar = zring::CompressedAllReduce::connect(args.get("endpoint"), method, options);
    zb::TimingsFile out(args.get("out"));
    for (const zb::SizeStep& step : plan) {
      zring::TensorMap grads;
      grads.emplace("grad", zring::Tensor(std::vector<float>(gradient.begin(),
                                                             gradient.begin() + step.elements())));
      try {
        run_step(ar, grads, step, out);
      } catch (const zring::Error& e) {
        // Every rank gets the same error (zring's contract): all move on to
        // the next size together, and the driver reports this one as failed.
        std::fprintf(stderr, "error at %zu bytes: %s\n", step.bytes, e.what());
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zring_allreduce_client: %s\n", e.what());
    return 1;
  }
}
