// msgpack_value.cpp - msgpack <-> Value, for crafting test messages.
#include "msgpack_value.hpp"

#include <msgpack.hpp>
#include <stdexcept>

namespace zring::wire_test {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

Value from_object(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
      return Value(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER:
      return Value::negative_int(o.via.i64);
    case msgpack::type::NIL:
      return Value::nil();
    case msgpack::type::BOOLEAN:
      return Value::boolean_of(o.via.boolean);
    case msgpack::type::STR:
      return Value(std::string(o.via.str.ptr, o.via.str.size));
    case msgpack::type::BIN: {
      const auto* b = reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr);
      return Value::binary({b, b + o.via.bin.size});
    }
    case msgpack::type::ARRAY: {
      Value::Array items;
      for (std::uint32_t i = 0; i < o.via.array.size; ++i)
        items.push_back(from_object(o.via.array.ptr[i]));
      return Value(std::move(items));
    }
    default:
      throw std::runtime_error("msgpack_value: unexpected msgpack type");
  }
}

void pack_into(Packer& p, const Value& value) {
  switch (value.kind) {
    case Value::Kind::uint:
      p.pack_uint64(value.uint);
      return;
    case Value::Kind::negative:
      p.pack_int64(value.negative);
      return;
    case Value::Kind::str:
      p.pack_str(static_cast<std::uint32_t>(value.str.size()));
      p.pack_str_body(value.str.data(), static_cast<std::uint32_t>(value.str.size()));
      return;
    case Value::Kind::bin:
      p.pack_bin(static_cast<std::uint32_t>(value.bin.size()));
      p.pack_bin_body(reinterpret_cast<const char*>(value.bin.data()),
                      static_cast<std::uint32_t>(value.bin.size()));
      return;
    case Value::Kind::array:
      p.pack_array(static_cast<std::uint32_t>(value.items.size()));
      for (const Value& item : value.items) pack_into(p, item);
      return;
    case Value::Kind::nil:
      p.pack_nil();
      return;
    case Value::Kind::boolean:
      if (value.uint != 0)
        p.pack_true();
      else
        p.pack_false();
      return;
  }
}

}  // namespace

Value parse_value(const std::vector<std::uint8_t>& bytes) {
  const msgpack::object_handle h =
      msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return from_object(h.get());
}

std::vector<std::uint8_t> pack_value(const Value& value) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  pack_into(p, value);
  const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
  return {b, b + buffer.size()};
}

}  // namespace zring::wire_test
