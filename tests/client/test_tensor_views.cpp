// test_tensor_views.cpp - lib/client/tensor_views: how all_reduce_in_place
// checks TensorViews and puts them in fusion (name) order, and how the
// out-of-place all_reduce pairs its outputs with them, without a daemon.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <string>
#include <vector>
#include <zring/error.hpp>
#include <zring/tensor.hpp>

#include "client/tensor_views.hpp"
#include "client_test_util.hpp"

using zring::ErrorCode;
using zring::TensorView;
using zring::TensorViews;
using zring::api_test::code_of;
using zring::api_test::mentions;
using zring::client::fuse_order;
using zring::client::FusedView;
using zring::client::outputs_for;

BOOST_AUTO_TEST_SUITE(tensor_views)

BOOST_AUTO_TEST_CASE(views_are_fused_in_name_order_one_after_another) {
  std::vector<float> a(6), b(1), c(5);
  const TensorViews views = {
      {"fc.bias", {5}, c.data()}, {"conv.weight", {2, 3}, a.data()}, {"scale", {}, b.data()}};
  const std::vector<FusedView> fused = fuse_order(views);
  BOOST_TEST_REQUIRE(fused.size() == 3u);
  BOOST_TEST(fused[0].view->name == "conv.weight");
  BOOST_TEST(fused[0].numel == 6u);
  BOOST_TEST(fused[0].offset == 0u);
  BOOST_TEST(fused[1].view->name == "fc.bias");
  BOOST_TEST(fused[1].numel == 5u);
  BOOST_TEST(fused[1].offset == 6u);
  BOOST_TEST(fused[2].view->name == "scale");  // a scalar: one value
  BOOST_TEST(fused[2].numel == 1u);
  BOOST_TEST(fused[2].offset == 11u);
  // The views themselves, not copies.
  BOOST_TEST(fused[0].view == &views[1]);
  const zring::TensorShapes shapes = zring::client::shapes_of(fused);
  BOOST_TEST(shapes.size() == 3u);
  BOOST_TEST((shapes.at("conv.weight") == std::vector<std::size_t>{2, 3}));
  BOOST_TEST(shapes.at("scale").empty());
}

BOOST_AUTO_TEST_CASE(no_views_and_empty_tensors_are_fine) {
  BOOST_TEST(fuse_order({}).empty());
  // No values, so no data is needed. (FusedView points into the views: they must outlive it.)
  const TensorViews views = {{"empty", {4, 0}, nullptr}, {"a", {0}, nullptr}};
  const std::vector<FusedView> fused = fuse_order(views);
  BOOST_TEST_REQUIRE(fused.size() == 2u);
  BOOST_TEST(fused[0].view->name == "a");
  BOOST_TEST(fused[1].numel == 0u);
  BOOST_TEST(fused[1].offset == 0u);
}

BOOST_AUTO_TEST_CASE(a_name_twice_is_refused_naming_it) {
  std::vector<float> x(3);
  std::string what;
  BOOST_TEST(
      (code_of(
           [&] {
             (void)fuse_order({{"w", {3}, x.data()}, {"b", {1}, x.data()}, {"w", {2}, x.data()}});
           },
           &what) == ErrorCode::invalid_argument));
  BOOST_TEST(mentions(what, "tensor 'w' is named twice"), what);
}

BOOST_AUTO_TEST_CASE(values_without_data_are_refused_naming_the_tensor) {
  std::string what;
  BOOST_TEST((code_of(
                  [&] {
                    (void)fuse_order({{"grad", {2, 2}, nullptr}});
                  },
                  &what) == ErrorCode::invalid_argument));
  BOOST_TEST(mentions(what, "tensor 'grad' has no data (a null pointer)"), what);
}

BOOST_AUTO_TEST_CASE(a_tensor_indices_cannot_address_is_refused) {
  std::vector<float> x(1);
  std::string what;
  // 2^16 x 2^16 = 2^32 values: one more than a tensor may have.
  BOOST_TEST((code_of(
                  [&] {
                    (void)fuse_order({{"huge", {65536, 65536}, x.data()}});
                  },
                  &what) == ErrorCode::invalid_argument));
  BOOST_TEST(mentions(what, "tensor 'huge' has more than 2^32 - 1 values"), what);
  // 2^32 - 1 values are allowed (only counted: nothing is read).
  const TensorViews most_views = {{"most", {65535, 65537}, x.data()}};
  const std::vector<FusedView> most = fuse_order(most_views);
  BOOST_TEST(most.at(0).numel == std::size_t{65535} * 65537);
}

// An out-of-place op's outputs, paired with its inputs by name: what
// outputs_for refuses (the message names the tensor and says why).
std::string refusal(const TensorViews& inputs, const TensorViews& outputs) {
  std::string what;
  const ErrorCode code = code_of(
      [&] { (void)outputs_for(fuse_order(inputs, "all_reduce"), outputs, "all_reduce"); }, &what);
  BOOST_TEST((code == ErrorCode::invalid_argument), what);
  return what;
}

BOOST_AUTO_TEST_CASE(outputs_are_paired_with_inputs_by_name) {
  std::vector<float> a(6), b(5), oa(6), ob(5);
  const TensorViews inputs = {{"fc.bias", {5}, b.data()}, {"conv.weight", {2, 3}, a.data()}};
  const TensorViews outputs = {{"conv.weight", {2, 3}, oa.data()}, {"fc.bias", {5}, ob.data()}};
  const std::vector<FusedView> fused = fuse_order(inputs, "all_reduce");
  const std::vector<const TensorView*> paired = outputs_for(fused, outputs, "all_reduce");
  BOOST_TEST_REQUIRE(paired.size() == 2u);
  BOOST_TEST(paired[0] == &outputs[0]);  // conv.weight first, in fused order
  BOOST_TEST(paired[1] == &outputs[1]);
  // Inputs may share memory (they are only read); empty tensors need none.
  const TensorViews same_input = {
      {"x", {3}, a.data()}, {"y", {3}, a.data() + 1}, {"z", {0}, nullptr}};
  const TensorViews apart = {{"x", {3}, oa.data()}, {"y", {3}, ob.data()}, {"z", {0}, nullptr}};
  BOOST_TEST(outputs_for(fuse_order(same_input), apart, "all_reduce").size() == 3u);
}

BOOST_AUTO_TEST_CASE(outputs_that_do_not_fit_their_inputs_are_refused_naming_the_tensor) {
  std::vector<float> in(16), out(16);
  const TensorViews inputs = {{"a", {4}, in.data()}, {"b", {2, 2}, in.data() + 4}};
  BOOST_TEST(mentions(refusal(inputs, {{"a", {4}, out.data()}}),
                      "all_reduce: tensor 'b' has no output of its name"));
  BOOST_TEST(mentions(
      refusal(inputs,
              {{"a", {4}, out.data()}, {"b", {2, 2}, out.data() + 4}, {"c", {1}, out.data() + 8}}),
      "tensor 'c' is an output without an input of its name"));
  BOOST_TEST(mentions(
      refusal(inputs,
              {{"0", {1}, out.data() + 9}, {"a", {4}, out.data()}, {"b", {2, 2}, out.data() + 4}}),
      "tensor '0' is an output without an input of its name"));
  BOOST_TEST(mentions(refusal(inputs, {{"a", {4}, out.data()}, {"b", {4}, out.data() + 4}}),
                      "tensor 'b' has an output of another shape ([4] for an input of [2x2])"));
  BOOST_TEST(mentions(refusal(inputs, {{"a", {4}, out.data()}, {"b", {2, 2}, nullptr}}),
                      "tensor 'b' has no data (a null pointer)"));
  BOOST_TEST(mentions(
      refusal(inputs,
              {{"a", {4}, out.data()}, {"b", {2, 2}, out.data() + 4}, {"a", {4}, out.data() + 8}}),
      "tensor 'a' is named twice"));
}

BOOST_AUTO_TEST_CASE(outputs_that_share_memory_are_refused_naming_both) {
  std::vector<float> in(16), out(16);
  const TensorViews inputs = {{"a", {4}, in.data()}, {"b", {4}, in.data() + 4}};
  // An output over its own input (in place), over another's input, over another output.
  BOOST_TEST(mentions(refusal(inputs, {{"a", {4}, in.data()}, {"b", {4}, out.data()}}),
                      "tensor 'a' has an output that shares memory with the input of 'a'"));
  BOOST_TEST(mentions(refusal(inputs, {{"a", {4}, out.data()}, {"b", {4}, in.data() + 3}}),
                      "tensor 'b' has an output that shares memory with the input of 'a'"));
  BOOST_TEST(mentions(refusal(inputs, {{"a", {4}, out.data()}, {"b", {4}, out.data() + 3}}),
                      "has an output that shares memory with the output of"));
  // An input that begins inside an output reaching past it.
  const TensorViews late = {{"a", {2}, out.data() + 2}, {"b", {4}, in.data()}};
  BOOST_TEST(mentions(refusal(late, {{"a", {2}, in.data() + 8}, {"b", {4}, out.data()}}),
                      "tensor 'b' has an output that shares memory with the input of 'a'"));
  // Touching is not sharing.
  const std::vector<const TensorView*> paired = outputs_for(
      fuse_order(inputs), {{"a", {4}, in.data() + 8}, {"b", {4}, in.data() + 12}}, "all_reduce");
  BOOST_TEST(paired.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
