// msgpack_value.hpp - a msgpack value tree the wire tests can take a valid
// message apart into, change one field of, and pack again: how most hostile
// messages of the ring and IPC tests are made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zring::wire_test {

struct Value {
  enum class Kind { uint, negative, str, bin, array, nil, boolean };
  using Array = std::vector<Value>;

  Kind kind = Kind::uint;
  std::uint64_t uint = 0;
  std::int64_t negative = 0;
  std::string str;
  std::vector<std::uint8_t> bin;
  Array items;

  // Implicit on purpose: tests write `message[3] = 7` or `= "name"`.
  Value(std::uint64_t u = 0) : uint(u) {}
  Value(std::string s) : kind(Kind::str), str(std::move(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(Array a) : kind(Kind::array), items(std::move(a)) {}
  static Value binary(std::vector<std::uint8_t> bytes) {
    Value v;
    v.kind = Kind::bin;
    v.bin = std::move(bytes);
    return v;
  }
  static Value boolean_of(bool b) {
    Value v;
    v.kind = Kind::boolean;
    v.uint = b ? 1 : 0;
    return v;
  }
  static Value nil() {
    Value v;
    v.kind = Kind::nil;
    return v;
  }
  static Value negative_int(std::int64_t n) {
    Value v;
    v.kind = Kind::negative;
    v.negative = n;
    return v;
  }

  Value& operator[](std::size_t i) { return items.at(i); }
};

// Throws std::runtime_error on bytes that are not one msgpack value of the
// kinds above (tests only parse what an encoder wrote).
Value parse_value(const std::vector<std::uint8_t>& bytes);
std::vector<std::uint8_t> pack_value(const Value& value);

}  // namespace zring::wire_test
