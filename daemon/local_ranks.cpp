#include "local_ranks.hpp"

#include <algorithm>

namespace zring::daemon {

std::optional<std::string> block_stats_refusal(const wire::Submit& submit,
                                               const CompressionMethod& method, std::size_t nodes) {
  if (submit.block_stats.empty()) return std::nullopt;
  const std::size_t expected = collective::client_block_stats(submit.manifest, method, nodes);
  if (submit.block_stats.size() == expected) return std::nullopt;
  return "a staged op of " + std::to_string(submit.manifest.elements()) + " elements in " +
         std::to_string(submit.manifest.tensors.size()) + " tensors with method " +
         submit.manifest.method + " came with " + std::to_string(submit.block_stats.size()) +
         " block statistics, not " + std::to_string(expected);
}

LocalRanks::LocalRanks(const RingConfig& config)
    : config_(config),
      waiting_(config.local_ranks),
      owners_(config.local_ranks),
      owes_(config.local_ranks),
      late_(config.local_ranks),
      regions_(config.local_ranks),
      clock_shared_(config.local_ranks, false) {}

std::string LocalRanks::rank_name(std::size_t local_rank) const {
  return "rank " + std::to_string(config_.self_index * config_.local_ranks + local_rank) +
         " (local rank " + std::to_string(local_rank) + " of node '" + config_.self + "')";
}

LocalRanks::Hello LocalRanks::hello(const std::string& client, std::size_t l, bool clock_shared) {
  Hello hello;
  clock_shared_.at(l) = clock_shared;
  if (owners_[l] == client) return hello;
  // A new process takes the rank: the old one's state goes.
  for (const Request& r : waiting_[l])
    hello.refused.push_back(
        {r.client, r.id, ErrorCode::aborted, "another process connected as " + rank_name(l)});
  waiting_[l].clear();
  owes_[l].reset();
  late_[l].reset();
  regions_[l] = {};
  owners_[l] = client;
  hello.taken = true;
  return hello;
}

// Only the process that said hello last for a local rank speaks for it. A
// rank nobody holds means this daemon does not know the client (it restarted
// since): the client may say hello again and retry.
std::optional<Refusal> LocalRanks::check_owner(const std::string& client, std::size_t l,
                                               std::uint64_t request) const {
  if (l < config_.local_ranks && owners_[l] == client) return std::nullopt;
  if (l < config_.local_ranks && owners_[l].empty()) {
    return Refusal{client, request, ErrorCode::connection_failed,
                   "zringd does not know this process as local rank " + std::to_string(l) +
                       " (it restarted since the process connected): connect again"};
  }
  return Refusal{
      client, request, ErrorCode::invalid_argument,
      "local rank " + std::to_string(l) +
          (l < config_.local_ranks ? " is held by another process"
                                   : " is out of range for node '" + config_.self + "'")};
}

std::optional<Refusal> LocalRanks::submit(Request r) {
  const std::size_t l = r.local_rank;
  if (owes_.at(l) && !r.given_up) {
    // This rank was late for an op the others already gave up on: this
    // submission is that op, and fails like it did for them.
    Refusal refusal{r.client, r.id, owes_[l]->code, owes_[l]->text};
    owes_[l].reset();
    return refusal;
  }
  waiting_[l].push_back(std::move(r));
  return std::nullopt;
}

namespace {

// The text of the first stale request, if any.
const std::string* stale_text(const std::vector<Request>& requests) {
  for (const Request& r : requests)
    if (r.stale) return &*r.stale;
  return nullptr;
}

LocalRanks::StaleOp stale_op(const std::vector<Request>& requests, const std::string& why) {
  LocalRanks::StaleOp op{requests.front().manifest, Status{ErrorCode::timeout, why}, {}};
  for (const Request& r : requests) op.answers.push_back({r.client, r.id, ErrorCode::timeout, why});
  return op;
}

}  // namespace

// One submission from every local rank makes an op.
LocalRanks::Made LocalRanks::assemble() {
  Made made;
  while (true) {
    for (const auto& queue : waiting_)
      if (queue.empty()) return made;
    std::vector<Request> requests;
    for (auto& queue : waiting_) {
      requests.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    if (const std::string* stale = stale_text(requests)) {
      made.stale.push_back(stale_op(requests, *stale));
      continue;
    }
    OpJob job;
    job.id = next_job_++;
    collective::OpInput& input = job.input;
    input.manifest = requests[0].manifest;
    input.method = requests[0].method;
    for (const Request& r : requests)
      if (r.given_up && !input.failure) input.failure = Status{ErrorCode::aborted, *r.given_up};
    for (std::size_t l = 1; l < requests.size() && !input.failure; ++l) {
      const std::string diff = collective::manifest_difference(requests[0].manifest, rank_name(0),
                                                               requests[l].manifest, rank_name(l));
      if (!diff.empty())
        input.failure = Status{ErrorCode::manifest_mismatch, "manifest mismatch: " + diff};
    }
    if (!input.failure) {
      for (const Request& r : requests) {
        job.values.push_back(r.values);
        if (!r.staged) continue;
        job.staged.resize(requests.size());
        job.staged_who.resize(requests.size());
        job.staged[r.local_rank] = r.region;
        job.staged_who[r.local_rank] = rank_name(r.local_rank);
      }
      if (requests.size() == 1) input.given_stats = std::move(requests[0].block_stats);
      if (requests[0].region) {
        input.output = reinterpret_cast<float*>(requests[0].region->data());
        input.output_owner = requests[0].region;
      }
      const bool all_on_boards = std::all_of(requests.begin(), requests.end(),
                                             [](const Request& r) { return r.region != nullptr; });
      if (all_on_boards)
        for (const Request& r : requests)
          job.board_answers.push_back({r.region, r.id, r.local_rank});
      if (requests.size() == 1 && !requests[0].repeat_key.empty() && all_on_boards) {
        auto op = std::make_shared<RepeatOp>();
        op->client = requests[0].client;
        op->local_rank = requests[0].local_rank;
        op->key = std::move(requests[0].repeat_key);
        op->clock_shared = clock_shared_.at(op->local_rank);
        op->stats = job.input.given_stats.size();
        op->job = job;
        op->job.id = 0;
        op->job.input.given_stats.clear();
        made.repeats.push_back(std::move(op));
      }
    }
    running_.emplace(job.id, std::move(requests));
    made.jobs.push_back(std::move(job));
  }
}

IpcClock::time_point LocalRanks::stall_deadline() const {
  std::optional<IpcClock::time_point> oldest;
  for (const auto& queue : waiting_)
    if (!queue.empty() && (!oldest || queue.front().at < *oldest)) oldest = queue.front().at;
  return oldest ? *oldest + config_.timeout : IpcClock::time_point::max();
}

// Some local ranks submitted, others did not within the timeout: the op
// fails on every rank of the ring, naming the late ones (on this node
// alone when a submission is stale: the other nodes are past it).
LocalRanks::Made LocalRanks::fail_late(IpcClock::time_point now) {
  Made made;
  std::string late;
  std::vector<bool> is_late(waiting_.size(), false);
  for (std::size_t l = 0; l < waiting_.size(); ++l) {
    if (!waiting_[l].empty()) continue;
    is_late[l] = true;
    late += (late.empty() ? "" : ", ") + rank_name(l);
  }
  if (late.empty() || now < stall_deadline()) return made;
  std::vector<Request> requests;
  for (auto& queue : waiting_) {
    if (queue.empty()) continue;
    requests.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  Status failure{ErrorCode::timeout, late + " did not submit the op within " +
                                         std::to_string(config_.timeout.count()) +
                                         " ms, while other ranks of the node did"};
  Status owed{ErrorCode::aborted, "op abandoned: " + failure.text};
  if (const std::string* stale = stale_text(requests)) {
    // The op is over on every other node: it ends here too, off the ring.
    made.stale.push_back(stale_op(requests, *stale));
    owed = made.stale.back().failure;
  } else {
    OpJob job;
    job.id = next_job_++;
    job.input.failure = std::move(failure);
    job.input.manifest = requests.front().manifest;
    job.input.method = requests.front().method;
    running_.emplace(job.id, std::move(requests));
    made.jobs.push_back(std::move(job));
  }
  for (std::size_t l = 0; l < waiting_.size(); ++l)
    if (is_late[l]) owes_[l] = owed;
  return made;
}

std::vector<Request> LocalRanks::finish(std::uint64_t job) {
  const auto it = running_.find(job);
  if (it == running_.end()) return {};
  std::vector<Request> requests = std::move(it->second);
  running_.erase(it);
  return requests;
}

std::vector<const Request*> LocalRanks::pending() const {
  std::vector<const Request*> all;
  for (const auto& queue : waiting_)
    for (const Request& r : queue) all.push_back(&r);
  for (const auto& [job, requests] : running_)
    for (const Request& r : requests) all.push_back(&r);
  return all;
}

std::vector<Refusal> LocalRanks::clear(ErrorCode code, const std::string& why) {
  std::vector<Refusal> refused;
  for (const Request* r : pending()) refused.push_back({r->client, r->id, code, why});
  waiting_.assign(config_.local_ranks, {});
  running_.clear();
  regions_.assign(config_.local_ranks, {});
  return refused;
}

}  // namespace zring::daemon
