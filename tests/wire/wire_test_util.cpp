// wire_test_util.cpp - helpers of the wire tests (msgpack used only to craft
// input bytes, including ones the encoder would never produce).
#include "wire_test_util.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <msgpack.hpp>

#include "codec/codec.hpp"

namespace zring::wire_test {

const std::vector<std::string>& all_methods() {
  static const std::vector<std::string> methods = {
      "none",          "fp16",    "bf16",    "topk:5",  "topk:10%", "randomk:7", "randomk:25%",
      "threshold:0.5", "quant:1", "quant:4", "quant:8", "quant:16", "sign"};
  return methods;
}

CompressedGradient make_gradient(const std::string& method, std::size_t n,
                                 std::vector<std::size_t> shape, std::uint64_t seed) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i + seed)) * static_cast<float>(1 + i % 5);
  const auto codec = codec::make_codec(CompressionMethod::parse(method));
  CompressedGradient g = codec->compress(x.data(), n, codec::CodecContext{seed});
  g.shape = shape.empty() ? std::vector<std::size_t>{n} : std::move(shape);
  return g;
}

RawEntry raw_entry(const std::string& name, const CompressedGradient& g) {
  RawEntry e{name, g.method.to_string(), {}, g.original_size, g.payload};
  for (std::size_t extent : g.shape) e.shape.push_back(extent);
  return e;
}

Bytes pack_message(const std::vector<RawEntry>& entries, std::uint64_t version,
                   std::uint64_t type) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(3);
  p.pack_uint64(version);
  p.pack_uint64(type);
  p.pack_array(static_cast<std::uint32_t>(entries.size()));
  for (const RawEntry& e : entries) {
    p.pack_array(5);
    p.pack(e.name);
    p.pack(e.method);
    p.pack_array(static_cast<std::uint32_t>(e.shape.size()));
    for (std::uint64_t extent : e.shape) p.pack_uint64(extent);
    p.pack_uint64(e.original_size);
    p.pack_bin(static_cast<std::uint32_t>(e.payload.size()));
    p.pack_bin_body(reinterpret_cast<const char*>(e.payload.data()),
                    static_cast<std::uint32_t>(e.payload.size()));
  }
  const auto* begin = reinterpret_cast<const std::uint8_t*>(buffer.data());
  return Bytes(begin, begin + buffer.size());
}

namespace {
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
}  // namespace

void check_equal(const CompressedMap& got, const CompressedMap& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (const auto& [name, w] : want) {
    BOOST_TEST_CONTEXT("tensor " << name) {
      BOOST_TEST_REQUIRE(got.count(name) == 1u);
      const CompressedGradient& g = got.at(name);
      BOOST_TEST(g.method.to_string() == w.method.to_string());
      BOOST_TEST((g.method == w.method));
      BOOST_TEST(g.original_size == w.original_size);
      BOOST_TEST(g.shape == w.shape, boost::test_tools::per_element());
      BOOST_TEST(g.indices == w.indices, boost::test_tools::per_element());
      BOOST_TEST(same_bits(g.values, w.values));
      BOOST_TEST(g.value_bits == w.value_bits);
      BOOST_TEST(g.compression_ratio == w.compression_ratio);
      BOOST_TEST(g.seed == w.seed);
      BOOST_TEST(g.payload == w.payload, boost::test_tools::per_element());
    }
  }
}

void check_valid(const CompressedMap& m) {
  for (const auto& [name, g] : m) {
    BOOST_TEST_CONTEXT("tensor " << name) {
      BOOST_TEST(!name.empty());
      BOOST_TEST(!g.method.has_error_feedback());
      BOOST_TEST(shape_numel(g.shape) == g.original_size);
      const bool dense = g.indices.empty() && g.values.size() == g.original_size;
      bool sparse = g.indices.size() == g.values.size();
      for (std::uint32_t i : g.indices) sparse = sparse && i < g.original_size;
      BOOST_TEST((dense || sparse));
      // The payload decodes again to the same view.
      CompressedGradient again;
      again.method = g.method;
      again.original_size = g.original_size;
      again.payload = g.payload;
      codec::make_codec(g.method)->decode(again);
      BOOST_TEST(again.indices == g.indices, boost::test_tools::per_element());
      BOOST_TEST(same_bits(again.values, g.values));
    }
  }
}

}  // namespace zring::wire_test
