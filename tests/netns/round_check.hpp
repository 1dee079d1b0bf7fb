// round_check.hpp - what every rank of a round under a fault must see:
// either the correct result (identical bits on every rank that got one,
// equal to the reference average of tests/support) or a clear error (a
// peer_lost / timeout / aborted / ring_changed zring::Error naming a node of the ring),
// never silence.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include <zring/zring.hpp>

#include "netns/netns_ring.hpp"

namespace zring::netns {

struct Verdict {
  std::size_t ok = 0;
  std::size_t errors = 0;
  std::map<std::string, int> codes;   // error kind -> ranks
  std::vector<std::string> problems;  // a hang, a wrong result, an unexpected error kind
  std::vector<std::string> unnamed;   // clear errors whose text names no node
  std::string first_error;            // one error text, for the log
  // Seconds from `since` to the latest error answer (0 when none).
  double worst_error_seconds = 0;
  [[nodiscard]] bool all_ok() const { return problems.empty() && errors == 0; }
};

class RoundChecker {
 public:
  // Error texts must name one of `node_names`. Methods with error feedback
  // are followed rank by rank: a rank's residual moves on only when its op
  // succeeded (zringd restores it when an op fails). randomk is not covered.
  RoundChecker(const Clients& clients, std::vector<std::string> node_names);

  // Checks one round; `since` is when the fault began (or the round started,
  // whichever is later) for the time-to-error. With `ring`, the ranks of a
  // smaller ring the op may have run on instead (a node left or joins): a
  // result of one of them may also be their average (not with error
  // feedback).
  Verdict check(const Round& round, Clock::time_point since,
                const std::vector<std::size_t>* ring = nullptr);

 private:
  CompressionMethod method_;
  std::uint64_t seed_;
  std::vector<std::size_t> sizes_;
  std::vector<std::string> node_names_;
  std::vector<std::map<std::string, std::vector<float>>> residuals_;  // per rank
};

std::string describe(const Verdict& v);

}  // namespace zring::netns
