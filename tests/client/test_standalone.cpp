// test_standalone.cpp - CompressedAllReduce without a daemon: the seed's
// world_size 1 round trip, the world_size > 1 refusal, construction, and
// the other forms of the op (in place, given up, out of place, SharedTensors).
#define BOOST_TEST_MODULE api
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstring>

#include "client_test_util.hpp"
#include "codec/codec.hpp"

namespace at = zring::api_test;
using zring::CompressedAllReduce;
using zring::CompressionMethod;
using zring::ErrorCode;
using zring::Tensor;
using zring::TensorMap;
using zring::TensorViews;

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

// In place, and all_reduce of a map given up (std::move), are the same op:
// the same bits for every method, the same refusal without peers.
BOOST_AUTO_TEST_CASE(in_place_gives_the_bits_of_all_reduce) {
  const TensorMap g = at::gradients(0);
  for (const std::string& text : at::methods()) {
    BOOST_TEST_CONTEXT("method " << text) {
      CompressedAllReduce copying(CompressionMethod::parse(text), 1);
      CompressedAllReduce in_place(CompressionMethod::parse(text), 1);
      CompressedAllReduce given(CompressionMethod::parse(text), 1);
      const TensorMap expected = copying.all_reduce(g);
      TensorMap values = g;
      in_place.all_reduce_in_place(values);
      TensorMap copy = g;
      const TensorMap given_up = given.all_reduce(std::move(copy));
      BOOST_TEST(given_up.size() == expected.size());
      for (const auto& [name, tensor] : expected) {
        BOOST_TEST(values.at(name).shape() == tensor.shape(), boost::test_tools::per_element());
        BOOST_TEST(same_bits(values.at(name).data(), tensor.data()), name);
        BOOST_TEST(given_up.at(name).shape() == tensor.shape(), boost::test_tools::per_element());
        BOOST_TEST(same_bits(given_up.at(name).data(), tensor.data()), name);
      }
    }
  }
  // A failing op leaves the values as they were.
  CompressedAllReduce three(CompressionMethod::none(), 3);
  TensorMap values = g;
  BOOST_TEST(
      (at::code_of([&] { three.all_reduce_in_place(values); }) == ErrorCode::no_communicator));
  BOOST_TEST(values == g);
  TensorMap copy = g;
  BOOST_TEST((at::code_of([&] { (void)three.all_reduce(std::move(copy)); }) ==
              ErrorCode::no_communicator));
}

// Out of place into the caller's memory: the bits of all_reduce, the inputs
// left as they were, nothing written when the op is refused.
BOOST_AUTO_TEST_CASE(out_of_place_gives_the_bits_of_all_reduce) {
  const TensorMap g = at::gradients(0);
  for (const std::string& text : at::methods()) {
    BOOST_TEST_CONTEXT("method " << text) {
      const TensorMap expected =
          CompressedAllReduce(CompressionMethod::parse(text), 1).all_reduce(g);
      TensorMap inputs = g;
      TensorMap outputs;
      TensorViews in, out;
      for (auto& [name, tensor] : inputs) {
        in.push_back({name, tensor.shape(), tensor.data().data()});
        auto& o =
            outputs.emplace(name, Tensor(std::vector<float>(tensor.numel(), -1.0f), tensor.shape()))
                .first->second;
        out.push_back({name, o.shape(), o.data().data()});
      }
      std::reverse(out.begin(), out.end());  // paired by name, not by position
      CompressedAllReduce(CompressionMethod::parse(text), 1).all_reduce(in, out);
      BOOST_TEST((inputs == g));
      for (const auto& [name, tensor] : expected)
        BOOST_TEST(same_bits(outputs.at(name).data(), tensor.data()), name);
    }
  }
  CompressedAllReduce three(CompressionMethod::none(), 3);
  std::vector<float> x(4, 2.0f), y(4, 7.0f);
  BOOST_TEST((at::code_of([&] {
                three.all_reduce({{"x", {4}, x.data()}}, {{"x", {4}, y.data()}});
              }) == ErrorCode::no_communicator));
  BOOST_TEST((y == std::vector<float>(4, 7.0f)));
  CompressedAllReduce one(CompressionMethod::none(), 1);
  std::string what;
  BOOST_TEST((at::code_of(
                  [&] {
                    one.all_reduce({{"x", {4}, x.data()}}, {{"x", {4}, x.data()}});
                  },
                  &what) == ErrorCode::invalid_argument));
  BOOST_TEST(at::mentions(what,
                          "all_reduce: tensor 'x' has an output that shares memory with the "
                          "input of 'x'"),
             what);
}

BOOST_AUTO_TEST_CASE(shared_tensors_give_the_bits_of_all_reduce) {
  const TensorMap g = at::gradients(0);
  zring::TensorShapes shapes;
  for (const auto& [name, tensor] : g) shapes.emplace(name, tensor.shape());
  for (const std::string& text : at::methods()) {
    BOOST_TEST_CONTEXT("method " << text) {
      CompressedAllReduce copying(CompressionMethod::parse(text), 1);
      CompressedAllReduce sharing(CompressionMethod::parse(text), 1);
      zring::SharedTensors tensors = sharing.make_shared_tensors(shapes);
      BOOST_TEST(!tensors.zero_copy());       // standalone: ordinary memory
      for (int step = 0; step < 2; ++step) {  // twice: error feedback carries over
        const TensorMap expected = copying.all_reduce(g);
        tensors.assign(g);
        sharing.all_reduce_in_place(tensors);
        for (const auto& [name, tensor] : expected) {
          BOOST_TEST(tensors.shape(name) == tensor.shape(), boost::test_tools::per_element());
          const zring::Span<const float> got = tensors[name];
          BOOST_TEST(same_bits(std::vector<float>(got.begin(), got.end()), tensor.data()), name);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(shared_tensors_layout_and_bad_use) {
  CompressedAllReduce ar(CompressionMethod::none(), 1);
  zring::SharedTensors t = ar.make_shared_tensors({{"b", {2, 3}}, {"a", {4}}, {"s", {}}});
  BOOST_TEST(t.numel() == 11u);
  BOOST_TEST(t["a"].size() == 4u);
  BOOST_TEST(t["b"].size() == 6u);
  BOOST_TEST(t["s"].size() == 1u);
  // Name order, one after another, zero-filled.
  BOOST_TEST(t["a"].data() == t.values().data());
  BOOST_TEST(t["b"].data() == t.values().data() + 4);
  BOOST_TEST(t["s"].data() == t.values().data() + 10);
  for (float v : t.values()) BOOST_TEST(v == 0.0f);
  // Copies share the memory.
  zring::SharedTensors copy = t;
  copy["a"][1] = 5.0f;
  BOOST_TEST(t["a"][1] == 5.0f);
  BOOST_TEST(t.to_tensors().at("a").data() == std::vector<float>({0, 5, 0, 0}),
             boost::test_tools::per_element());
  // Bad names and sizes are refused and change nothing.
  BOOST_TEST((at::code_of([&] { (void)t["c"]; }) == ErrorCode::missing_tensor));
  BOOST_TEST((at::code_of([&] { (void)t.shape("c"); }) == ErrorCode::missing_tensor));
  TensorMap wrong = t.to_tensors();
  wrong.at("b") = Tensor(std::vector<float>(5, 1.0f));
  wrong.at("a") = Tensor(std::vector<float>(4, 2.0f));
  BOOST_TEST((at::code_of([&] { t.assign(wrong); }) == ErrorCode::size_mismatch));
  BOOST_TEST(t["a"][0] == 0.0f);
  wrong.erase("b");
  BOOST_TEST((at::code_of([&] { t.assign(wrong); }) == ErrorCode::missing_tensor));
  wrong.emplace("z", Tensor(std::vector<float>(1, 1.0f)));
  BOOST_TEST((at::code_of([&] { t.assign(wrong); }) == ErrorCode::missing_tensor));
  BOOST_TEST(t["a"][0] == 0.0f);
  // Too many values to address is refused.
  const std::size_t huge = std::size_t{1} << 62;
  BOOST_TEST((at::code_of([&] {
                (void)ar.make_shared_tensors({{"x", {huge, 8}}});
              }) == ErrorCode::invalid_argument));
  // No tensors at all: an empty op.
  zring::SharedTensors none;
  BOOST_TEST(none.numel() == 0u);
  BOOST_TEST(none.values().empty());
  ar.all_reduce_in_place(none);
  // A failing op leaves the values as they were.
  CompressedAllReduce three(CompressionMethod::none(), 3);
  zring::SharedTensors kept = three.make_shared_tensors({{"a", {3}}});
  kept["a"][2] = 7.0f;
  BOOST_TEST((at::code_of([&] { three.all_reduce_in_place(kept); }) == ErrorCode::no_communicator));
  BOOST_TEST(kept["a"][2] == 7.0f);
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

BOOST_AUTO_TEST_CASE(broadcast_alone_changes_nothing_and_refuses_what_it_cannot_do) {
  CompressedAllReduce one(CompressionMethod::parse("quant:2"), 1);
  const float nan_with_payload = [] {
    const std::uint32_t bits = 0x7fc01234u;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }();
  TensorMap values{{"w", Tensor({nan_with_payload, -0.0f, 1.5f}, {3})}};
  const std::vector<float> before = values.at("w").data();
  one.broadcast(values, 0);  // world_size 1: this rank is the root
  BOOST_TEST(same_bits(values.at("w").data(), before));
  zring::TensorViews views{{"w", {3}, values.at("w").data().data()}};
  one.broadcast(views, 0);
  BOOST_TEST(same_bits(values.at("w").data(), before));

  std::string what;
  BOOST_TEST(
      (at::code_of([&] { one.broadcast(values, 1); }, &what) == ErrorCode::invalid_argument));
  BOOST_TEST(what == "broadcast: root 1 is not a rank: world_size() is 1, so root must be 0..0");
  zring::TensorViews twice{{"w", {3}, values.at("w").data().data()},
                           {"w", {3}, values.at("w").data().data()}};
  BOOST_TEST((at::code_of([&] { one.broadcast(twice, 0); }, &what) == ErrorCode::invalid_argument));
  BOOST_TEST(at::mentions(what, "'w'"), what);
  TensorMap resized = values;
  resized.at("w").data().push_back(1.0f);  // values that disagree with the shape
  BOOST_TEST(
      (at::code_of([&] { one.broadcast(resized, 0); }, &what) == ErrorCode::invalid_argument));
  BOOST_TEST(at::mentions(what, "'w'"), what);

  CompressedAllReduce three(CompressionMethod::none(), 3);
  BOOST_TEST(
      (at::code_of([&] { three.broadcast(values, 2); }, &what) == ErrorCode::no_communicator));
  BOOST_TEST(at::mentions(what, "broadcast: this CompressedAllReduce has world_size 3"), what);
  BOOST_TEST((at::code_of([&] { three.broadcast(values, 3); }) == ErrorCode::invalid_argument));
  BOOST_TEST(same_bits(values.at("w").data(), before));
}

BOOST_AUTO_TEST_SUITE_END()
