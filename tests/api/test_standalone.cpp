// test_standalone.cpp - CompressedAllReduce without a daemon: the seed's
// world_size 1 round trip, the world_size > 1 refusal, construction.
#define BOOST_TEST_MODULE api
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "api_test_util.hpp"
#include "codec/codec.hpp"

namespace at = zring::api_test;
using zring::CompressedAllReduce;
using zring::CompressionMethod;
using zring::ErrorCode;
using zring::Tensor;
using zring::TensorMap;

namespace {

// D(C(g)) straight from the codec, with the seed the client uses at step 0.
std::vector<float> codec_round_trip(const CompressionMethod& method, const std::string& name,
                                    const Tensor& t) {
  const auto codec = zring::codec::make_codec(method.base());
  const zring::codec::CodecContext ctx{zring::codec::tensor_seed(0, name)};
  return at::scatter(codec->compress(t.data().data(), t.numel(), ctx));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(standalone)

BOOST_AUTO_TEST_CASE(world_one_is_the_codec_round_trip) {
  const TensorMap g = at::gradients(0);
  for (const std::string& text : at::methods()) {
    BOOST_TEST_CONTEXT("method " << text) {
      const CompressionMethod method = CompressionMethod::parse(text);
      CompressedAllReduce ar(method, 1);
      const TensorMap out = ar.all_reduce(g);
      BOOST_TEST_REQUIRE(out.size() == g.size());
      for (const auto& [name, tensor] : g) {
        BOOST_TEST_CONTEXT("tensor " << name) {
          BOOST_TEST_REQUIRE(out.count(name) == 1u);
          BOOST_TEST(out.at(name).shape() == tensor.shape(), boost::test_tools::per_element());
          BOOST_TEST(same_bits(out.at(name).data(), codec_round_trip(method, name, tensor)));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(lossy_methods_change_the_values) {
  // Guards the test above against comparing the input with itself.
  const TensorMap g = at::gradients(0);
  CompressedAllReduce ar(CompressionMethod::topk(5), 1);
  BOOST_TEST(ar.all_reduce(g).at("fc.bias").data() != g.at("fc.bias").data());
  CompressedAllReduce exact(CompressionMethod::none(), 1);
  BOOST_TEST(exact.all_reduce(g).at("fc.bias").data() == g.at("fc.bias").data(),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(in_place_gives_the_bits_of_all_reduce) {
  const TensorMap g = at::gradients(0);
  for (const std::string& text : at::methods()) {
    BOOST_TEST_CONTEXT("method " << text) {
      CompressedAllReduce copying(CompressionMethod::parse(text), 1);
      CompressedAllReduce in_place(CompressionMethod::parse(text), 1);
      const TensorMap expected = copying.all_reduce(g);
      TensorMap values = g;
      in_place.all_reduce_in_place(values);
      for (const auto& [name, tensor] : expected) {
        BOOST_TEST(values.at(name).shape() == tensor.shape(), boost::test_tools::per_element());
        BOOST_TEST(same_bits(values.at(name).data(), tensor.data()), name);
      }
    }
  }
  // A failing op leaves the values as they were.
  CompressedAllReduce three(CompressionMethod::none(), 3);
  TensorMap values = g;
  BOOST_TEST((at::code_of([&] { three.all_reduce_in_place(values); }) == ErrorCode::no_communicator));
  BOOST_TEST(values == g);
}

BOOST_AUTO_TEST_CASE(world_above_one_without_peers_is_refused) {
  for (std::size_t world : {2u, 3u, 64u}) {
    CompressedAllReduce ar(CompressionMethod::quantization(8), world);
    std::string what;
    BOOST_TEST((at::code_of([&] { (void)ar.all_reduce(at::gradients(0)); }, &what) ==
                ErrorCode::no_communicator));
    BOOST_TEST(at::mentions(what, "connect("));
    BOOST_TEST(at::mentions(what, "all_reduce_with_peers"));
    BOOST_TEST(at::mentions(what, std::to_string(world)));
  }
}

BOOST_AUTO_TEST_CASE(world_size_zero_is_invalid) {
  BOOST_TEST((at::code_of([] { CompressedAllReduce ar(CompressionMethod::none(), 0); }) ==
              ErrorCode::invalid_argument));
}

BOOST_AUTO_TEST_CASE(empty_maps) {
  CompressedAllReduce one(CompressionMethod::signsgd(), 1);
  BOOST_TEST(one.all_reduce({}).empty());
  BOOST_TEST(one.compress_for_transmission({}).empty());
  CompressedAllReduce three(CompressionMethod::signsgd(), 3);
  BOOST_TEST(three.all_reduce_with_peers({}, {{}, {}}).empty());
}

BOOST_AUTO_TEST_CASE(observers) {
  const CompressionMethod method = CompressionMethod::parse("ef:topk:1%");
  CompressedAllReduce ar(method, 4);
  BOOST_TEST(ar.world_size() == 4u);
  BOOST_TEST(ar.rank() == 0u);
  BOOST_TEST(!ar.connected());
  BOOST_TEST((ar.method() == method));
}

BOOST_AUTO_TEST_CASE(traffic_counts_payloads_and_dense_cost) {
  CompressedAllReduce ar(CompressionMethod::quantization(8), 1);
  BOOST_TEST(ar.traffic().ops == 0u);
  const TensorMap g = at::gradients(0);
  (void)ar.all_reduce(g);
  (void)ar.all_reduce(g);
  // The same bytes a fresh object's compress_for_transmission produces.
  CompressedAllReduce probe(CompressionMethod::quantization(8), 1);
  std::uint64_t payload = 0;
  for (const auto& [name, c] : probe.compress_for_transmission(g)) payload += c.payload_bytes();
  const auto traffic = ar.traffic();
  BOOST_TEST(traffic.ops == 2u);
  BOOST_TEST(traffic.wire_bytes == 2 * payload);
  BOOST_TEST(traffic.dense_bytes == 2u * (24 + 50 + 1) * sizeof(float));
  BOOST_TEST(traffic.wire_bytes < traffic.dense_bytes);
}

BOOST_AUTO_TEST_CASE(non_finite_values_propagate) {
  TensorMap g;
  g.emplace("w", Tensor({1.0f, std::nanf(""), -INFINITY, 2.0f}));
  CompressedAllReduce ar(CompressionMethod::none(), 1);
  const auto out = ar.all_reduce(g).at("w").data();
  BOOST_TEST(std::isnan(out[1]));
  BOOST_TEST(std::isinf(out[2]));
  BOOST_TEST(out[3] == 2.0f);
}

BOOST_AUTO_TEST_CASE(moves) {
  CompressedAllReduce a(CompressionMethod::fp16(), 1);
  CompressedAllReduce b(std::move(a));
  BOOST_TEST(b.world_size() == 1u);
  BOOST_TEST(b.all_reduce(at::gradients(0)).size() == 3u);
  CompressedAllReduce c(CompressionMethod::none(), 5);
  c = std::move(b);
  BOOST_TEST(c.world_size() == 1u);
  // A moved-from object refuses clearly instead of crashing.
  BOOST_TEST((at::code_of([&] { (void)b.all_reduce({}); }) == ErrorCode::invalid_argument));
}

BOOST_AUTO_TEST_CASE(tensor_whose_data_disagrees_with_its_shape) {
  TensorMap g;
  g.emplace("w", Tensor(std::vector<float>(6, 1.0f), {2, 3}));
  g.at("w").data().push_back(1.0f);  // data() is mutable: now 7 values, shape 2x3
  CompressedAllReduce ar(CompressionMethod::none(), 1);
  std::string what;
  BOOST_TEST((at::code_of([&] { (void)ar.all_reduce(g); }, &what) == ErrorCode::invalid_argument));
  BOOST_TEST(at::mentions(what, "'w'"));
}

BOOST_AUTO_TEST_SUITE_END()
