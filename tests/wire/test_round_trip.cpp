// test_round_trip.cpp - encode_gradients / decode_gradients agree, for every
// method, and the header is versioned.
#define BOOST_TEST_MODULE wire
#include <algorithm>
#include <boost/test/unit_test.hpp>

#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wt = zring::wire_test;
using zring::CompressedMap;
using zring::ErrorCode;
namespace wire = zring::wire;

namespace {

// Several tensors of the method: a matrix, a scalar, a long vector.
CompressedMap sample(const std::string& method) {
  CompressedMap m;
  m.emplace("layer1.weight", wt::make_gradient(method, 32, {4, 8}, 1));
  m.emplace("layer1.bias", wt::make_gradient(method, 1, {}, 2));
  m["layer1.bias"].shape = {};  // a scalar
  m.emplace("embedding", wt::make_gradient(method, 5000, {1000, 5}, 3));
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(round_trip)

BOOST_AUTO_TEST_CASE(every_method_round_trips_field_by_field) {
  for (const std::string& method : wt::all_methods()) {
    BOOST_TEST_CONTEXT("method " << method) {
      const CompressedMap m = sample(method);
      const wt::Bytes bytes = wire::encode_gradients(m);
      BOOST_TEST(
          (wire::peek_message_type(bytes.data(), bytes.size()) == wire::MessageType::gradients));
      wt::check_equal(wire::decode_gradients(bytes.data(), bytes.size()), m);
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_tensor_round_trips) {
  for (const std::string& method : wt::all_methods()) {
    BOOST_TEST_CONTEXT("method " << method) {
      CompressedMap m;
      m.emplace("empty", wt::make_gradient(method, 0, {0}));
      m.emplace("zero_rows", wt::make_gradient(method, 0, {0, 7}));
      const wt::Bytes bytes = wire::encode_gradients(m);
      wt::check_equal(wire::decode_gradients(bytes.data(), bytes.size()), m);
    }
  }
}

BOOST_AUTO_TEST_CASE(mixed_methods_in_one_message) {
  CompressedMap m;
  for (const std::string& method : wt::all_methods())
    m.emplace("t." + method, wt::make_gradient(method, 300, {3, 100}));
  const wt::Bytes bytes = wire::encode_gradients(m);
  wt::check_equal(wire::decode_gradients(bytes.data(), bytes.size()), m);
}

BOOST_AUTO_TEST_CASE(empty_map_round_trips) {
  const wt::Bytes bytes = wire::encode_gradients({});
  BOOST_TEST(wire::decode_gradients(bytes.data(), bytes.size()).empty());
}

BOOST_AUTO_TEST_CASE(message_starts_with_version_then_type) {
  const wt::Bytes bytes = wire::encode_gradients({});
  // msgpack: fixarray of 3, positive fixint version, positive fixint type.
  BOOST_TEST_REQUIRE(bytes.size() >= 3u);
  BOOST_TEST(bytes[0] == 0x93);
  BOOST_TEST(bytes[1] == wire::kWireVersion);
  BOOST_TEST(bytes[2] == static_cast<std::uint8_t>(wire::MessageType::gradients));
}

BOOST_AUTO_TEST_CASE(payload_travels_verbatim) {
  const CompressedMap m = sample("quant:8");
  const wt::Bytes bytes = wire::encode_gradients(m);
  const auto& payload = m.at("embedding").payload;
  // The payload bytes appear unchanged (as a msgpack bin) in the message.
  const auto it = std::search(bytes.begin(), bytes.end(), payload.begin(), payload.end());
  BOOST_TEST((it != bytes.end()));
}

BOOST_AUTO_TEST_CASE(encode_refuses_error_feedback_methods) {
  CompressedMap m;
  m.emplace("w", wt::make_gradient("topk:2", 10));
  m["w"].method = zring::CompressionMethod::parse("ef:topk:2");
  BOOST_TEST(
      (wt::code_of([&] { (void)wire::encode_gradients(m); }) == ErrorCode::invalid_argument));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(version)

BOOST_AUTO_TEST_CASE(other_versions_are_unsupported) {
  const auto g = wt::make_gradient("none", 4);
  for (std::uint64_t version :
       {0ull, 1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull, 8ull, 9ull, 11ull, 255ull, 1ull << 40}) {
    BOOST_TEST_CONTEXT("version " << version) {
      const wt::Bytes bytes = wt::pack_message({wt::raw_entry("w", g)}, version);
      std::string message;
      BOOST_TEST((wt::code_of([&] { (void)wire::decode_gradients(bytes.data(), bytes.size()); },
                              &message) == ErrorCode::unsupported_version));
      BOOST_TEST(message.find(std::to_string(version)) != std::string::npos);
      BOOST_TEST((wt::code_of([&] { (void)wire::peek_message_type(bytes.data(), bytes.size()); }) ==
                  ErrorCode::unsupported_version));
    }
  }
}

BOOST_AUTO_TEST_CASE(version_is_judged_before_the_body) {
  // A future version may use a layout this one rejects (a map body, a
  // different length); it must still be reported as a version problem.
  const auto next = static_cast<std::uint8_t>(wire::kWireVersion + 1);
  const wt::Bytes future = {0x93, next, 0x01, 0x80};  // [next, 1, {}]
  BOOST_TEST((wt::code_of([&] { (void)wire::decode_gradients(future.data(), future.size()); }) ==
              ErrorCode::unsupported_version));
  const wt::Bytes truncated = {0xdd, 0x00, 0x00, 0x00, 0x09, next};  // array32 of 9: [next, ...
  BOOST_TEST((wt::code_of([&] {
                (void)wire::decode_gradients(truncated.data(), truncated.size());
              }) == ErrorCode::unsupported_version));
}

BOOST_AUTO_TEST_CASE(unknown_or_other_message_type_is_malformed) {
  const wt::Bytes bytes = wt::pack_message({}, zring::wire::kWireVersion, 99);
  std::string message;
  BOOST_TEST((wt::code_of([&] { (void)wire::decode_gradients(bytes.data(), bytes.size()); },
                          &message) == ErrorCode::malformed_message));
  BOOST_TEST(message.find("99") != std::string::npos);
  BOOST_TEST((wt::code_of([&] { (void)wire::peek_message_type(bytes.data(), bytes.size()); }) ==
              ErrorCode::malformed_message));
}

BOOST_AUTO_TEST_SUITE_END()
