// zring_client.cpp - one rank of the all-reduce benchmark through zringd.
//
//   zring_allreduce_client --endpoint ipc://... --method quant:8 --rank R
//       [--local-rank L] --plan BYTES:WARMUP:ITERS,... --out FILE
//       [--timeout-ms T] [--api shared|inplace|copy|given|out] [--layout flat|resnet50]
//
// Connects to its node's daemon exactly as a training process would
// (CompressedAllReduce::connect) and times each all_reduce_in_place of one
// tensor, as a training loop would call it. With --api shared (the
// default) the tensor is SharedTensors: zringd reads it where it is and
// writes the averages back over it. With --api inplace it is a TensorMap
// reduced by all_reduce_in_place: the time includes handing its values to
// zringd and the averages written back. With --api copy it is the original
// API, `tensors = all_reduce(tensors)`: the time includes the new map; with --api given,
// `tensors = all_reduce(std::move(tensors))`, the map given up; with --api out,
// `all_reduce(inputs, outputs)` of TensorViews, out of place into outputs made once. Like the
// peers' inputs, the tensor is restored before each op, outside the timed region. The wire bytes of
// an op are the growth of traffic().wire_bytes: what this rank's node sent on the ring. A size
// whose ops fail is reported on stderr ("error at BYTES bytes: ...") and left out of the timings.
// --layout resnet50 reduces ResNet-50's 161 parameter tensors (the plan's size must be their
// 102,228,128 bytes) instead of one tensor: the tensor-fusion check. After each size it appends
// "BYTES PEAK_RSS_BYTES" to FILE.rss: this process's peak resident memory during that size's ops
// (the peak is reset before each size through /proc/self/clear_refs).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <zring/zring.hpp>

#include "harness.hpp"

namespace zb = zring::bench;

namespace {

// ResNet-50's 161 parameter tensors (torchvision's layout: 25,557,032
// floats), named in their order in the model, for the tensor-fusion check.
zring::TensorShapes resnet50() {
  zring::TensorShapes shapes;
  std::size_t count = 0;
  auto add = [&](const std::string& name, std::vector<std::size_t> shape) {
    char prefix[8];
    std::snprintf(prefix, sizeof prefix, "%03zu.", count++);  // keeps the model's order
    shapes.emplace(prefix + name, std::move(shape));
  };
  auto conv_bn = [&](const std::string& name, std::size_t out, std::size_t in, std::size_t k) {
    add(name + ".conv.weight", {out, in, k, k});
    add(name + ".bn.weight", {out});
    add(name + ".bn.bias", {out});
  };
  conv_bn("stem", 64, 3, 7);
  std::size_t in = 64;
  const std::size_t blocks[4] = {3, 4, 6, 3};
  for (std::size_t layer = 0; layer < 4; ++layer) {
    const std::size_t width = std::size_t{64} << layer;
    for (std::size_t b = 0; b < blocks[layer]; ++b) {
      const std::string name = "layer" + std::to_string(layer + 1) + "." + std::to_string(b);
      conv_bn(name + ".a", width, in, 1);
      conv_bn(name + ".b", width, width, 3);
      conv_bn(name + ".c", 4 * width, width, 1);
      if (b == 0) conv_bn(name + ".downsample", 4 * width, in, 1);
      in = 4 * width;
    }
  }
  add("fc.weight", {1000, 2048});
  add("fc.bias", {1000});
  return shapes;
}

std::size_t numel(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t e : shape) n *= e;
  return n;
}

// The values live in SharedTensors (--api shared, the default): zringd
// reads them and writes the averages back where they are, with no copy on
// either side. --api inplace times all_reduce_in_place of a TensorMap
// instead, --api copy all_reduce of one (a new map each op), --api given
// all_reduce of one given up (std::move: the same map back), --api out
// all_reduce of views of it into views of another map, made once (out of
// place: the input only read). Before each op
// every rank restores its input and waits at a barrier (a one-float
// all_reduce), both untimed: ops start together, as the peers' do.
void run_step(zring::CompressedAllReduce& ar, const std::vector<float>& gradient,
              const std::string& api, const zring::TensorShapes& shapes, const zb::SizeStep& step,
              zb::TimingsFile& out) {
  const bool shared = api == "shared";
  const std::size_t n = step.elements();
  std::size_t total = 0;
  for (const auto& [name, shape] : shapes) total += numel(shape);
  if (total != n)
    throw std::runtime_error("the layout holds " + std::to_string(total) + " floats, the plan " +
                             std::to_string(n));
  zring::TensorMap work, outputs;
  zring::TensorViews in_views, out_views;
  zring::SharedTensors tensors;
  if (shared) {
    tensors = ar.make_shared_tensors(shapes);
  } else {
    for (const auto& [name, shape] : shapes)
      work.emplace(name, zring::Tensor(std::vector<float>(numel(shape)), shape));
  }
  if (api == "out") {
    outputs = work;
    for (auto& [name, t] : work) in_views.push_back({name, t.shape(), t.data().data()});
    for (auto& [name, t] : outputs) out_views.push_back({name, t.shape(), t.data().data()});
  }
  auto restore = [&] {
    if (shared) {
      std::copy(gradient.begin(), gradient.begin() + n, tensors.values().begin());
      return;
    }
    std::size_t at = 0;  // the same storage, refilled
    for (auto& [name, t] : work) {
      std::copy(gradient.begin() + at, gradient.begin() + at + t.numel(), t.data().begin());
      at += t.numel();
    }
  };
  const zring::TensorMap one{{"barrier", zring::Tensor(std::vector<float>{1.0f})}};
  auto reduce = [&] {
    if (shared)
      ar.all_reduce_in_place(tensors);
    else if (api == "inplace")
      ar.all_reduce_in_place(work);
    else if (api == "given")
      work = ar.all_reduce(std::move(work));  // the map given up: averaged where it is
    else if (api == "out")
      ar.all_reduce(in_views, out_views);  // out of place: work only read
    else
      work = ar.all_reduce(work);  // copy: the original API, a new map each op
  };
  // The checksum reads the result in fused order. One tensor is read where
  // it is: a copy of it here would compete for the cores with the ranks
  // whose op is still running (the shared path copies nothing either).
  std::vector<float> fused(shared || work.size() == 1 ? 0 : n);
  const zring::TensorMap& averages = api == "out" ? outputs : work;
  auto result = [&]() -> const float* {
    if (shared) return tensors.values().data();
    if (averages.size() == 1) return averages.begin()->second.data().data();
    std::size_t at = 0;
    for (const auto& [name, t] : averages) {
      std::copy(t.data().begin(), t.data().end(), fused.begin() + static_cast<std::ptrdiff_t>(at));
      at += t.numel();
    }
    return fused.data();
  };
  for (int i = 0; i < step.warmup + step.iters; ++i) {
    restore();
    (void)ar.all_reduce(one);
    const std::uint64_t wire_before = ar.traffic().wire_bytes;
    const std::int64_t start = zb::now_ns();
    reduce();
    const double seconds = zb::seconds_since(start);
    if (i >= step.warmup)
      out.row(step.bytes, i - step.warmup, seconds, ar.traffic().wire_bytes - wire_before,
              zb::checksum(result(), n));
  }
}

// VmHWM of this process, in bytes (0 when /proc does not say).
std::uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const zb::Args args(
        argc, argv,
        {"endpoint", "method", "rank", "local-rank", "plan", "out", "timeout-ms", "api", "layout"});
    const std::string layout = args.get("layout", "flat");
    if (layout != "flat" && layout != "resnet50")
      throw std::runtime_error("--layout is flat or resnet50, not " + layout);
    std::string api = args.get("api", "shared");
    if (api == "tensors") api = "inplace";  // the name of earlier runs
    if (api != "shared" && api != "inplace" && api != "copy" && api != "given" && api != "out")
      throw std::runtime_error("--api is shared, inplace, copy, given or out, not " + api);
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
    std::ofstream rss(args.get("out") + ".rss");
    for (const zb::SizeStep& step : plan) {
      std::ofstream("/proc/self/clear_refs") << "5";  // the peak restarts from now
      try {
        const zring::TensorShapes shapes =
            layout == "flat" ? zring::TensorShapes{{"grad", {step.elements()}}} : resnet50();
        run_step(ar, gradient, api, shapes, step, out);
      } catch (const zring::Error& e) {
        // Every rank gets the same error (zring's contract): all move on to
        // the next size together, and the driver reports this one as failed.
        std::fprintf(stderr, "error at %zu bytes: %s\n", step.bytes, e.what());
      }
      rss << step.bytes << " " << peak_rss_bytes() << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zring_allreduce_client: %s\n", e.what());
    return 1;
  }
}
