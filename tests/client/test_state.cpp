// test_state.cpp - what a CompressedAllReduce remembers between calls: the
// error-feedback residual per tensor and the step that seeds randomk.
#include <boost/test/unit_test.hpp>

#include "client_test_util.hpp"

namespace at = zring::api_test;
using zring::CompressedAllReduce;
using zring::CompressionMethod;
using zring::Tensor;
using zring::TensorMap;

namespace {

TensorMap one_tensor(std::vector<float> x) {
  TensorMap g;
  g.emplace("w", Tensor(std::move(x)));
  return g;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(state)

BOOST_AUTO_TEST_CASE(error_feedback_residual_carries_to_the_next_call) {
  const TensorMap g = one_tensor({1.0f, 2.0f, 3.0f, 0.5f});
  CompressedAllReduce ef(CompressionMethod::parse("ef:topk:1"), 1);
  CompressedAllReduce plain(CompressionMethod::topk(1), 1);
  const std::vector<float> first = {0.0f, 0.0f, 3.0f, 0.0f};
  BOOST_TEST(ef.all_reduce(g).at("w").data() == first, boost::test_tools::per_element());
  BOOST_TEST(plain.all_reduce(g).at("w").data() == first, boost::test_tools::per_element());
  // Residual {1, 2, 0, 0.5} is added back: {2, 4, 3, 1} keeps the 4.
  const std::vector<float> second = {0.0f, 4.0f, 0.0f, 0.0f};
  BOOST_TEST(ef.all_reduce(g).at("w").data() == second, boost::test_tools::per_element());
  BOOST_TEST(plain.all_reduce(g).at("w").data() == first, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(error_feedback_is_per_tensor_and_shared_by_all_operations) {
  CompressedAllReduce ef(CompressionMethod::parse("ef:topk:1"), 2);
  TensorMap g = one_tensor({1.0f, 2.0f, 3.0f, 0.5f});
  g.emplace("v", Tensor({5.0f, 0.0f}));
  (void)ef.compress_for_transmission(g);  // residual w = {1, 2, 0, 0.5}, v = {0, 0}
  const auto sent = ef.compress_for_transmission(g);
  BOOST_TEST(sent.at("w").indices == std::vector<std::uint32_t>{1},
             boost::test_tools::per_element());
  BOOST_TEST(sent.at("w").values == std::vector<float>{4.0f}, boost::test_tools::per_element());
  BOOST_TEST(sent.at("v").values == std::vector<float>{5.0f}, boost::test_tools::per_element());
  BOOST_TEST(!sent.at("w").method.has_error_feedback());
}

BOOST_AUTO_TEST_CASE(compress_for_transmission_keeps_shapes) {
  CompressedAllReduce ar(CompressionMethod::quantization(8), 2);
  const TensorMap g = at::gradients(0);
  const auto sent = ar.compress_for_transmission(g);
  for (const auto& [name, tensor] : g) {
    BOOST_TEST(sent.at(name).shape == tensor.shape(), boost::test_tools::per_element());
    BOOST_TEST(sent.at(name).original_size == tensor.numel());
  }
}

BOOST_AUTO_TEST_CASE(randomk_indices_agree_across_ranks_in_lockstep) {
  const CompressionMethod method = CompressionMethod::randomk(10);
  CompressedAllReduce rank0(method, 2), rank1(method, 2);
  std::vector<std::uint32_t> previous;
  for (int step = 0; step < 3; ++step) {
    BOOST_TEST_CONTEXT("step " << step) {
      TensorMap a, b;  // different values, same names and sizes
      a.emplace("w", Tensor(at::values(1000, 0, step)));
      b.emplace("w", Tensor(at::values(1000, 1, step)));
      a.emplace("v", Tensor(at::values(1000, 0, step)));
      b.emplace("v", Tensor(at::values(1000, 1, step)));
      const auto sa = rank0.compress_for_transmission(a);
      const auto sb = rank1.compress_for_transmission(b);
      BOOST_TEST(sa.at("w").indices == sb.at("w").indices, boost::test_tools::per_element());
      BOOST_TEST(sa.at("v").indices == sb.at("v").indices, boost::test_tools::per_element());
      BOOST_TEST(sa.at("w").values != sb.at("w").values);
      // A new draw every step and for every tensor.
      BOOST_TEST(sa.at("w").indices != sa.at("v").indices);
      BOOST_TEST(sa.at("w").indices != previous);
      previous = sa.at("w").indices;
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
