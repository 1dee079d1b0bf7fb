#include "security/security_util.hpp"

#include <cstring>
#include <stdexcept>
#include <thread>
#include <zring/error.hpp>

#include "client/status.hpp"
#include "client/status_json.hpp"
#include "support/reference.hpp"

namespace zring::security_test {

using Clock = std::chrono::steady_clock;

namespace {

std::string trim_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  return text;
}

}  // namespace

TestRing::TestRing(RingSetup setup)
    : setup_(setup), ports_(proc::free_ports(setup.nodes)), daemons_(setup.nodes) {
  std::string yaml = "nodes:\n";
  for (std::size_t n = 0; n < setup_.nodes; ++n) {
    yaml += "  - {name: " + name(n) + ", address: " + address(n) + ", ipc: '" + ipc(n) + "'";
    if (setup_.curve) {
      // The tool operators use makes the keys.
      const std::string prefix = dir() + "/" + name(n);
      proc::Process keygen =
          proc::Process::spawn({ZRING_ZRINGCTL_PATH, "keygen", "--out", prefix, "--node", name(n)},
                               dir() + "/keygen.log");
      if (keygen.wait(std::chrono::seconds(30)).value_or(-1) != 0)
        throw std::runtime_error("zringctl keygen failed: " +
                                 proc::read_file(dir() + "/keygen.log"));
      public_keys_.push_back(trim_line(proc::read_file(prefix + ".pub")));
      yaml += ", public_key: '" + public_keys_.back() + "', secret_key_file: '" + prefix + ".key'";
    }
    yaml += "}\n";
  }
  yaml += "local_ranks: 1\n";
  yaml += "timeout_ms: " + std::to_string(setup_.timeout_ms) + "\n";
  yaml += "heartbeat_ms: " + std::to_string(setup_.heartbeat_ms) + "\n";
  yaml += "chunk_bytes: " + std::to_string(setup_.chunk_bytes) + "\n";
  if (setup_.max_message_bytes != 0)
    yaml += "max_message_bytes: " + std::to_string(setup_.max_message_bytes) + "\n";
  yaml += "log_level: debug\n";
  config_path_ = dir() + "/ring.yaml";
  proc::write_file(config_path_, yaml);
}

std::string TestRing::ipc(std::size_t n) const {
  return "ipc://" + dir() + "/" + name(n) + ".sock";
}

std::string TestRing::address(std::size_t n) const {
  return "tcp://127.0.0.1:" + std::to_string(port(n));
}

std::string TestRing::log(std::size_t n) const {
  return proc::read_file(dir() + "/" + name(n) + ".log");
}

void TestRing::start_all() {
  for (std::size_t n = 0; n < setup_.nodes; ++n) start(n);
}

void TestRing::start(std::size_t n, const std::string& config_path) {
  daemons_.at(n).kill();
  daemons_[n] =
      proc::Process::spawn({ZRING_ZRINGD_PATH, "--config",
                            config_path.empty() ? config_path_ : config_path, "--node", name(n)},
                           dir() + "/" + name(n) + ".log");
}

void TestRing::wait_up() {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (std::size_t n = 0; n < setup_.nodes; ++n) {
    for (;;) {
      std::string report;
      try {
        report = status(n);
      } catch (const Error&) {
      }
      if (report.find("\"ring_up\":true") != std::string::npos) break;
      if (!daemons_[n].running())
        throw std::runtime_error("zringd " + name(n) + " exited:\n" + log(n));
      if (Clock::now() > deadline)
        throw std::runtime_error("ring not up; log of " + name(n) + ":\n" + log(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::string TestRing::status(std::size_t n) const {
  return client::status_json(client::query_status(ipc(n), std::chrono::seconds(5)));
}

std::uint64_t TestRing::counter(std::size_t n, const std::string& key) const {
  return json_number(status(n), key);
}

std::uint64_t TestRing::wait_counter_above(std::size_t n, const std::string& key,
                                           std::uint64_t above) const {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::uint64_t value = counter(n, key);
  while (value <= above && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = counter(n, key);
  }
  return value;
}

std::uint64_t json_number(const std::string& json, const std::string& key) {
  const std::string field = "\"" + key + "\":";
  const auto at = json.find(field);
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in " + json);
  return std::stoull(json.substr(at + field.size(), 24));
}

// --- clients ---------------------------------------------------------------------

ClientBatch::ClientBatch(TestRing& ring, std::string method, std::uint64_t seed, int rounds,
                         std::vector<std::size_t> sizes)
    : ring_(ring),
      method_(std::move(method)),
      seed_(seed),
      rounds_(rounds),
      sizes_(std::move(sizes)) {
  std::string list;
  for (std::size_t s : sizes_) list += (list.empty() ? "" : ",") + std::to_string(s);
  for (std::size_t n = 0; n < ring_.nodes(); ++n) {
    outputs_.push_back(ring_.dir() + "/out-" + std::to_string(seed_) + "-" + std::to_string(n));
    clients_.push_back(proc::Process::spawn(
        {ZRING_RING_CLIENT_PATH, ring_.ipc(n), "0", method_, std::to_string(seed_),
         std::to_string(rounds_), list, outputs_.back(), "20000"},
        outputs_.back() + ".log"));
  }
}

std::string ClientBatch::finish() {
  std::string problems;
  for (std::size_t n = 0; n < clients_.size(); ++n) {
    const int status = clients_[n].wait(std::chrono::seconds(300)).value_or(-1);
    if (status != 0)
      problems += "client on node " + std::to_string(n) + " exited " + std::to_string(status) +
                  ": " + proc::read_file(outputs_[n] + ".err") + "\n";
  }
  if (!problems.empty()) return problems;
  std::size_t floats = 0;
  for (std::size_t s : sizes_) floats += s;
  std::vector<std::string> results;
  for (const std::string& out : outputs_) results.push_back(proc::read_file(out));
  for (int round = 0; round < rounds_; ++round) {
    const std::string problem =
        check_round(results, static_cast<std::size_t>(round) * floats * sizeof(float), method_,
                    seed_, static_cast<std::uint64_t>(round), sizes_);
    if (!problem.empty()) return problem;
  }
  return "";
}

std::string check_round(const std::vector<std::string>& results, std::size_t offset,
                        const std::string& method, std::uint64_t seed, std::uint64_t round,
                        const std::vector<std::size_t>& sizes) {
  std::size_t floats = 0;
  for (std::size_t s : sizes) floats += s;
  const std::string where = "round " + std::to_string(round) + " (" + method + "): ";
  for (std::size_t n = 0; n < results.size(); ++n) {
    if (results[n].size() < offset + floats * sizeof(float))
      return where + "node " + std::to_string(n) + " wrote only " +
             std::to_string(results[n].size()) + " bytes";
    if (results[n].compare(offset, floats * sizeof(float), results[0], offset,
                           floats * sizeof(float)) != 0)
      return where + "node " + std::to_string(n) + " got other bits than node 0";
  }
  std::vector<TensorMap> inputs;
  for (std::size_t rank = 0; rank < results.size(); ++rank)
    inputs.push_back(testing::make_gradients(seed, round, rank, sizes));
  TensorMap result;
  std::size_t at = offset;
  for (const auto& [name, tensor] : inputs[0]) {
    std::vector<float> values(tensor.numel());
    std::memcpy(values.data(), results[0].data() + at, values.size() * sizeof(float));
    at += values.size() * sizeof(float);
    result.emplace(name, Tensor(std::move(values), tensor.shape()));
  }
  const testing::Comparison cmp = testing::compare(
      result, testing::expected_average(CompressionMethod::parse(method), inputs, nullptr));
  return cmp.ok() ? "" : where + "wrong average: " + cmp.first_bad;
}

// --- frames ------------------------------------------------------------------------

std::vector<std::uint8_t> header_bytes(const wire::RingHeader& header) {
  return wire::encode_ring_header(header);
}

wire::RingHeader data_header(std::uint64_t generation, std::uint64_t op, std::uint32_t sender,
                             wire::Phase phase, std::uint32_t segment, std::uint32_t chunk,
                             std::uint32_t hop) {
  wire::RingHeader h;
  h.kind = wire::RingKind::data;
  h.generation = generation;
  h.op = op;
  h.sender = sender;
  h.tag = {phase, segment, chunk, hop};
  return h;
}

wire::RingHeader control_header(wire::RingKind kind, std::uint64_t generation, std::uint32_t sender,
                                std::uint64_t op) {
  wire::RingHeader h;
  h.kind = kind;
  h.generation = generation;
  h.op = op;
  h.sender = sender;
  h.origin = sender;
  h.text = "a stranger's message";
  return h;
}

}  // namespace zring::security_test
