// What a node gets: `cmake --install` into a scratch root (prefix /usr, as
// the .deb uses) must put binaries, units, sysusers/tmpfiles files, the
// example /etc/zring/zring.yaml, headers, library and CMake package where
// Debian expects them; the units must pass `systemd-analyze verify` and
// score an exposure of 2.5 or less; and the .deb CPack builds from a fresh
// packaging configure must carry the same layout and its dependencies.
#define BOOST_TEST_MODULE ops_install
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;
namespace fs = std::filesystem;
namespace utf = boost::unit_test;

namespace {

const std::string kAnalyze = "/usr/bin/systemd-analyze";

boost::test_tools::assertion_result tools(const std::vector<std::string>& paths, const std::string& why) {
  for (const std::string& p : paths) {
    if (!executable(p)) {
      boost::test_tools::assertion_result missing(false);
      missing.message() << p << " is missing: " << why << " (scripts/install-deps.sh installs it)";
      return missing;
    }
  }
  return true;
}

boost::test_tools::assertion_result have_systemd_analyze(utf::test_unit_id) {
  return tools({kAnalyze}, "systemd-analyze checks the units (Debian package systemd)");
}

boost::test_tools::assertion_result can_package(utf::test_unit_id) {
  if (std::string(ZRING_SANITIZE_FLAGS).size() > 0) {
    boost::test_tools::assertion_result skip(false);
    skip.message() << "this is a sanitizer build; the .deb is built and checked by the plain build's run";
    return skip;
  }
  return tools({"/usr/bin/dpkg", "/usr/bin/dpkg-deb", "/usr/bin/dpkg-shlibdeps", "/usr/bin/readelf", "/usr/bin/file"},
               "CPack's DEB generator and the checks need dpkg-dev, binutils and file");
}

// `cmake --install` of this build into ROOT with the /usr prefix.
void install_into(const std::string& root) {
  const Run r = run({ZRING_CMAKE, "--install", ZRING_BINARY_DIR, "--prefix", "/usr"}, root, 300s,
                    {"DESTDIR=" + root});
  BOOST_REQUIRE_MESSAGE(r.status == 0, r.out);
}

// Files every node install has, relative to the root; libdir varies.
void check_layout(const std::string& root, const std::string& libdir) {
  for (const std::string path :
       {"usr/sbin/zringd", "usr/bin/zringctl", "usr/lib/systemd/system/zringd.service",
        "usr/lib/systemd/system/zringd@.service", "usr/lib/sysusers.d/zring.conf", "usr/lib/tmpfiles.d/zring.conf",
        "etc/zring/zring.yaml", "usr/include/zring/zring.hpp", "usr/include/zring/config.hpp",
        "usr/share/doc/zring/operations.md", "usr/share/doc/zring/configuration.md",
        "usr/share/doc/zring/examples/two-host.yaml"}) {
    BOOST_TEST(fs::exists(root + "/" + path), path << " is missing");
  }
  BOOST_TEST(executable(root + "/usr/sbin/zringd"));
  BOOST_TEST(executable(root + "/usr/bin/zringctl"));
  BOOST_TEST(fs::exists(root + "/" + libdir + "/libzring.so.0"), libdir << "/libzring.so.0 is missing");
  BOOST_TEST(fs::is_symlink(root + "/" + libdir + "/libzring.so"));
  BOOST_TEST(fs::exists(root + "/" + libdir + "/cmake/zring/zringConfig.cmake"));
  BOOST_TEST(fs::exists(root + "/" + libdir + "/cmake/zring/zringTargets.cmake"));
  // The daemon's internals are not part of the API.
  BOOST_TEST(!fs::exists(root + "/usr/include/zring/ipc_server.hpp"));
  BOOST_TEST(!fs::exists(root + "/usr/include/wire"));
}

// Verify and score the units installed under root. verify checks the units
// against this host's systemd (the targets they order after, /bin/kill), so
// it reads copies whose ExecStart names the zringd installed under root: the
// host has no /usr/sbin/zringd. security reads the installed files as they are.
void check_units(const std::string& root) {
  const std::string copies = root + "/verify";
  fs::create_directories(copies);
  std::vector<std::string> verify{kAnalyze, "verify"};
  for (const std::string unit : {"zringd.service", "zringd@.service"}) {
    const std::string text = proc::read_file(root + "/usr/lib/systemd/system/" + unit);
    BOOST_REQUIRE(contains(text, "ExecStart=/usr/sbin/zringd "));
    proc::write_file(copies + "/" + unit,
                     std::regex_replace(text, std::regex("ExecStart=/usr/sbin/zringd "), "ExecStart=" + root + "/usr/sbin/zringd "));
  }
  verify.push_back(copies + "/zringd.service");
  verify.push_back(copies + "/zringd@.service");
  const Run verified = run(verify, root);
  BOOST_TEST(verified.status == 0, "systemd-analyze verify:\n" << verified.out);
  BOOST_TEST(verified.out.empty(), "systemd-analyze verify has remarks:\n" << verified.out);
  for (const std::string unit : {"zringd.service", "zringd@demo.service"}) {
    const Run score = run({kAnalyze, "security", "--offline=true", "--root=" + root, unit}, root);
    std::smatch m;
    BOOST_REQUIRE_MESSAGE(std::regex_search(score.out, m, std::regex("Overall exposure level for [^:]+: ([0-9.]+)")),
                          score.out);
    const double exposure = std::stod(m[1]);
    BOOST_TEST_MESSAGE(unit << ": exposure " << exposure);
    BOOST_TEST(exposure <= 2.5, unit << " scores " << exposure << ":\n" << score.out);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(cmake_install_puts_everything_where_debian_expects_it) {
  proc::TempDir root;
  install_into(root.path());
  // This build chose its libdir when it was configured (lib, or lib/MULTIARCH for /usr).
  const std::string libdir =
      fs::exists(root.path() + "/usr/lib/" ZRING_MULTIARCH "/libzring.so.0") ? "usr/lib/" ZRING_MULTIARCH : "usr/lib";
  check_layout(root.path(), libdir);
  const std::string config = proc::read_file(root.path() + "/etc/zring/zring.yaml");
  BOOST_TEST(contains(config, "ipc: ipc:///run/zring/zringd.sock"));
  // The example configuration validates, and the installed zringctl says so.
  const Run check = run({ZRING_ZRINGCTL_PATH, "check-config", root.path() + "/etc/zring/zring.yaml"}, root.path());
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
  for (const std::string line : {"Type=notify", "ExecStart=/usr/sbin/zringd --config /etc/zring/zring.yaml",
                                 "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure", "User=zring",
                                 "RuntimeDirectory=zring", "ConfigurationDirectory=zring", "NoNewPrivileges=yes",
                                 "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                                 "SystemCallFilter=@system-service"})
    BOOST_TEST(contains(unit, "\n" + line + "\n"), "zringd.service lacks " << line);
  const std::string instance = proc::read_file(root.path() + "/usr/lib/systemd/system/zringd@.service");
  BOOST_TEST(contains(instance, "\nExecStart=/usr/sbin/zringd --config /etc/zring/%i.yaml\n"));
  BOOST_TEST(contains(instance, "\nRuntimeDirectory=zring/%i\n"));
}

BOOST_AUTO_TEST_CASE(sysusers_and_tmpfiles_create_the_user_and_run_dir,
                     *utf::precondition([](utf::test_unit_id) {
                       return tools({"/usr/bin/systemd-sysusers", "/usr/bin/systemd-tmpfiles"},
                                    "systemd-sysusers and systemd-tmpfiles read the files (Debian package systemd)");
                     })) {
  proc::TempDir root;
  install_into(root.path());
  fs::create_directories(root.path() + "/etc");
  const Run users = run({"/usr/bin/systemd-sysusers", "--root=" + root.path(), "zring.conf"}, root.path());
  BOOST_TEST(users.status == 0, users.out);
  BOOST_TEST(contains(proc::read_file(root.path() + "/etc/passwd"), "zring:x:"), users.out);
  BOOST_TEST(contains(proc::read_file(root.path() + "/etc/group"), "zring:x:"), users.out);
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("not root: skipping systemd-tmpfiles --create (it chowns to the zring user)");
    return;
  }
  const Run dirs = run({"/usr/bin/systemd-tmpfiles", "--root=" + root.path(), "--create", "zring.conf"}, root.path());
  BOOST_TEST(dirs.status == 0, dirs.out);
  struct stat info {};
  BOOST_REQUIRE(::stat((root.path() + "/run/zring").c_str(), &info) == 0);
  BOOST_TEST(S_ISDIR(info.st_mode));
  BOOST_TEST((info.st_mode & 07777) == 0750u);
}

BOOST_AUTO_TEST_CASE(deb_has_the_layout_the_dependencies_and_the_scripts, *utf::precondition(can_package)) {
  proc::TempDir work;
  const std::string build = work.path() + "/build", packages = work.path() + "/packages",
                    root = work.path() + "/root", control = work.path() + "/control";
  const Run configure = run({ZRING_CMAKE, "-S", ZRING_SOURCE_DIR, "-B", build, "-G", ZRING_GENERATOR,
                             "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_INSTALL_PREFIX=/usr",
                             "-DZRING_BUILD_TESTS=OFF", "-DZRING_BUILD_BENCH=OFF", "-DZRING_BUILD_PYTHON=OFF"},
                            work.path(), 600s);
  BOOST_REQUIRE_MESSAGE(configure.status == 0, configure.out);
  // What the package installs (the examples and test helpers are not).
  const Run compile =
      run({ZRING_CMAKE, "--build", build, "-j", "2", "--target", "zringd", "zringctl", "zring"}, work.path(), 1200s);
  BOOST_REQUIRE_MESSAGE(compile.status == 0, compile.out);
  const Run pack = run({ZRING_CPACK, "-G", "DEB", "--config", build + "/CPackConfig.cmake", "-B", packages},
                       work.path(), 600s);
  BOOST_REQUIRE_MESSAGE(pack.status == 0, pack.out);
  std::string deb;
  for (const auto& entry : fs::directory_iterator(packages))
    if (entry.path().extension() == ".deb") deb = entry.path();
  BOOST_REQUIRE_MESSAGE(!deb.empty(), pack.out);
  BOOST_TEST(std::regex_search(fs::path(deb).filename().string(), std::regex("^zring_[0-9.]+_[a-z0-9]+\\.deb$")), deb);

  const Run fields = run({"/usr/bin/dpkg-deb", "-f", deb, "Package", "Depends", "Recommends"}, work.path());
  BOOST_REQUIRE(fields.status == 0);
  BOOST_TEST_MESSAGE(fields.out);
  BOOST_TEST(contains(fields.out, "Package: zring"), fields.out);
  for (const std::string dependency :
       {"libzmq5", "libyaml-cpp0.7", "libboost-program-options1.74.0", "libsystemd0", "libstdc++6", "libc6",
        "systemd | adduser", "procps"})
    BOOST_TEST(contains(fields.out, dependency), "Depends lacks " << dependency << ":\n" << fields.out);
  BOOST_TEST(!contains(fields.out, "libzring"), "the package must not depend on itself:\n" << fields.out);

  BOOST_REQUIRE(run({"/usr/bin/dpkg", "-x", deb, root}, work.path()).status == 0);
  check_layout(root, "usr/lib/" ZRING_MULTIARCH);
  BOOST_TEST(!fs::exists(root + "/usr/local"));
  BOOST_REQUIRE(run({"/usr/bin/dpkg-deb", "-e", deb, control}, work.path()).status == 0);
  BOOST_TEST(contains(proc::read_file(control + "/conffiles"), "/etc/zring/zring.yaml"));
  BOOST_TEST(contains(proc::read_file(control + "/shlibs"), "libzring 0 zring"));
  for (const std::string script : {"postinst", "prerm", "postrm"}) {
    BOOST_TEST(executable(control + "/" + script), script);
    BOOST_TEST(run({"/bin/sh", "-n", control + "/" + script}, work.path()).status == 0, script << " is not valid sh");
  }
  BOOST_TEST(contains(proc::read_file(control + "/postinst"), "systemd-sysusers zring.conf"));
  BOOST_TEST(contains(proc::read_file(control + "/postinst"), "ldconfig"));

  // The packaged binaries run, against the packaged library.
  const std::vector<std::string> env{"LD_LIBRARY_PATH=" + root + "/usr/lib/" ZRING_MULTIARCH};
  const Run version = run({root + "/usr/sbin/zringd", "--version"}, work.path(), 30s, env);
  BOOST_TEST(version.status == 0, version.out);
  BOOST_TEST(contains(version.out, "zringd "), version.out);
  const Run check = run({root + "/usr/sbin/zringd", "--check-config", root + "/etc/zring/zring.yaml"}, work.path(),
                        30s, env);
  BOOST_TEST(check.status == 0, check.out);
  BOOST_TEST(contains(check.out, "ok: 1 nodes x 1 local ranks"), check.out);
  if (executable(kAnalyze)) check_units(root);
}
