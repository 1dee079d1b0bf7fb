// Shared buffers that cannot be made say why, with the code docs/errors.md
// gives: no room behind the buffer is a limit the operator can raise
// (resource_limit), a place the system refuses is system_error; neither is
// a connection problem, and no buffer is left half made.
#include <sys/resource.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <zring/error.hpp>

#include "transport/shared_region.hpp"

using namespace zring;
using zring::transport::SharedRegion;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/zring-region-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  BOOST_REQUIRE(dir != nullptr);
  return dir;
}

// The error SharedRegion::create throws, or none.
std::optional<Error> create_error(const std::string& path, std::size_t bytes) {
  try {
    (void)SharedRegion::create(path, bytes);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_region)

BOOST_AUTO_TEST_CASE(a_directory_that_is_not_there_is_a_system_error_naming_the_buffer) {
  const std::string path = "/tmp/zring-no-such-dir-" + std::to_string(::getpid()) + "/buffer";
  const std::optional<Error> e = create_error(path, 4096);
  BOOST_REQUIRE(e);
  BOOST_TEST((e->code() == ErrorCode::system_error));
  BOOST_TEST(std::string(e->what()) ==
             "shared buffer " + path + ": create: No such file or directory");
}

// A file-size limit stands in for a full /dev/shm (both refuse the pages
// the buffer needs when it is made; without the limit, the first write
// into a page with no room behind it would kill the writer with SIGBUS).
BOOST_AUTO_TEST_CASE(no_room_for_the_buffer_is_a_resource_limit_and_leaves_no_file) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/buffer";
  struct rlimit before {};
  BOOST_REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = before;
  small.rlim_cur = 1 << 20;
  BOOST_REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::optional<Error> e = create_error(path, std::size_t{8} << 20);
  ::setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  BOOST_REQUIRE(e);
  BOOST_TEST((e->code() == ErrorCode::resource_limit));
  BOOST_TEST(std::string(e->what()) == "shared buffer " + path + ": size: File too large");
  BOOST_TEST(!std::filesystem::exists(path));
  BOOST_TEST(!create_error(path, 4096).has_value(), "a buffer within the limit is made");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_file_removed_both_mappings_still_share_the_memory) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/buffer";
  auto made = SharedRegion::create(path, 4096);
  auto opened = SharedRegion::open(path, 4096);
  made->remove_file();
  BOOST_TEST(!std::filesystem::exists(path));
  made->data()[100] = 7;
  BOOST_TEST(opened->data()[100] == 7);
  opened->data()[4095] = 9;
  BOOST_TEST(made->data()[4095] == 9);
  // Once only: a file made at that path since is not the buffer's.
  {
    auto other = SharedRegion::create(path, 4096);
    other->remove_file();
  }
  BOOST_TEST(!std::filesystem::exists(path));
  auto again = SharedRegion::create(path, 4096);
  made->remove_file();
  made.reset();
  BOOST_TEST(std::filesystem::exists(path));
  again.reset();
  BOOST_TEST(!std::filesystem::exists(path));
  opened.reset();
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
