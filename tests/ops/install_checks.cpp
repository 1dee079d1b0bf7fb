#include "ops/install_checks.hpp"

#include <filesystem>
#include <regex>

#include "ops/ops_util.hpp"

namespace zring::ops {

namespace fs = std::filesystem;

boost::test_tools::assertion_result tools(const std::vector<std::string>& paths,
                                          const std::string& why) {
  for (const std::string& p : paths) {
    if (!executable(p)) {
      boost::test_tools::assertion_result missing(false);
      missing.message() << p << " is missing: " << why << " (scripts/install-deps.sh installs it)";
      return missing;
    }
  }
  return true;
}

void check_layout(const std::string& root, const std::string& libdir) {
  for (const std::string path :
       {"usr/sbin/zringd", "usr/bin/zringctl", "usr/lib/systemd/system/zringd.service",
        "usr/lib/systemd/system/zringd@.service", "usr/lib/sysusers.d/zring.conf",
        "usr/lib/tmpfiles.d/zring.conf", "etc/zring/zring.yaml", "usr/include/zring/zring.hpp",
        "usr/include/zring/config.hpp", "usr/share/doc/zring/operations.md",
        "usr/share/doc/zring/configuration.md", "usr/share/doc/zring/examples/two-host.yaml",
        "usr/share/man/man8/zringd.8.gz", "usr/share/man/man1/zringctl.1.gz"}) {
    BOOST_TEST(fs::exists(root + "/" + path), path << " is missing");
  }
  BOOST_TEST(executable(root + "/usr/sbin/zringd"));
  BOOST_TEST(executable(root + "/usr/bin/zringctl"));
  BOOST_TEST(fs::exists(root + "/" + libdir + "/libzring.so.0"),
             libdir << "/libzring.so.0 is missing");
  BOOST_TEST(fs::is_symlink(root + "/" + libdir + "/libzring.so"));
  BOOST_TEST(fs::exists(root + "/" + libdir + "/cmake/zring/zringConfig.cmake"));
  BOOST_TEST(fs::exists(root + "/" + libdir + "/cmake/zring/zringTargets.cmake"));
  // The daemon's internals are not part of the API.
  BOOST_TEST(!fs::exists(root + "/usr/include/zring/ipc_server.hpp"));
  BOOST_TEST(!fs::exists(root + "/usr/include/wire"));
}

// verify checks the units against this host's systemd (the targets they
// order after, /bin/kill), so it reads copies whose ExecStart names the
// zringd installed under root: the host has no /usr/sbin/zringd. security
// reads the installed files as they are.
void check_units(const std::string& root) {
  const std::string copies = root + "/verify";
  fs::create_directories(copies);
  std::vector<std::string> verify{kAnalyze, "verify"};
  for (const std::string unit : {"zringd.service", "zringd@.service"}) {
    const std::string text = proc::read_file(root + "/usr/lib/systemd/system/" + unit);
    BOOST_REQUIRE(contains(text, "ExecStart=/usr/sbin/zringd "));
    proc::write_file(copies + "/" + unit,
                     std::regex_replace(text, std::regex("ExecStart=/usr/sbin/zringd "),
                                        "ExecStart=" + root + "/usr/sbin/zringd "));
  }
  verify.push_back(copies + "/zringd.service");
  verify.push_back(copies + "/zringd@.service");
  const Run verified = run(verify, root);
  BOOST_TEST(verified.status == 0, "systemd-analyze verify:\n" << verified.out);
  BOOST_TEST(verified.out.empty(), "systemd-analyze verify has remarks:\n" << verified.out);
  for (const std::string unit : {"zringd.service", "zringd@demo.service"}) {
    const Run score = run({kAnalyze, "security", "--offline=true", "--root=" + root, unit}, root);
    std::smatch m;
    BOOST_REQUIRE_MESSAGE(
        std::regex_search(score.out, m, std::regex("Overall exposure level for [^:]+: ([0-9.]+)")),
        score.out);
    const double exposure = std::stod(m[1]);
    BOOST_TEST_MESSAGE(unit << ": exposure " << exposure);
    BOOST_TEST(exposure <= 2.5, unit << " scores " << exposure << ":\n" << score.out);
  }
}

}  // namespace zring::ops
