// zringd - the zring daemon: one per node, joins the ring, serves local ranks.
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <zring/config.hpp>
#include <zring/error.hpp>
#include <zring/version.hpp>

#include "daemon.hpp"
#include "log.hpp"
#include "signal_thread.hpp"

namespace po = boost::program_options;
using namespace zring;

namespace {

const char* kUsage =
    "Usage: zringd --config FILE [--node NAME] [--log-level LEVEL]\n"
    "       zringd --check-config FILE [--node NAME]\n"
    "\n"
    "Runs this node's member of a zring ring, as described by the YAML FILE\n"
    "(see docs/configuration.md), and serves the training processes of this\n"
    "node on the file's ipc:// endpoint.\n";

int check_config(const std::string& path, const std::optional<std::string>& node) {
  const RingConfig config = load_config(path, node);
  std::cout << path << ": ok: " << config.nodes.size() << " nodes x " << config.local_ranks
            << " local ranks (world size " << config.world_size() << "), this node '" << config.self
            << "' at " << config.self_node().address << ", ipc " << config.ipc << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: every thread inherits the mask, and only the
  // daemon's signal thread takes SIGINT, SIGTERM and SIGHUP.
  (void)daemon::block_async_signals();
  po::options_description options("Options");
  options.add_options()("config,c", po::value<std::string>(), "the ring's YAML file")(
      "node,n", po::value<std::string>(), "this node's name (overrides `self` in the file)")(
      "check-config", po::value<std::string>(), "validate FILE and exit")(
      "log-level", po::value<std::string>(), "error | warn | info | debug (overrides the file)")(
      "version", "print the version and exit")("help,h", "print this help and exit");
  po::variables_map args;
  try {
    po::store(po::parse_command_line(argc, argv, options), args);
    po::notify(args);
  } catch (const po::error& e) {
    std::cerr << "zringd: " << e.what() << "\n\n" << kUsage << options;
    return 2;
  }
  if (args.count("help")) {
    std::cout << kUsage << "\n" << options;
    return 0;
  }
  if (args.count("version")) {
    std::cout << "zringd " << version() << "\n";
    return 0;
  }
  std::optional<std::string> node;
  if (args.count("node")) node = args["node"].as<std::string>();
  try {
    if (args.count("check-config"))
      return check_config(args["check-config"].as<std::string>(), node);
    if (!args.count("config")) {
      std::cerr << "zringd: --config FILE is required\n\n" << kUsage << options;
      return 2;
    }
    const std::string path = args["config"].as<std::string>();
    RingConfig config = load_config(path, node);
    std::optional<std::string> level_override;
    if (args.count("log-level")) {
      level_override = args["log-level"].as<std::string>();
      (void)daemon::parse_log_level(*level_override);  // a bad level is a usage error
      config.log_level = *level_override;
    }
    daemon::set_log_node(config.self);
    daemon::set_log_level(daemon::parse_log_level(config.log_level));
    daemon::Daemon zringd(std::move(config), path, node, level_override);
    return zringd.run();
  } catch (const Error& e) {
    std::cerr << "zringd: " << e.what() << "\n";
    return e.code() == ErrorCode::config_invalid ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "zringd: unexpected error: " << e.what() << "\n";
    return 1;
  }
}
