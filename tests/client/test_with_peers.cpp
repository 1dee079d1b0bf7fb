// test_with_peers.cpp - all_reduce_with_peers: the true average of what each
// rank compressed, and every way the peers' contributions can be wrong.
#include <boost/test/unit_test.hpp>

#include "client_test_util.hpp"

namespace at = zring::api_test;
using zring::CompressedAllReduce;
using zring::CompressedMap;
using zring::CompressionMethod;
using zring::ErrorCode;
using zring::TensorMap;

namespace {

// Rank r's contribution as its own standalone object would send it.
CompressedMap transmitted(const CompressionMethod& method, std::size_t world, int rank) {
  CompressedAllReduce ar(method, world);
  return ar.compress_for_transmission(at::gradients(rank));
}

// Three ranks' valid contributions of the same tensors, for the error cases.
struct ThreeRanks {
  CompressionMethod method = CompressionMethod::topk(5);
  TensorMap mine = at::gradients(0);
  std::vector<CompressedMap> peers{transmitted(method, 3, 1), transmitted(method, 3, 2)};

  ErrorCode error(std::string* what) {
    CompressedAllReduce ar(method, 3);
    return at::code_of([&] { (void)ar.all_reduce_with_peers(mine, peers); }, what);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(with_peers)

BOOST_AUTO_TEST_CASE(result_is_the_average_of_every_ranks_compressed_gradient) {
  for (const std::string& text : at::methods()) {
    BOOST_TEST_CONTEXT("method " << text) {
      const CompressionMethod method = CompressionMethod::parse(text);
      std::vector<CompressedMap> sent;
      for (int r = 0; r < 3; ++r) sent.push_back(transmitted(method, 3, r));

      CompressedAllReduce rank0(method, 3);
      const TensorMap out = rank0.all_reduce_with_peers(at::gradients(0), {sent[1], sent[2]});
      const TensorMap local = at::gradients(0);
      BOOST_TEST_REQUIRE(out.size() == local.size());
      for (const auto& [name, tensor] : local) {
        BOOST_TEST_CONTEXT("tensor " << name) {
          const auto d0 = at::scatter(sent[0].at(name));
          const auto d1 = at::scatter(sent[1].at(name));
          const auto d2 = at::scatter(sent[2].at(name));
          std::vector<float> want(d0.size());
          for (std::size_t i = 0; i < want.size(); ++i) want[i] = (d0[i] + d1[i] + d2[i]) / 3.0f;
          BOOST_TEST(out.at(name).data() == want, boost::test_tools::per_element());
          BOOST_TEST(out.at(name).shape() == tensor.shape(), boost::test_tools::per_element());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(average_is_not_a_rescaled_local_gradient) {
  const CompressionMethod none = CompressionMethod::none();
  CompressedAllReduce rank0(none, 2);
  const TensorMap out = rank0.all_reduce_with_peers(at::gradients(0), {transmitted(none, 2, 1)});
  const TensorMap rank0_grads = at::gradients(0), rank1_grads = at::gradients(1);
  const auto& mine = rank0_grads.at("fc.bias").data();
  const auto& theirs = rank1_grads.at("fc.bias").data();
  for (std::size_t i = 0; i < mine.size(); ++i)
    BOOST_TEST(out.at("fc.bias").data()[i] == (mine[i] + theirs[i]) / 2.0f);
}

BOOST_AUTO_TEST_CASE(world_one_with_no_peers_is_the_round_trip) {
  const CompressionMethod q = CompressionMethod::quantization(4);
  CompressedAllReduce a(q, 1), b(q, 1);
  BOOST_TEST((a.all_reduce_with_peers(at::gradients(0), {}) == b.all_reduce(at::gradients(0))));
}

BOOST_AUTO_TEST_CASE(count_mismatch) {
  ThreeRanks t;
  t.peers.pop_back();
  std::string what;
  BOOST_TEST((t.error(&what) == ErrorCode::count_mismatch));
  BOOST_TEST(at::mentions(what, "world_size is 3"));
  BOOST_TEST(at::mentions(what, "= 2"));

  CompressedAllReduce one(t.method, 1);
  BOOST_TEST((at::code_of([&] { (void)one.all_reduce_with_peers(t.mine, {t.peers[0]}); }) ==
              ErrorCode::count_mismatch));
}

BOOST_AUTO_TEST_CASE(size_mismatch) {
  ThreeRanks t;
  t.peers[1] = CompressedMap{};
  for (const auto& [name, tensor] : t.mine) {
    std::vector<float> x(tensor.numel() + (name == "fc.bias" ? 1 : 0), 0.5f);
    zring::TensorMap one;
    one.emplace(name, zring::Tensor(x));
    t.peers[1].merge(CompressedAllReduce(t.method, 3).compress_for_transmission(one));
  }
  std::string what;
  BOOST_TEST((t.error(&what) == ErrorCode::size_mismatch));
  BOOST_TEST(at::mentions(what, "'fc.bias'"));
  BOOST_TEST(at::mentions(what, "peers[1]"));
  BOOST_TEST(at::mentions(what, "51"));
  BOOST_TEST(at::mentions(what, "50"));
}

BOOST_AUTO_TEST_CASE(missing_tensor) {
  ThreeRanks t;
  t.peers[0].erase("scale");
  std::string what;
  BOOST_TEST((t.error(&what) == ErrorCode::missing_tensor));
  BOOST_TEST(at::mentions(what, "'scale'"));
  BOOST_TEST(at::mentions(what, "peers[0]"));
}

BOOST_AUTO_TEST_CASE(extra_tensor) {
  ThreeRanks t;
  t.peers[1]["zz.extra"] = t.peers[1].at("scale");
  std::string what;
  BOOST_TEST((t.error(&what) == ErrorCode::missing_tensor));
  BOOST_TEST(at::mentions(what, "'zz.extra'"));
  BOOST_TEST(at::mentions(what, "peers[1]"));
}

BOOST_AUTO_TEST_CASE(inconsistent_peer_views) {
  using Corrupt = void (*)(zring::CompressedGradient&);
  const Corrupt corruptions[] = {
      [](zring::CompressedGradient& g) { g.indices.push_back(1); },          // counts differ
      [](zring::CompressedGradient& g) { g.indices.back() = 50; },           // index == size
      [](zring::CompressedGradient& g) { g.indices.back() = 0xFFFFFFFFu; },  // far out
      [](zring::CompressedGradient& g) { g.indices.clear(); },               // dense, too short
  };
  for (std::size_t c = 0; c < std::size(corruptions); ++c) {
    BOOST_TEST_CONTEXT("corruption " << c) {
      ThreeRanks t;  // topk:5: a sparse view of 5 (index, value) pairs
      corruptions[c](t.peers[0].at("fc.bias"));
      std::string what;
      BOOST_TEST((t.error(&what) == ErrorCode::malformed_message));
      BOOST_TEST(at::mentions(what, "'fc.bias'"));
      BOOST_TEST(at::mentions(what, "peers[0]"));
    }
  }
  ThreeRanks dense;  // a dense view with one value too many
  dense.method = CompressionMethod::none();
  dense.peers = {transmitted(dense.method, 3, 1), transmitted(dense.method, 3, 2)};
  dense.peers[1].at("conv.weight").values.push_back(0.0f);
  BOOST_TEST((dense.error(nullptr) == ErrorCode::malformed_message));
}

BOOST_AUTO_TEST_CASE(a_refused_call_changes_no_state) {
  // randomk draws from the step; a call that throws must not advance it, so
  // the next call still matches the peers' step 0.
  const CompressionMethod method = CompressionMethod::randomk(3);
  CompressedAllReduce ar(method, 2);
  const std::vector<CompressedMap> wrong{CompressedMap{}};
  BOOST_TEST((at::code_of([&] { (void)ar.all_reduce_with_peers(at::gradients(0), wrong); }) ==
              ErrorCode::missing_tensor));
  BOOST_TEST(ar.traffic().ops == 0u);
  const CompressedMap sent = ar.compress_for_transmission(at::gradients(0));
  const CompressedMap fresh = transmitted(method, 2, 0);
  BOOST_TEST(sent.at("fc.bias").indices == fresh.at("fc.bias").indices,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
