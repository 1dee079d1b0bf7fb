// zring_client.cpp - one rank of the all-reduce benchmark through zringd.
//
//   zring_allreduce_client --endpoint ipc://... --method quant:8 --rank R
//       [--local-rank L] --plan BYTES:WARMUP:ITERS,... --out FILE
//       [--timeout-ms T] [--api shared|tensors]
//
// Connects to its node's daemon exactly as a training process would
// (CompressedAllReduce::connect) and times each all_reduce_in_place of one
// tensor, as a training loop would call it. With --api shared (the
// default) the tensor is SharedTensors: zringd reads it where it is and
// writes the averages back over it. With --api tensors it is a TensorMap:
// the time includes its copy into the shared buffer (or the IPC message)
// and the averages copied back. Like the peers' inputs, the tensor is
// restored before each op, outside the timed region. The wire bytes of an
// op are the growth of traffic().wire_bytes: what this rank's node sent on
// the ring. A size whose ops fail is reported on stderr ("error at BYTES
// bytes: ...") and left out of the timings.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <zring/zring.hpp>

#include "harness.hpp"

namespace zb = zring::bench;

namespace {

// The values live in SharedTensors (--api shared, the default): zringd
// reads them and writes the averages back where they are, with no copy on
// either side. --api tensors times all_reduce_in_place of a TensorMap
// instead: one copy into the shared buffer and one back.
void run_step(zring::CompressedAllReduce& ar, const std::vector<float>& gradient, bool shared,
              const zb::SizeStep& step, zb::TimingsFile& out) {
  const std::size_t n = step.elements();
  zring::TensorMap grads, work;
  zring::SharedTensors tensors;
  if (shared) {
    tensors = ar.make_shared_tensors({{"grad", {n}}});
  } else {
    grads.emplace("grad", zring::Tensor(std::vector<float>(gradient.begin(), gradient.begin() + n)));
    work = grads;
  }
  auto restore = [&] {  // outside the timed region, like the peers' inputs
    if (shared) std::copy(gradient.begin(), gradient.begin() + n, tensors["grad"].begin());
    else work.at("grad").data() = grads.at("grad").data();  // the same storage, refilled
  };
  auto reduce = [&] {
    if (shared) ar.all_reduce_in_place(tensors);
    else ar.all_reduce_in_place(work);
  };
  for (int i = 0; i < step.warmup; ++i) {
    restore();
    reduce();
  }
  for (int i = 0; i < step.iters; ++i) {
    restore();
    const std::uint64_t wire_before = ar.traffic().wire_bytes;
    const std::int64_t start = zb::now_ns();
    reduce();
    const double seconds = zb::seconds_since(start);
    const float* values = shared ? tensors["grad"].data() : work.at("grad").data().data();
    out.row(step.bytes, i, seconds, ar.traffic().wire_bytes - wire_before, zb::checksum(values, n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const zb::Args args(argc, argv,
                        {"endpoint", "method", "rank", "local-rank", "plan", "out", "timeout-ms", "api"});
    const std::string api = args.get("api", "shared");
    if (api != "shared" && api != "tensors") throw std::runtime_error("--api is shared or tensors, not " + api);
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
      try {
        run_step(ar, gradient, api == "shared", step, out);
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
