#include "netns/netns_ring.hpp"

#include <sstream>
#include <stdexcept>
#include <thread>
#include <zring/error.hpp>

#include "client/status.hpp"
#include "client/status_json.hpp"

namespace zring::netns {

NetnsRing::NetnsRing(const Network& network, NetnsRingOptions options)
    : network_(network), options_(std::move(options)), daemons_(network.nodes()) {
  proc::write_file(dir() + "/ring.yaml", yaml());
}

NetnsRing::~NetnsRing() {
  for (proc::Process& p : daemons_) p.kill();
}

std::string NetnsRing::name(std::size_t node) {
  static const char* const kNames[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"};
  return node < std::size(kNames) ? kNames[node] : "node" + std::to_string(node);
}

std::string NetnsRing::ipc(std::size_t node) const {
  return "ipc://" + dir() + "/" + name(node) + ".sock";
}

std::string NetnsRing::log(std::size_t node) const {
  return proc::read_file(dir() + "/" + name(node) + ".log");
}

std::string NetnsRing::yaml() const {
  std::ostringstream y;
  y << "nodes:\n";
  for (std::size_t n = 0; n < nodes(); ++n)
    y << "  - {name: " << name(n) << ", address: tcp://" << network_.address(n) << ":"
      << options_.port << ", ipc: '" << ipc(n) << "'}\n";
  y << "ipc: ipc://" << dir() << "/unused.sock\n"
    << "local_ranks: 1\n"
    << "timeout_ms: " << options_.timeout_ms << "\n"
    << "heartbeat_ms: " << options_.heartbeat_ms << "\n"
    << "chunk_bytes: " << options_.chunk_bytes << "\n"
    << "log_level: " << options_.log_level << "\n";
  if (options_.min_nodes != 0) y << "min_nodes: " << options_.min_nodes << "\n";
  return y.str();
}

void NetnsRing::start_all() {
  for (std::size_t n = 0; n < nodes(); ++n) {
    daemons_[n].kill();
    daemons_[n] = proc::Process::spawn(
        network_.in_node(n, {options_.zringd, "--config", dir() + "/ring.yaml", "--node", name(n)}),
        dir() + "/" + name(n) + ".log");
  }
}

bool NetnsRing::is_up(std::size_t node) {
  try {
    return client::query_status(ipc(node), std::chrono::milliseconds(500)).ring_up;
  } catch (const Error&) {
    return false;
  }
}

bool NetnsRing::wait_up(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (std::size_t n = 0; n < nodes(); ++n) {
    while (!is_up(n)) {
      if (Clock::now() > deadline || !daemons_[n].running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return true;
}

bool NetnsRing::daemons_running() {
  bool all = true;
  for (proc::Process& p : daemons_) all = p.running() && all;
  return all;
}

namespace {

std::string join(const std::vector<std::size_t>& sizes) {
  std::string s;
  for (std::size_t n : sizes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s.empty() ? "-" : s;
}

Answer parse_answer(const std::string& line) {
  Answer a;
  a.at = Clock::now();
  if (line == "ok") {
    a.kind = Answer::Kind::ok;
    return a;
  }
  a.kind = Answer::Kind::error;
  std::istringstream words(line);
  std::string verb;
  words >> verb >> a.code;
  std::getline(words, a.message);
  if (!a.message.empty() && a.message.front() == ' ') a.message.erase(0, 1);
  if (verb != "error") a.message = "unexpected answer: " + line;
  return a;
}

}  // namespace

Clients::Clients(const NetnsRing& ring, const Network& network, const std::string& method,
                 std::uint64_t seed, const std::vector<std::size_t>& sizes)
    : ring_(ring), method_(method), seed_(seed), sizes_(sizes) {
  // The client's own deadline for a silent daemon: well above the ring's.
  const std::string client_timeout = std::to_string(3 * ring.options().timeout_ms + 5000);
  for (std::size_t n = 0; n < ring.nodes(); ++n) {
    clients_.push_back(proc::Process::spawn_talking(
        network.in_node(n, {ring.options().ring_client, "--talk", ring.ipc(n), "0", method,
                            std::to_string(seed), join(sizes), client_timeout}),
        ring.dir() + "/client-" + NetnsRing::name(n) + ".log"));
    const auto ready = clients_.back().read_line(std::chrono::seconds(20));
    if (!ready || ready->rfind("ready ", 0) != 0)
      throw std::runtime_error(
          "client on " + NetnsRing::name(n) + " did not connect: " + ready.value_or("no answer") +
          "\n" + proc::read_file(ring.dir() + "/client-" + NetnsRing::name(n) + ".log"));
  }
}

Clients::~Clients() {
  for (proc::Process& c : clients_) {
    try {
      c.send_line("quit");
    } catch (const std::exception&) {  // already gone: kill() below reaps it
    }
    if (!c.wait(std::chrono::seconds(2))) c.kill();
  }
}

Round Clients::run_round(std::uint64_t number, std::chrono::milliseconds guard,
                         const InjectDuring* inject) {
  Round round;
  round.number = number;
  round.answers.resize(clients_.size());
  round.started = Clock::now();
  for (std::size_t n = 0; n < clients_.size(); ++n) {
    round.files.push_back(ring_.dir() + "/result-" + std::to_string(number) + "-" +
                          NetnsRing::name(n));
    clients_[n].send_line("round " + std::to_string(number) + " " + round.files.back());
  }
  // Poll every client in turn, so each answer's time is known to a few ms.
  const auto deadline = round.started + guard;
  std::size_t pending = clients_.size();
  while (pending > 0 && Clock::now() < deadline) {
    if (inject && !round.injected && Clock::now() >= round.started + inject->after) {
      inject->action();
      round.injected = Clock::now();
      round.answered_before_fault = clients_.size() - pending;
    }
    for (std::size_t n = 0; n < clients_.size(); ++n) {
      if (round.answers[n].kind != Answer::Kind::none) continue;
      if (auto line = clients_[n].read_line(std::chrono::milliseconds(2))) {
        round.answers[n] = parse_answer(*line);
        --pending;
      } else if (!clients_[n].running()) {
        round.answers[n].kind = Answer::Kind::error;
        round.answers[n].code = "client_died";
        round.answers[n].message =
            proc::read_file(ring_.dir() + "/client-" + NetnsRing::name(n) + ".log");
        round.answers[n].at = Clock::now();
        --pending;
      }
    }
  }
  return round;
}

}  // namespace zring::netns
