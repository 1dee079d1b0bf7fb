// local_ranks.hpp - a node's local ranks and the ops they make (daemon-internal).
//
// Socket-free: which client holds each local rank, the submissions that wait
// for the other ranks, the ops the ring runs and whose requests they answer,
// the ranks that owe a failure (late for an op the others gave up on), each
// rank's shared buffer, and when an incomplete op is late. The IPC server
// feeds it what clients send and sends what it returns; the unit tests
// (tests/daemon) drive it directly.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <zring/compression.hpp>
#include <zring/config.hpp>
#include <zring/error.hpp>

#include "collective/link.hpp"
#include "collective/manifest.hpp"
#include "ring_worker.hpp"
#include "transport/shared_region.hpp"

namespace zring::daemon {

using IpcClock = std::chrono::steady_clock;

// One local rank's submission of an op.
struct Request {
  std::string client;    // ZeroMQ routing id
  std::uint64_t id = 0;  // the client's request id
  std::size_t local_rank = 0;
  collective::Manifest manifest;
  CompressionMethod method;
  collective::Bytes values;
  std::shared_ptr<transport::SharedRegion> region;  // answer there (submit_shared)
  bool staged = false;             // submit_staged: the values arrive in region while the op runs
  std::vector<float> block_stats;  // submit_staged: the client's (collective::OpInput::given_stats)
  IpcClock::time_point at;
  std::optional<std::string> given_up;  // why its client no longer waits: the op fails
  // Why its op fails on this node alone, without taking a place in the
  // ring: zringd read it timeout_ms or more after it was sent (zringd was
  // stopped or starved), so every node that waited for that op has failed
  // it by now, as this one would have had it been running.
  std::optional<std::string> stale;
  // Its Submit, request 0, no wait and no block statistics, encoded, when
  // its op may be rung again on the bell (RepeatOp: one local rank, values
  // in the shared buffer, read in time); empty otherwise.
  std::string repeat_key;
};

// Why a submission's block statistics (wire::Submit::block_stats) cannot be
// taken: not as many as its manifest and method have blocks for
// (collective::client_block_stats, on a ring file of `nodes` nodes);
// nothing when they can, or there are none.
std::optional<std::string> block_stats_refusal(const wire::Submit& submit,
                                               const CompressionMethod& method, std::size_t nodes);

// An error answer to a client's request.
struct Refusal {
  std::string client;
  std::uint64_t request = 0;
  ErrorCode code = ErrorCode::internal;
  std::string text;
};

class LocalRanks {
 public:
  explicit LocalRanks(const RingConfig& config);

  // "rank 5 (local rank 1 of node 'b')"
  [[nodiscard]] std::string rank_name(std::size_t local_rank) const;

  // A hello from `client` as local rank l (in range). When a new process
  // takes the rank, the old one's waiting requests are refused, the rank's
  // debt and shared buffer go, and `taken` says the ring must forget the
  // rank's error-feedback residuals.
  struct Hello {
    bool taken = false;
    std::vector<Refusal> refused;
  };
  Hello hello(const std::string& client, std::size_t local_rank, bool clock_shared);
  // Whether the rank's hello showed a send time on zringd's clock.
  [[nodiscard]] bool clock_shared(std::size_t local_rank) const {
    return clock_shared_.at(local_rank);
  }

  // Nothing when `client` holds local rank l, else why it may not speak for it.
  [[nodiscard]] std::optional<Refusal> check_owner(const std::string& client,
                                                   std::size_t local_rank,
                                                   std::uint64_t request) const;

  // Local rank l's shared buffer in `slot` (null before it asked for one).
  [[nodiscard]] const std::shared_ptr<transport::SharedRegion>& region(
      std::size_t local_rank, wire::SharedSlot slot) const {
    return regions_.at(local_rank).at(static_cast<std::size_t>(slot));
  }
  void set_region(std::size_t local_rank, wire::SharedSlot slot,
                  std::shared_ptr<transport::SharedRegion> region) {
    regions_.at(local_rank).at(static_cast<std::size_t>(slot)) = std::move(region);
  }

  // A request of local rank l that zringd read too late (for a shared
  // buffer) makes its next submission stale: take_late() says why, once.
  void mark_late(std::size_t local_rank, std::string why) { late_.at(local_rank) = std::move(why); }
  [[nodiscard]] std::optional<std::string> take_late(std::size_t local_rank) {
    return std::exchange(late_.at(local_rank), std::nullopt);
  }

  // Queues a checked submission, unless the rank owes a failure: then the
  // submission is the op the others gave up on, and gets that failure.
  // A submission its client gave up on (given_up) takes its place anyway.
  [[nodiscard]] std::optional<Refusal> submit(Request request);

  // Ops as assemble() and fail_late() make them: jobs for the ring (their
  // requests run until finish()), and stale ops, which never reach the
  // ring: their manifest (for the stats), why, and the answers to send.
  struct StaleOp {
    collective::Manifest manifest;
    Status failure;
    std::vector<Refusal> answers;
  };
  struct Made {
    std::vector<OpJob> jobs;
    std::vector<StaleOp> stale;
    std::vector<std::shared_ptr<const RepeatOp>> repeats;  // to arm: jobs a client may ring again
  };

  // Every op all local ranks have submitted, oldest first.
  [[nodiscard]] Made assemble();

  // When the oldest waiting submission is late (time_point::max(): none waits).
  [[nodiscard]] IpcClock::time_point stall_deadline() const;
  // At or after stall_deadline(), while some ranks have not submitted: the
  // op fails on every rank of the ring (the job tells the ring why), or on
  // this node alone when a submission is stale; the late ranks owe its
  // failure. Nothing otherwise.
  [[nodiscard]] Made fail_late(IpcClock::time_point now);

  // The requests of a job the ring answered (none for an unknown job).
  [[nodiscard]] std::vector<Request> finish(std::uint64_t job);

  // Every request that waits for its op or whose op runs (keepalives).
  [[nodiscard]] std::vector<const Request*> pending() const;
  // Refuses every pending request with `code`, `why`, and forgets them and
  // the shared buffers (their files go).
  [[nodiscard]] std::vector<Refusal> clear(ErrorCode code, const std::string& why);

 private:
  const RingConfig& config_;
  std::vector<std::deque<Request>> waiting_;      // per local rank
  std::vector<std::string> owners_;               // per local rank: its client
  std::vector<std::optional<Status>> owes_;       // per local rank: fail its next op
  std::vector<std::optional<std::string>> late_;  // per local rank: its next op is stale
  using Buffers = std::array<std::shared_ptr<transport::SharedRegion>, 2>;  // by wire::SharedSlot
  std::vector<Buffers> regions_;                                            // per local rank
  std::vector<bool> clock_shared_;  // per local rank: its hello's send time read as ours
  std::map<std::uint64_t, std::vector<Request>> running_;  // job id -> its requests
  std::uint64_t next_job_ = 1;
};

}  // namespace zring::daemon
