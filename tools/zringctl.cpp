// zringctl - look at and check a zring node.
//
//   zringctl status [--config FILE | --endpoint ipc://...] [--node NAME] [--json]
//   zringctl check-config FILE [--node NAME]
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include <zring/zring.hpp>

#include "client/status.hpp"

namespace {

const char* kUsage =
    "usage: zringctl status [--config FILE | --endpoint ipc://PATH] [--node NAME] [--json]\n"
    "       zringctl check-config FILE [--node NAME]\n";

struct Args {
  std::string command;
  std::optional<std::string> config, endpoint, node, file;
  bool json = false;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw zring::Error(zring::ErrorCode::invalid_argument, "no command");
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw zring::Error(zring::ErrorCode::invalid_argument, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config") a.config = value();
    else if (arg == "--endpoint") a.endpoint = value();
    else if (arg == "--node") a.node = value();
    else if (arg == "--json") a.json = true;
    else if (!a.file && arg.rfind("--", 0) != 0) a.file = arg;
    else throw zring::Error(zring::ErrorCode::invalid_argument, "unknown argument " + arg);
  }
  return a;
}

// Crude but enough for the flat report zringd sends: "key":value pairs.
std::string field(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const auto at = json.find(needle);
  if (at == std::string::npos) return "?";
  auto begin = at + needle.size();
  auto end = json.find_first_of(",}", begin);
  std::string v = json.substr(begin, end - begin);
  if (!v.empty() && v.front() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

int status(const Args& a) {
  std::string endpoint = a.endpoint.value_or("");
  if (endpoint.empty()) {
    const zring::RingConfig config =
        zring::load_config(a.config.value_or("/etc/zring/zring.yaml"), a.node);
    endpoint = config.ipc;
  }
  const std::string report = zring::client::query_status(endpoint, std::chrono::seconds(5));
  if (a.json) {
    std::cout << report << "\n";
    return 0;
  }
  std::cout << "node        " << field(report, "node") << "\n"
            << "ring        " << (field(report, "ring_up") == "true" ? "up" : "down") << "\n"
            << "generation  " << field(report, "generation") << "\n"
            << "ops done    " << field(report, "ops_done") << "\n"
            << "ops failed  " << field(report, "ops_failed") << "\n"
            << "dropped     " << field(report, "dropped") << " ring messages\n";
  return 0;
}

int check_config(const Args& a) {
  if (!a.file) throw zring::Error(zring::ErrorCode::invalid_argument, "check-config needs FILE");
  const zring::RingConfig c = zring::load_config(*a.file, a.node);
  std::cout << *a.file << ": ok: " << c.nodes.size() << " nodes x " << c.local_ranks
            << " local ranks (world size " << c.world_size() << ")\n";
  for (std::size_t i = 0; i < c.nodes.size(); ++i)
    std::cout << "  " << i << "  " << c.nodes[i].name << "  " << c.nodes[i].address
              << (i == c.self_index ? "   <- self" : "") << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.command == "status") return status(a);
    if (a.command == "check-config") return check_config(a);
    if (a.command == "--help" || a.command == "help") {
      std::cout << kUsage;
      return 0;
    }
    throw zring::Error(zring::ErrorCode::invalid_argument, "unknown command " + a.command);
  } catch (const zring::Error& e) {
    std::cerr << "zringctl: " << e.what() << "\n";
    if (e.code() == zring::ErrorCode::invalid_argument) std::cerr << kUsage;
    return e.code() == zring::ErrorCode::config_invalid ? 2 : 1;
  }
}
