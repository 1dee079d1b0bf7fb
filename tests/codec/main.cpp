// main.cpp - the test_codec executable (Boost.Test supplies main).
#define BOOST_TEST_MODULE zring_codec
#include <boost/test/unit_test.hpp>
