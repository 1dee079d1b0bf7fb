#include "netns/round_check.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>

#include "proc/process.hpp"
#include "support/reference.hpp"

namespace zring::netns {
namespace {

const std::vector<std::string> kClearErrors = {"peer_lost", "timeout", "aborted", "ring_changed"};

TensorMap decode(const std::string& bytes, const TensorMap& like, bool* complete) {
  TensorMap out;
  std::size_t at = 0;
  for (const auto& [name, t] : like) {
    std::vector<float> v(t.numel());
    const std::size_t n = v.size() * sizeof(float);
    if (at + n <= bytes.size() && n > 0) std::memcpy(v.data(), bytes.data() + at, n);
    at += n;
    out.emplace(name, Tensor(std::move(v), t.shape()));
  }
  *complete = at == bytes.size();
  return out;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

RoundChecker::RoundChecker(const Clients& clients, std::vector<std::string> node_names)
    : method_(CompressionMethod::parse(clients.method())),
      seed_(clients.seed()),
      sizes_(clients.sizes()),
      node_names_(std::move(node_names)),
      residuals_(node_names_.size()) {}

Verdict RoundChecker::check(const Round& round, Clock::time_point since,
                            const std::vector<std::size_t>* ring) {
  Verdict v;
  const std::size_t world = round.answers.size();
  const std::string where = "round " + std::to_string(round.number) + ", ";
  std::vector<TensorMap> inputs;
  for (std::size_t r = 0; r < world; ++r)
    inputs.push_back(testing::make_gradients(seed_, round.number, r, sizes_));
  // The expected average from every rank's current residual; the residuals
  // of the ranks that got a result move on.
  auto next_residuals = residuals_;
  const testing::Expected expected = testing::expected_average(
      method_, inputs, method_.has_error_feedback() ? &next_residuals : nullptr);
  // A ring that changes may run the op on its smaller ring or on all nodes.
  std::optional<testing::Expected> smaller;
  if (ring) {
    if (method_.has_error_feedback())
      throw std::logic_error("RoundChecker: a smaller ring with error feedback is not followed");
    std::vector<TensorMap> taking_part;
    for (const std::size_t r : *ring) taking_part.push_back(inputs.at(r));
    smaller = testing::expected_average(method_, taking_part, nullptr);
  }

  std::string reference_bytes;
  std::size_t reference_rank = 0;
  for (std::size_t r = 0; r < world; ++r) {
    const Answer& a = round.answers[r];
    const std::string rank = where + "rank " + std::to_string(r) + " (" + node_names_[r] + "): ";
    if (a.kind == Answer::Kind::none) {
      v.problems.push_back(rank + "no answer: the all-reduce hung");
      continue;
    }
    if (a.kind == Answer::Kind::error) {
      ++v.errors;
      ++v.codes[a.code];
      if (v.first_error.empty()) v.first_error = a.code + ": " + a.message;
      v.worst_error_seconds =
          std::max(v.worst_error_seconds, seconds(a.at - std::max(since, round.started)));
      if (std::find(kClearErrors.begin(), kClearErrors.end(), a.code) == kClearErrors.end())
        v.problems.push_back(
            rank + "error of kind '" + a.code +
            "' (expected peer_lost, timeout, aborted or ring_changed): " + a.message);
      const bool names_node =
          std::any_of(node_names_.begin(), node_names_.end(),
                      [&](const std::string& n) { return a.message.find(n) != std::string::npos; });
      if (!names_node) v.unnamed.push_back(rank + a.code + ": " + a.message);
      continue;
    }
    ++v.ok;
    residuals_[r] = next_residuals[r];
    const std::string bytes = proc::read_file(round.files[r]);
    if (reference_bytes.empty()) {
      reference_bytes = bytes;
      reference_rank = r;
      bool complete = false;
      const TensorMap result = decode(bytes, inputs[0], &complete);
      if (!complete) {
        v.problems.push_back(rank + "result of " + std::to_string(bytes.size()) +
                             " bytes, not the size of the tensors");
        continue;
      }
      testing::Comparison cmp = testing::compare(result, expected);
      if (!cmp.ok() && smaller && std::find(ring->begin(), ring->end(), r) != ring->end())
        cmp = testing::compare(result, *smaller);
      if (!cmp.ok())
        v.problems.push_back(rank + "WRONG RESULT for " + method_.to_string() + ": " +
                             std::to_string(cmp.bad) + " bad and " +
                             std::to_string(cmp.at_boundary) + " at a rounding boundary of " +
                             std::to_string(cmp.elements) + "; first: " + cmp.first_bad);
    } else if (bytes != reference_bytes) {
      v.problems.push_back(rank + "result bits differ from rank " + std::to_string(reference_rank) +
                           "'s");
    }
  }
  for (const std::string& f : round.files) std::remove(f.c_str());
  return v;
}

std::string describe(const Verdict& v) {
  std::ostringstream s;
  s << v.ok << " ok, " << v.errors << " errors";
  for (const auto& [code, n] : v.codes) s << " " << code << "=" << n;
  for (const std::string& p : v.problems) s << "\n  PROBLEM: " << p;
  for (const std::string& u : v.unnamed) s << "\n  ERROR NAMING NO NODE: " << u;
  return s.str();
}

}  // namespace zring::netns
