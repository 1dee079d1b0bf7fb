// wire_test_util.hpp - building valid gradients and hand-made (hostile)
// messages for the wire tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>
#include <zring/tensor.hpp>

#include "support/error_code.hpp"
#include "wire/wire.hpp"

namespace zring::wire_test {

using Bytes = std::vector<std::uint8_t>;

// Every method text the wire must carry (none of them with error feedback).
const std::vector<std::string>& all_methods();

// A real compressed gradient: n deterministic values of the given shape
// (shape {n} when empty), compressed by the method's codec.
CompressedGradient make_gradient(const std::string& method, std::size_t n,
                                 std::vector<std::size_t> shape = {}, std::uint64_t seed = 7);

// One entry of a gradients message, as raw fields (anything goes).
struct RawEntry {
  std::string name;
  std::string method;
  std::vector<std::uint64_t> shape;
  std::uint64_t original_size = 0;
  Bytes payload;
};
RawEntry raw_entry(const std::string& name, const CompressedGradient& g);

// [version, type, [entries...]] packed as given.
Bytes pack_message(const std::vector<RawEntry>& entries,
                   std::uint64_t version = zring::wire::kWireVersion, std::uint64_t type = 1);

// The code of the zring::Error a call throws (it fails the test when the
// call throws nothing): tests/support.
using zring::testing::code_of;

// Field-by-field equality of two compressed maps (payload bytes included);
// reports the first difference through Boost.Test.
void check_equal(const CompressedMap& got, const CompressedMap& want);

// What every successfully decoded gradient must satisfy.
void check_valid(const CompressedMap& m);

}  // namespace zring::wire_test
