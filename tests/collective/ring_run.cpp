#include "ring_run.hpp"

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <thread>

namespace zring::collective::ring_test {

Manifest manifest_of(const TensorMap& grads, const CompressionMethod& method) {
  Manifest m;
  m.method = method.to_string();
  for (const auto& [name, t] : grads) {
    TensorSpec spec{name, {}, t.numel()};
    for (auto e : t.shape()) spec.shape.push_back(e);
    m.tensors.push_back(spec);
  }
  return m;
}

std::vector<float> fuse(const TensorMap& grads) {
  std::vector<float> out;
  for (const auto& [name, t] : grads) out.insert(out.end(), t.data().begin(), t.data().end());
  return out;
}

TensorMap unfuse(const std::vector<float>& fused, const TensorMap& like) {
  TensorMap out;
  std::size_t at = 0;
  for (const auto& [name, t] : like) {
    std::vector<float> v(fused.begin() + at, fused.begin() + at + t.numel());
    at += t.numel();
    out.emplace(name, Tensor(std::move(v), t.shape()));
  }
  return out;
}

void run_op(InprocRing& ring, std::size_t local, const CompressionMethod& method,
            const std::vector<TensorMap>& inputs, std::uint64_t op,
            std::vector<std::vector<codec::ErrorFeedback>>& residuals, RingRun& run,
            std::size_t chunk_bytes, std::function<void(std::size_t, OpInput&)> tweak,
            std::chrono::milliseconds timeout, std::size_t gather_bytes, std::size_t direct_bytes) {
  const std::size_t nodes = ring.nodes();
  run.outputs.assign(nodes, {});
  run.errors.assign(nodes, "");
  run.codes.assign(nodes, ErrorCode::internal);
  run.stats.assign(nodes, {});
  std::vector<std::vector<float>> fused;
  for (const auto& g : inputs) fused.push_back(fuse(g));
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < nodes; ++n) {
    threads.emplace_back([&, n] {
      OpContext ctx;
      ctx.world_size = nodes * local;
      ctx.local_ranks = local;
      ctx.op_seed = 1234 + op;
      ctx.op_number = op;
      ctx.ring.chunk_bytes = chunk_bytes;
      ctx.ring.timeout = timeout;
      ctx.ring.gather_bytes = gather_bytes;
      ctx.ring.direct_bytes = direct_bytes;
      OpInput in;
      in.manifest = manifest_of(inputs[n * local], method);
      in.method = method;
      for (std::size_t l = 0; l < local; ++l) in.ranks.push_back(fused[n * local + l].data());
      if (tweak) tweak(n, in);
      try {
        Workspace work;
        OpOutput out = run_allreduce(ring.link(n), ctx, in, residuals[n], work);
        run.outputs[n].assign(out.values.get(), out.values.get() + out.elements);
        run.stats[n] = out.stats;
      } catch (const Error& e) {
        run.errors[n] = e.what();
        run.codes[n] = e.code();
      }
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<TensorMap> make_inputs(std::size_t world, std::uint64_t round,
                                   const std::vector<std::size_t>& sizes) {
  std::vector<TensorMap> inputs;
  for (std::size_t r = 0; r < world; ++r)
    inputs.push_back(zring::testing::make_gradients(42, round, r, sizes));
  return inputs;
}

void check_same_bits(const RingRun& run) {
  for (std::size_t n = 0; n < run.outputs.size(); ++n) {
    BOOST_TEST_INFO("node " << n << ": " << run.errors[n]);
    BOOST_REQUIRE(run.errors[n].empty());
    BOOST_REQUIRE_EQUAL(run.outputs[n].size(), run.outputs[0].size());
    BOOST_TEST(std::memcmp(run.outputs[n].data(), run.outputs[0].data(),
                           run.outputs[0].size() * sizeof(float)) == 0,
               "node " << n << " got other bits than node 0");
  }
}

extern const std::vector<std::string> kMethods;
const std::vector<std::string> kMethods = {
    "none",       "fp16",    "bf16",       "quant:8",        "quant:3",         "quant:16",
    "sign",       "topk:5%", "topk:3",     "threshold:1.2",  "randomk:10%",     "randomk:2",
    "ef:topk:5%", "ef:sign", "ef:quant:4", "ef:randomk:10%", "ef:threshold:1.2"};

}  // namespace zring::collective::ring_test
