// install_checks.hpp - what test_install (a `cmake --install`) and
// test_packages (the Debian packages) both check of an installed tree.
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

namespace zring::ops {

inline const std::string kAnalyze = "/usr/bin/systemd-analyze";

// True when every path is an executable; otherwise false, naming the first
// missing one and why it is needed (for a test case's precondition).
boost::test_tools::assertion_result tools(const std::vector<std::string>& paths,
                                          const std::string& why);

// Files every node install has, relative to root; libdir (usr/lib or
// usr/lib/MULTIARCH) varies with the build's configuration.
void check_layout(const std::string& root, const std::string& libdir);

// Verifies the units installed under root with systemd-analyze and scores
// their exposure (at most 2.5).
void check_units(const std::string& root);

}  // namespace zring::ops
