// The Debian packages. CPack builds them once, from a fresh packaging
// configure of this source tree (prefix /usr, the Python module included,
// as docs/operations.md builds them); then
// - each of zringd, libzring0, libzring-dev and python3-zring carries its
//   files and no other package's, its fields and dependencies, its copyright
//   and changelog, stripped binaries, and the scripts and triggers it needs
//   (none runs ldconfig: libzring0's trigger does);
// - lintian reports no error and no warning on any of them;
// - as root, on a machine without zring packages, `apt-get install` of the
//   four files makes a node: /usr/bin/python3 imports the installed module
//   and reduces through a ring of the installed zringd; purging them leaves
//   none of their files. The packages go again also when a check fails.
#define BOOST_TEST_MODULE ops_packages
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "ops/install_checks.hpp"
#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;
namespace fs = std::filesystem;
namespace utf = boost::unit_test;

namespace {

const std::vector<std::string> kPackages{"zringd", "libzring0", "libzring-dev", "python3-zring"};
const std::string kLibdir = "usr/lib/" ZRING_MULTIARCH;
const std::string kPython = "usr/lib/python3/dist-packages/zring";
// The one lintian tag left, explained in docs/operations.md: a package's
// first upload to Debian closes its ITP bug, and zring is not headed there.
const std::string kExplainedTags = "initial-upload-closes-no-bugs";
const std::vector<std::string> kApt{"DEBIAN_FRONTEND=noninteractive"};

struct Packages {
  proc::TempDir work;
  // The packages' build, beside this build (so at the same depth below the
  // source tree, ccache's base directory in scripts/build.sh): its compile
  // commands, whose paths ccache makes relative, are this build's, the
  // unity files' paths among them, and every object comes from the cache.
  proc::TempDir build_dir{std::filesystem::path(ZRING_BINARY_DIR).parent_path().string(),
                          "build-packages-"};
  std::string failure;                     // why they could not be built
  std::map<std::string, std::string> deb;  // package -> its .deb
  std::string version;                     // of all four: UPSTREAM-REVISION
  [[nodiscard]] std::string root() const { return work.path() + "/root"; }  // all four unpacked
  [[nodiscard]] std::string control(const std::string& package) const {
    return work.path() + "/control/" + package;
  }
};

std::string field(const std::string& deb, const std::string& name) {
  const std::vector<std::string> text =
      lines(run({"/usr/bin/dpkg-deb", "-f", deb, name}, "/tmp").out);
  return text.empty() ? "" : text[0];
}

std::string gunzip(const std::string& path) { return run({"/bin/gzip", "-dc", path}, "/tmp").out; }

bool installed(const std::string& package) {
  return run({"/usr/bin/dpkg-query", "-W", "-f=${Status}", package}, "/tmp").out ==
         "install ok installed";
}

void build(Packages& p) {
  const std::string& work = p.work.path();
  const std::string& build = p.build_dir.path();
  const std::string out = work + "/packages";
  const std::vector<std::pair<std::vector<std::string>, std::chrono::seconds>> steps{
      // This build's compiler launcher, flags and unity setting: where the
      // launcher is ccache (scripts/build.sh), every object comes from its cache.
      {{ZRING_CMAKE, "-S", ZRING_SOURCE_DIR, "-B", build, "-G", ZRING_GENERATOR,
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_INSTALL_PREFIX=/usr",
        "-DZRING_BUILD_TESTS=OFF", "-DZRING_BUILD_BENCH=OFF", "-DZRING_BUILD_PYTHON=ON",
        "-DCMAKE_CXX_COMPILER_LAUNCHER=" ZRING_CXX_LAUNCHER, "-DCMAKE_CXX_FLAGS=" ZRING_CXX_FLAGS,
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=" ZRING_CXX_FLAGS_RELWITHDEBINFO,
        "-DZRING_WERROR=" ZRING_WERROR_SETTING, "-DCMAKE_UNITY_BUILD=" ZRING_UNITY_SETTING},
       600s},
      // What the packages hold (not the examples or the test helpers).
      {{ZRING_CMAKE, "--build", build, "-j", "2", "--target", "zringd", "zringctl", "zring",
        "zring_python"},
       1800s},
      {{ZRING_CPACK, "--config", build + "/CPackConfig.cmake", "-B", out}, 600s}};
  for (const auto& [argv, limit] : steps) {
    // Objects whose debug info names another build directory: the packages
    // strip it. (scripts/build.sh builds with the same settings.)
    const Run r =
        run(argv, work, limit, {"CCACHE_NOHASHDIR=true", "CCACHE_BASEDIR=" ZRING_SOURCE_DIR});
    if (r.status != 0) {
      p.failure = argv[0] + " " + argv[1] + " failed:\n" + r.out;
      return;
    }
  }
  for (const auto& entry : fs::directory_iterator(out))
    if (entry.path().extension() == ".deb") p.deb[field(entry.path(), "Package")] = entry.path();
  fs::create_directories(work + "/control");
  for (const auto& [package, deb] : p.deb) {
    const Run files = run({"/usr/bin/dpkg-deb", "-x", deb, p.root()}, work);
    const Run control = run({"/usr/bin/dpkg-deb", "-e", deb, p.control(package)}, work);
    if (files.status != 0 || control.status != 0) {
      p.failure = "dpkg-deb cannot unpack " + deb + ":\n" + files.out + control.out;
      return;
    }
  }
  if (!p.deb.empty()) p.version = field(p.deb.begin()->second, "Version");
}

// Built by the first test case that needs them; kept for the others.
const Packages& packages() {
  static Packages p;
  static bool built = false;
  if (!built) {
    built = true;
    build(p);
  }
  return p;
}

boost::test_tools::assertion_result can_package(utf::test_unit_id) {
  return tools({"/usr/bin/dpkg", "/usr/bin/dpkg-deb", "/usr/bin/dpkg-shlibdeps", "/usr/bin/readelf",
                "/usr/bin/file", "/bin/gzip"},
               "CPack's DEB generator and the checks need dpkg-dev, binutils, file and gzip");
}

// The install test changes this machine: only as root, with apt, and when
// no zring is installed (it would replace and then purge someone's).
boost::test_tools::assertion_result can_install(utf::test_unit_id id) {
  boost::test_tools::assertion_result ok = can_package(id);
  if (!ok) return ok;
  boost::test_tools::assertion_result skip(false);
  if (::geteuid() != 0) {
    skip.message() << "not root: apt-get cannot install the packages";
    return skip;
  }
  if (!executable("/usr/bin/apt-get"))
    return tools({"/usr/bin/apt-get"}, "it installs the packages");
  for (const std::string& package : kPackages)
    if (run({"/usr/bin/dpkg-query", "-W", package}, "/tmp").status == 0) {
      skip.message() << package << " is installed here already (apt-get purge it to run this test)";
      return skip;
    }
  for (const std::string& path : std::vector<std::string>{
           "/usr/sbin/zringd", "/" + kLibdir + "/libzring.so.0", "/" + kPython})
    if (fs::exists(path)) {
      skip.message() << path
                     << " exists (a `cmake --install` to /usr?): the packages would replace it";
      return skip;
    }
  return true;
}

// The four packages installed by apt-get; the destructor purges them (also
// when a check failed) and removes the zring user, its group and /run/zring
// if they were not here before.
class Installation {
 public:
  explicit Installation(const std::string& scratch) : scratch_(scratch) {}
  Installation(const Installation&) = delete;
  Installation& operator=(const Installation&) = delete;
  ~Installation() {
    if (!purged_) (void)purge();
    if (!had_user_ && exists("passwd")) run({"/usr/sbin/userdel", "zring"}, scratch_);
    if (!had_group_ && exists("group")) run({"/usr/sbin/groupdel", "zring"}, scratch_);
    std::error_code ignored;
    if (!had_run_dir_) fs::remove("/run/zring", ignored);  // only if empty
  }
  [[nodiscard]] Run install(const std::vector<std::string>& debs) const {
    std::vector<std::string> argv{"/usr/bin/apt-get",        "install", "-y",
                                  "--no-install-recommends", "-o",      "DPkg::Lock::Timeout=120"};
    argv.insert(argv.end(), debs.begin(), debs.end());  // paths with a '/': apt reads them as files
    return run(argv, scratch_, 600s, kApt);
  }
  Run purge() {
    purged_ = true;
    std::vector<std::string> argv{"/usr/bin/apt-get", "purge", "-y", "-o",
                                  "DPkg::Lock::Timeout=120"};
    argv.insert(argv.end(), kPackages.begin(), kPackages.end());
    return run(argv, scratch_, 600s, kApt);
  }

 private:
  bool exists(const std::string& database) const {
    return run({"/usr/bin/getent", database, "zring"}, scratch_).status == 0;
  }
  std::string scratch_;
  bool had_user_ = exists("passwd");
  bool had_group_ = exists("group");
  bool had_run_dir_ = fs::exists("/run/zring");
  bool purged_ = false;
};

}  // namespace

BOOST_AUTO_TEST_CASE(four_packages_each_with_its_files_fields_and_scripts,
                     *utf::precondition(can_package)) {
  const Packages& p = packages();
  BOOST_REQUIRE_MESSAGE(p.failure.empty(), p.failure);
  BOOST_REQUIRE_EQUAL(p.deb.size(), kPackages.size());
  const std::string upstream = p.version.substr(0, p.version.rfind('-'));
  BOOST_TEST(std::regex_match(p.version, std::regex("[0-9.]+-[0-9A-Za-z.+~]+")), p.version);

  // Fields, and the first line of each description: its own synopsis.
  const std::string exact = "libzring0 (= " + p.version + ")";
  const std::map<std::string, std::pair<std::string, std::vector<std::string>>> expected{
      {"zringd",
       {"net",
        {exact, "adduser", "procps", "libzmq5", "libboost-program-options1.74.0", "libsystemd0",
         "libc6"}}},
      {"libzring0", {"libs", {"libzmq5", "libyaml-cpp0.7", "libstdc++6", "libc6"}}},
      {"libzring-dev", {"libdevel", {exact}}},
      {"python3-zring",
       {"python", {exact, "python3 (>= 3.", "python3 (<< 3.", "python3-numpy", "libstdc++6"}}}};
  std::set<std::string> synopses;
  for (const auto& [package, want] : expected) {
    BOOST_TEST_CONTEXT(package) {
      const std::string& deb = p.deb.at(package);
      BOOST_TEST(fs::path(deb).filename().string() ==
                 package + "_" + p.version + "_" + field(deb, "Architecture") + ".deb");
      BOOST_TEST(field(deb, "Version") == p.version);
      BOOST_TEST(field(deb, "Source") == "zring");
      BOOST_TEST(field(deb, "Section") == want.first);
      BOOST_TEST(!contains(field(deb, "Maintainer"), "localhost"));
      const std::string depends = field(deb, "Depends");
      for (const std::string& d : want.second)
        BOOST_TEST(contains(depends, d), "Depends lacks " << d << ": " << depends);
      if (package == "libzring0") BOOST_TEST(!contains(depends, "libzring"), depends);
      const std::string synopsis = field(deb, "Description");
      BOOST_TEST((!synopsis.empty() && synopsis.size() <= 80 && !contains(synopsis, "CMake")),
                 synopsis);
      synopses.insert(synopsis);
      // Its copyright and its Debian changelog.
      const std::string doc = p.root() + "/usr/share/doc/" + package;
      BOOST_TEST(
          contains(proc::read_file(doc + "/copyright"),
                   "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"));
      BOOST_TEST(gunzip(doc + "/changelog.Debian.gz").rfind("zring (" + p.version + ") ", 0) == 0);
    }
  }
  BOOST_TEST(synopses.size() == kPackages.size());

  // Every file in exactly one package, and the right one.
  std::map<std::string, std::string> owner;
  for (const auto& [package, deb] : p.deb)
    for (const std::string& line :
         lines(run({"/usr/bin/dpkg-deb", "-c", deb}, p.work.path()).out)) {
      std::smatch m;
      if (line.empty() || line[0] == 'd' ||
          !std::regex_search(line, m, std::regex(R"( \./(\S+)( -> \S+)?$)")))
        continue;
      const auto [first, fresh] = owner.emplace(m[1], package);
      BOOST_TEST(fresh, first->first << " is in " << first->second << " and " << package);
    }
  for (const auto& [path, package] : std::map<std::string, std::string>{
           {"usr/sbin/zringd", "zringd"},
           {"usr/bin/zringctl", "zringd"},
           {"etc/zring/zring.yaml", "zringd"},
           {"usr/lib/systemd/system/zringd.service", "zringd"},
           {"usr/share/man/man8/zringd.8.gz", "zringd"},
           {"usr/share/man/man1/zringctl.1.gz", "zringd"},
           {"usr/share/doc/zring/operations.md", "zringd"},
           {kLibdir + "/libzring.so.0", "libzring0"},
           {kLibdir + "/libzring.so." + upstream, "libzring0"},
           {kLibdir + "/libzring.so", "libzring-dev"},
           {"usr/include/zring/zring.hpp", "libzring-dev"},
           {kLibdir + "/cmake/zring/zringConfig.cmake", "libzring-dev"},
           {kPython + "/__init__.py", "python3-zring"},
           {kPython + "/torch.py", "python3-zring"}})
    BOOST_TEST(owner[path] == package,
               path << " is in '" << owner[path] << "', not in " << package);
  std::vector<std::string> binaries{"usr/sbin/zringd", "usr/bin/zringctl",
                                    kLibdir + "/libzring.so." + upstream};
  for (const auto& [path, package] : owner)
    if (std::regex_match(path, std::regex(kPython + "/_zring\\.cpython-3[0-9]+-.*\\.so")) &&
        package == "python3-zring")
      binaries.push_back(path);
  BOOST_TEST(binaries.size() == 4u, "no _zring extension module in python3-zring");
  for (const std::string& path : binaries) {
    const std::string type = run({"/usr/bin/file", p.root() + "/" + path}, p.work.path()).out;
    BOOST_TEST((contains(type, ", stripped") && !contains(type, "debug_info")),
               path << ": " << type);
  }

  // Control files: the trigger and shlibs of libzring0, the scripts.
  BOOST_TEST(contains(proc::read_file(p.control("libzring0") + "/triggers"),
                      "\nactivate-noawait ldconfig\n"));
  BOOST_TEST(proc::read_file(p.control("libzring0") + "/shlibs")
                 .rfind("libzring 0 libzring0 (>= " + upstream + ")", 0) == 0);
  BOOST_TEST(
      contains(proc::read_file(p.control("zringd") + "/conffiles"), "/etc/zring/zring.yaml"));
  const std::map<std::string, std::vector<std::string>> scripts{
      {"zringd/postinst",
       {"systemd-sysusers zring.conf", "adduser --system", "deb-systemd-helper update-state"}},
      {"zringd/prerm", {"deb-systemd-invoke stop"}},
      {"zringd/postrm", {"deb-systemd-helper purge"}},
      {"python3-zring/postinst", {"py3compile -p python3-zring"}},
      {"python3-zring/prerm", {"py3clean -p python3-zring"}}};
  for (const std::string& package : kPackages)
    for (const std::string script : {"preinst", "postinst", "prerm", "postrm"}) {
      const std::string path = p.control(package) + "/" + script;
      const auto wanted = scripts.find(package + "/" + script);
      BOOST_TEST(fs::exists(path) == (wanted != scripts.end()), package << " " << script);
      if (!fs::exists(path)) continue;
      const std::string text = proc::read_file(path);
      BOOST_TEST(executable(path), path);
      BOOST_TEST(run({"/bin/sh", "-n", path}, p.work.path()).status == 0,
                 path << " is not valid sh");
      BOOST_TEST(!contains(text, "ldconfig"), path << " runs ldconfig: libzring0's trigger does");
      for (const std::string& part : wanted->second)
        BOOST_TEST(contains(text, part), path << " lacks " << part);
    }

  // The manual pages, with this version.
  BOOST_TEST(contains(gunzip(p.root() + "/usr/share/man/man8/zringd.8.gz"), ".TH ZRINGD 8 \""));
  BOOST_TEST(contains(gunzip(p.root() + "/usr/share/man/man1/zringctl.1.gz"),
                      "\"zring " + upstream + "\""));

  // Together they make the layout of a node, whose binaries run against the packaged library.
  check_layout(p.root(), kLibdir);
  const std::vector<std::string> env{"LD_LIBRARY_PATH=" + p.root() + "/" + kLibdir};
  const Run version = run({p.root() + "/usr/sbin/zringd", "--version"}, p.work.path(), 30s, env);
  BOOST_TEST(version.out == "zringd " + upstream + "\n", version.out);
  const Run check =
      run({p.root() + "/usr/sbin/zringd", "--check-config", p.root() + "/etc/zring/zring.yaml"},
          p.work.path(), 30s, env);
  BOOST_TEST(contains(check.out, "ok: 1 nodes x 1 local ranks"), check.out);
  if (executable(kAnalyze)) check_units(p.root());
}

BOOST_AUTO_TEST_CASE(lintian_finds_no_error_and_no_warning,
                     *utf::precondition(can_package) * utf::precondition([](utf::test_unit_id) {
                       return tools({"/usr/bin/lintian"}, "lintian checks the packages");
                     })) {
  const Packages& p = packages();
  BOOST_REQUIRE_MESSAGE(p.failure.empty(), p.failure);
  std::vector<std::string> argv{"/usr/bin/lintian", "--fail-on", "error,warning", "--suppress-tags",
                                kExplainedTags};
  for (const auto& [package, deb] : p.deb) argv.push_back(deb);
  const Run lint = run(argv, p.work.path(), 600s);
  BOOST_TEST_MESSAGE("lintian:\n" << lint.out);
  BOOST_TEST(lint.status == 0, lint.out);
  for (const std::string& line : lines(lint.out))
    BOOST_TEST(!std::regex_search(line, std::regex("^[EW]: ")), line);
}

BOOST_AUTO_TEST_CASE(apt_installs_them_and_python_reduces_through_the_installed_zringd,
                     *utf::precondition(can_install)) {
  const Packages& p = packages();
  BOOST_REQUIRE_MESSAGE(p.failure.empty(), p.failure);
  Installation node(p.work.path());
  std::vector<std::string> debs;
  for (const auto& [package, deb] : p.deb) debs.push_back(deb);
  const Run install = node.install(debs);
  BOOST_REQUIRE_MESSAGE(install.status == 0, install.out);
  for (const std::string& package : kPackages)
    BOOST_TEST(installed(package), package << " is not installed");
  BOOST_TEST(contains(run({"/sbin/ldconfig", "-p"}, p.work.path()).out, "libzring.so.0 "),
             "the ldconfig trigger did not run");
  BOOST_TEST(run({"/usr/bin/getent", "passwd", "zring"}, p.work.path()).status == 0,
             "postinst made no zring user");
  BOOST_TEST(fs::is_directory("/" + kPython + "/__pycache__"),
             "postinst did not byte-compile the module");
  const Run check =
      run({"/usr/bin/zringctl", "check-config", "/etc/zring/zring.yaml"}, p.work.path());
  BOOST_TEST(check.status == 0, check.out);

  const Run py = run({"/usr/bin/python3", "-I", ZRING_SOURCE_DIR "/tests/ops/packaged_reduce.py"},
                     p.work.path(), 300s);
  BOOST_TEST_MESSAGE("packaged_reduce.py:\n" << py.out);
  BOOST_TEST(py.status == 0, py.out);
  const std::vector<std::string> said = lines(py.out);
  const auto says = [&](const std::string& line) {
    return std::find(said.begin(), said.end(), line) != said.end();
  };
  const std::string upstream = p.version.substr(0, p.version.rfind('-'));
  for (const std::string& line :
       std::vector<std::string>{"module: /" + kPython + "/__init__.py", "version: " + upstream,
                                "rank 0 average: 1.5 1.5", "rank 1 average: 1.5 1.5", "ops done: 2",
                                "libzring: /" + kLibdir + "/libzring.so." + upstream})
    BOOST_TEST(says(line), "packaged_reduce.py did not print '" << line << "':\n" << py.out);
  BOOST_TEST(!contains(py.out, "error:"), py.out);
  if (installed("python3-torch")) BOOST_TEST(says("zring.torch: imported"), py.out);

  const Run purge = node.purge();
  BOOST_TEST(purge.status == 0, purge.out);
  for (const std::string& package : kPackages)
    BOOST_TEST(!installed(package), package << " is still installed");
  for (const std::string& path : std::vector<std::string>{
           "/usr/sbin/zringd", "/etc/zring/zring.yaml", "/" + kLibdir + "/libzring.so.0",
           "/" + kPython, "/usr/share/doc/zringd"})
    BOOST_TEST(!fs::exists(path), path << " is left after the purge");
  BOOST_TEST(!contains(run({"/sbin/ldconfig", "-p"}, p.work.path()).out, "libzring.so.0 "));
}
