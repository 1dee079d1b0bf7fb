// test_bell.cpp - the bell's datagrams (wire/bell.hpp): a request rung with
// its client's routing id round-trips, and every way a datagram can be
// wrong is named.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "wire/bell.hpp"
#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wire = zring::wire;
namespace wt = zring::wire_test;
using zring::ErrorCode;

namespace {

std::string error_of(const std::vector<std::uint8_t>& datagram) {
  std::string message;
  const ErrorCode code =
      wt::code_of([&] { (void)wire::decode_bell(datagram.data(), datagram.size()); }, &message);
  BOOST_TEST((code == ErrorCode::malformed_message), message);
  return message;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bell)

BOOST_AUTO_TEST_CASE(a_rung_request_round_trips_with_its_routing_id) {
  wire::Submit submit;
  submit.request = 41;
  submit.values = wire::ValuesIn::shared_buffer;
  submit.manifest.method = "quant:8";
  submit.manifest.tensors = {wire::TensorSpec{"w", {3}, 3}};
  const std::vector<std::uint8_t> message = wire::encode_ipc(submit);
  const std::string client("\x01\x00\xff id", 6);  // routing ids are bytes, 0 included
  const std::vector<std::uint8_t> datagram = wire::encode_bell(client, message);
  BOOST_TEST(datagram.size() == 1 + client.size() + message.size());
  const wire::BellRequest back = wire::decode_bell(datagram.data(), datagram.size());
  BOOST_TEST(back.client == client);
  BOOST_TEST(std::vector<std::uint8_t>(back.message.begin(), back.message.end()) == message);
  BOOST_TEST(
      (wire::decode_ipc(back.message.data(), back.message.size()) == wire::IpcMessage(submit)));
}

BOOST_AUTO_TEST_CASE(every_wrong_datagram_is_named) {
  BOOST_TEST(error_of({}) == "bell datagram: empty");
  BOOST_TEST(error_of({0, 1, 2}) == "bell datagram: a routing id of 0 bytes");
  BOOST_TEST(error_of({5, 'a', 'b'}) == "bell datagram: a routing id of 5 bytes in 2");
  BOOST_TEST(error_of({2, 'a', 'b'}) == "bell datagram: no IPC message after the routing id");
  std::vector<std::uint8_t> long_one(wire::kMaxBellBytes + 1, 1);
  BOOST_TEST(error_of(long_one) == "bell datagram: 65537 bytes, more than 65536");
  std::string message;
  BOOST_TEST((wt::code_of([] { (void)wire::encode_bell("", {1}); }, &message) ==
              ErrorCode::malformed_message));
  BOOST_TEST(message == "bell datagram: a routing id of 1..255 bytes is needed");
}

BOOST_AUTO_TEST_SUITE_END()
