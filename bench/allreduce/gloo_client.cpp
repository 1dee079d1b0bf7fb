// gloo_client.cpp - one rank of the all-reduce benchmark with Gloo, the peer.
//
//   gloo_allreduce_client --rank R --size N --store DIR [--host 127.0.0.1]
//       [--algorithm ring_chunked|allreduce] --plan BYTES:WARMUP:ITERS,... --out FILE
//
// Gloo as installed by Debian (libgloo-dev): ranks meet through a FileStore
// in DIR, connect a full mesh over the TCP transport on --host, and run a
// sum in place: AllreduceRingChunked<float> (ring_chunked, the default), or
// gloo::allreduce (allreduce), the entry point torch.distributed's gloo
// backend calls for a CPU tensor. The input is restored before every op,
// outside the timed region, so every op sums the same gradient.
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "harness.hpp"

namespace zb = zring::bench;

int main(int argc, char** argv) {
  try {
    const zb::Args args(argc, argv, {"rank", "size", "store", "host", "algorithm", "plan", "out"});
    const int rank = static_cast<int>(args.get_int("rank", 0));
    const int size = static_cast<int>(args.get_int("size", 1));
    const std::vector<zb::SizeStep> plan = zb::parse_plan(args.get("plan"));
    const std::string algorithm = args.get("algorithm", "ring_chunked");
    if (algorithm != "ring_chunked" && algorithm != "allreduce")
      throw std::invalid_argument("--algorithm: '" + algorithm +
                                  "' is neither ring_chunked nor allreduce");
    std::size_t largest = 0;
    for (const zb::SizeStep& s : plan) largest = std::max(largest, s.elements());
    const std::vector<float> gradient =
        zb::make_gradient(largest, static_cast<std::uint64_t>(rank));

    gloo::transport::tcp::attr attr;
    attr.hostname = args.get("host", "127.0.0.1");
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(args.get("store"));
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::seconds(300));
    context->connectFullMesh(store, device);

    zb::TimingsFile out(args.get("out"));
    std::vector<float> buffer(largest);
    for (const zb::SizeStep& step : plan) {
      const std::size_t n = step.elements();
      std::function<void()> allreduce;
      std::unique_ptr<gloo::AllreduceRingChunked<float>> chunked;
      if (algorithm == "ring_chunked") {
        chunked = std::make_unique<gloo::AllreduceRingChunked<float>>(
            context, std::vector<float*>{buffer.data()}, static_cast<int>(n));
        allreduce = [&chunked] { chunked->run(); };
      } else {
        allreduce = [&context, &buffer, n] {
          gloo::AllreduceOptions opts(context);
          opts.setOutput(buffer.data(), n);  // no input: in place
          void (*sum)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
          opts.setReduceFunction(sum);
          gloo::allreduce(opts);
        };
      }
      gloo::BarrierAllToOne barrier(context);
      for (int i = 0; i < step.warmup + step.iters; ++i) {
        std::memcpy(buffer.data(), gradient.data(), n * sizeof(float));
        barrier.run();  // every op starts together, its input restored (untimed)
        const std::int64_t start = zb::now_ns();
        allreduce();
        const double seconds = zb::seconds_since(start);
        if (i >= step.warmup)
          out.row(step.bytes, i - step.warmup, seconds, std::nullopt,
                  zb::checksum(buffer.data(), n));
      }
    }
    // No rank leaves while another may still be sending it the last op's
    // data: Gloo reports a peer that closed early as an error.
    gloo::BarrierAllToOne(context).run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce_client: %s\n", e.what());
    return 1;
  }
}
