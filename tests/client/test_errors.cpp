// test_errors.cpp - the error codes' numbers are part of the protocol:
// they are pinned here, and kErrorCodes holds each code once, in order.
// And the public API throws zring::Error, whatever a lower layer throws.
#include <boost/test/unit_test.hpp>
#include <set>
#include <string>
#include <zring/compressed_all_reduce.hpp>
#include <zring/error.hpp>

using zring::ErrorCode;

BOOST_AUTO_TEST_SUITE(error_codes)

BOOST_AUTO_TEST_CASE(numbers_never_change) {
  // Appending a code is fine; changing a line here breaks every older peer.
  const std::pair<ErrorCode, std::uint32_t> pinned[] = {
      {ErrorCode::invalid_argument, 0},
      {ErrorCode::size_mismatch, 1},
      {ErrorCode::count_mismatch, 2},
      {ErrorCode::missing_tensor, 3},
      {ErrorCode::no_communicator, 4},
      {ErrorCode::malformed_message, 5},
      {ErrorCode::unsupported_version, 6},
      {ErrorCode::config_invalid, 7},
      {ErrorCode::manifest_mismatch, 8},
      {ErrorCode::timeout, 9},
      {ErrorCode::peer_lost, 10},
      {ErrorCode::connection_failed, 11},
      {ErrorCode::aborted, 12},
      {ErrorCode::resource_limit, 13},
      {ErrorCode::internal, 14},
      {ErrorCode::system_error, 15},
      {ErrorCode::ring_changed, 16},
  };
  for (const auto& [code, number] : pinned) {
    BOOST_TEST_CONTEXT(zring::to_string(code)) {
      BOOST_TEST(static_cast<std::uint32_t>(code) == number);
      BOOST_TEST(zring::is_error_code(number));
    }
  }
  BOOST_TEST(std::size(zring::kErrorCodes) == std::size(pinned));
}

BOOST_AUTO_TEST_CASE(the_list_holds_each_code_once_in_number_order_with_its_own_name) {
  std::set<std::string> names;
  std::uint32_t previous = 0;
  bool first = true;
  for (const ErrorCode code : zring::kErrorCodes) {
    const auto number = static_cast<std::uint32_t>(code);
    BOOST_TEST_CONTEXT("code " << number) {
      BOOST_TEST((first || number > previous));
      BOOST_TEST(std::string(zring::to_string(code)) != "unknown");
      BOOST_TEST(names.insert(zring::to_string(code)).second);
    }
    previous = number;
    first = false;
  }
  BOOST_TEST(!zring::is_error_code(previous + 1));
  BOOST_TEST(std::string(zring::to_string(static_cast<ErrorCode>(previous + 1))) == "unknown");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(api_boundary)

// ZeroMQ refuses these endpoints with its own exception type; the caller
// gets a zring::Error naming the endpoint.
BOOST_AUTO_TEST_CASE(connect_to_an_endpoint_zeromq_cannot_use_is_invalid_argument_naming_it) {
  for (const std::string endpoint : {"bogus://somewhere", "tcp://127.0.0.1", "tcp://:notaport"}) {
    BOOST_TEST_CONTEXT(endpoint) {
      try {
        (void)zring::CompressedAllReduce::connect(endpoint, zring::CompressionMethod::none());
        BOOST_ERROR("connect succeeded");
      } catch (const zring::Error& e) {
        BOOST_TEST(e.code() == ErrorCode::invalid_argument);
        const std::string text = e.what();
        BOOST_TEST(text.find("connect: '" + endpoint +
                             "' is not an endpoint ZeroMQ can connect to (") == 0u,
                   text);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
