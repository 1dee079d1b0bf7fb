// What a node gets: `cmake --install` into a scratch root (prefix /usr, as
// the Debian packages use) must put binaries, units, sysusers/tmpfiles
// files, the example /etc/zring/zring.yaml, manual pages, headers, library
// and CMake package where Debian expects them; the units must pass
// `systemd-analyze verify` and score an exposure of 2.5 or less. The
// packages themselves: test_packages.cpp.
#define BOOST_TEST_MODULE ops_install
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>

#include "ops/install_checks.hpp"
#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;
namespace fs = std::filesystem;
namespace utf = boost::unit_test;

namespace {

boost::test_tools::assertion_result have_systemd_analyze(utf::test_unit_id) {
  return tools({kAnalyze}, "systemd-analyze checks the units (Debian package systemd)");
}

// `cmake --install` of this build into ROOT with the /usr prefix.
void install_into(const std::string& root) {
  const Run r = run({ZRING_CMAKE, "--install", ZRING_BINARY_DIR, "--prefix", "/usr"}, root, 300s,
                    {"DESTDIR=" + root});
  BOOST_REQUIRE_MESSAGE(r.status == 0, r.out);
}

}  // namespace

BOOST_AUTO_TEST_CASE(cmake_install_puts_everything_where_debian_expects_it) {
  proc::TempDir root;
  install_into(root.path());
  // This build chose its libdir when it was configured (lib, or lib/MULTIARCH for /usr).
  const std::string libdir = fs::exists(root.path() + "/usr/lib/" ZRING_MULTIARCH "/libzring.so.0")
                                 ? "usr/lib/" ZRING_MULTIARCH
                                 : "usr/lib";
  check_layout(root.path(), libdir);
  const std::string config = proc::read_file(root.path() + "/etc/zring/zring.yaml");
  BOOST_TEST(contains(config, "ipc: ipc:///run/zring/zringd.sock"));
  // The example configuration validates, and the installed zringctl says so.
  const Run check = run(
      {ZRING_ZRINGCTL_PATH, "check-config", root.path() + "/etc/zring/zring.yaml"}, root.path());
  BOOST_TEST(check.status == 0, check.out);
  // An operator's configuration survives a reinstall.
  proc::write_file(root.path() + "/etc/zring/zring.yaml", "# mine\n");
  install_into(root.path());
  BOOST_TEST(proc::read_file(root.path() + "/etc/zring/zring.yaml") == "# mine\n");
}

BOOST_AUTO_TEST_CASE(units_verify_and_score_at_most_2_5, *utf::precondition(have_systemd_analyze)) {
  proc::TempDir root;
  install_into(root.path());
  check_units(root.path());
  const std::string unit = proc::read_file(root.path() + "/usr/lib/systemd/system/zringd.service");
  for (const std::string line :
       {"Type=notify", "ExecStart=/usr/sbin/zringd --config /etc/zring/zring.yaml",
        "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure", "User=zring",
        "RuntimeDirectory=zring", "ConfigurationDirectory=zring", "NoNewPrivileges=yes",
        "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
        "SystemCallFilter=@system-service"})
    BOOST_TEST(contains(unit, "\n" + line + "\n"), "zringd.service lacks " << line);
  const std::string instance =
      proc::read_file(root.path() + "/usr/lib/systemd/system/zringd@.service");
  BOOST_TEST(contains(instance, "\nExecStart=/usr/sbin/zringd --config /etc/zring/%i.yaml\n"));
  BOOST_TEST(contains(instance, "\nRuntimeDirectory=zring/%i\n"));
}

BOOST_AUTO_TEST_CASE(
    sysusers_and_tmpfiles_create_the_user_and_run_dir, *utf::precondition([](utf::test_unit_id) {
      return tools({"/usr/bin/systemd-sysusers", "/usr/bin/systemd-tmpfiles"},
                   "systemd-sysusers and systemd-tmpfiles read the files (Debian package systemd)");
    })) {
  proc::TempDir root;
  install_into(root.path());
  fs::create_directories(root.path() + "/etc");
  const Run users =
      run({"/usr/bin/systemd-sysusers", "--root=" + root.path(), "zring.conf"}, root.path());
  BOOST_TEST(users.status == 0, users.out);
  BOOST_TEST(contains(proc::read_file(root.path() + "/etc/passwd"), "zring:x:"), users.out);
  BOOST_TEST(contains(proc::read_file(root.path() + "/etc/group"), "zring:x:"), users.out);
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE(
        "not root: skipping systemd-tmpfiles --create (it chowns to the zring user)");
    return;
  }
  const Run dirs =
      run({"/usr/bin/systemd-tmpfiles", "--root=" + root.path(), "--create", "zring.conf"},
          root.path());
  BOOST_TEST(dirs.status == 0, dirs.out);
  struct stat info {};
  BOOST_REQUIRE(::stat((root.path() + "/run/zring").c_str(), &info) == 0);
  BOOST_TEST(S_ISDIR(info.st_mode));
  BOOST_TEST((info.st_mode & 07777) == 0750u);
}
