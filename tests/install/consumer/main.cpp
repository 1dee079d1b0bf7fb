// main.cpp - a world_size 1 all_reduce through the installed zring package.
#include <cmath>
#include <cstdio>
#include <string>
#include <zring/zring.hpp>

int main() {
  const auto method = zring::CompressionMethod::parse("quant:8");
  zring::CompressedAllReduce ar(method, 1);

  zring::TensorMap grads;
  grads.emplace("w", zring::Tensor({0.0f, 0.25f, 0.5f, 1.0f}, {2, 2}));
  const zring::TensorMap out = ar.all_reduce(grads);
  const zring::Tensor& w = out.at("w");

  // 8-bit codes on [0, 1]: every value within half a step (1/510) of its input.
  float max_error = 0.0f;
  for (std::size_t i = 0; i < w.numel(); ++i)
    max_error = std::fmax(max_error, std::fabs(w[i] - grads.at("w")[i]));

  std::string code = "none";
  try {
    zring::CompressedAllReduce two(method, 2);
    (void)two.all_reduce(grads);
  } catch (const zring::Error& e) {
    code = zring::to_string(e.code());
  }

  // SharedTensors through the C++17 headers: the same average in place.
  zring::SharedTensors shared = ar.make_shared_tensors({{"w", {2, 2}}});
  shared.assign(grads);
  ar.all_reduce_in_place(shared);
  const zring::Span<const float> sw = shared["w"];
  bool same = sw.size() == w.numel();
  for (std::size_t i = 0; same && i < sw.size(); ++i) same = sw[i] == w[i];

  std::printf("zring %s method=%s\n", zring::version(), ar.method().to_string().c_str());
  std::printf("shape=%zux%zu w[3]=%.3f error_ok=%d\n", w.shape()[0], w.shape()[1], w[3],
              max_error <= 1.0f / 510.0f + 1e-6f ? 1 : 0);
  std::printf("world2=%s wire_bytes_positive=%d\n", code.c_str(),
              ar.traffic().wire_bytes > 0 ? 1 : 0);
  std::printf("shared_same=%d\n", same ? 1 : 0);
  return 0;
}
