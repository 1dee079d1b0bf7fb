// harness.hpp - what the three all-reduce bench clients (zring, Gloo, MPI)
// share: the command line, the per-size plan, the gradient they reduce and
// the timings file the driver (bench/allreduce_bench.py) reads.
//
// Every client reduces the same float32 gradient (normal, sigma 1e-3, a
// different stream per rank), for each size of the plan: `warmup` untimed
// ops, then `iters` ops timed one by one with steady_clock. One CSV row per
// timed op:
//
//   bytes,iter,seconds,wire_bytes,checksum
//
// wire_bytes is what this rank's node put on the wire for the op when the
// implementation says (zring), else empty; checksum is a hash of the result's
// bits (first and last 1024 values), so the driver can tell whether every
// rank got the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zring::bench {

// One size of the run: how many bytes of float32, how many untimed and timed ops.
struct SizeStep {
  std::size_t bytes = 0;
  int warmup = 0;
  int iters = 0;
  [[nodiscard]] std::size_t elements() const noexcept { return bytes / sizeof(float); }
};

// "--key value" arguments. Unknown keys are an error, so a typo in the
// driver never silently changes what is measured.
class Args {
 public:
  Args(int argc, char** argv, const std::vector<std::string>& known);
  [[nodiscard]] std::string get(const std::string& key) const;  // throws when missing
  [[nodiscard]] std::string get(const std::string& key, const std::string& fallback) const;
  [[nodiscard]] long get_int(const std::string& key, long fallback) const;

 private:
  std::map<std::string, std::string> values_;
};

// "--plan BYTES:WARMUP:ITERS,..." -> steps, in the given order.
std::vector<SizeStep> parse_plan(const std::string& text);

// The gradient of a rank: `elements` normal values, sigma 1e-3, from a
// stream seeded by the rank (the same on every run).
std::vector<float> make_gradient(std::size_t elements, std::uint64_t rank);

// FNV-1a over the bits of the first and last 1024 values.
std::uint64_t checksum(const float* values, std::size_t n);

// Appends timing rows to a CSV file (header written on open).
class TimingsFile {
 public:
  explicit TimingsFile(const std::string& path);
  void row(std::size_t bytes, int iter, double seconds, std::optional<std::uint64_t> wire_bytes,
           std::uint64_t sum);

 private:
  std::ofstream out_;
};

// Seconds since `start` (a steady_clock time point in nanoseconds).
double seconds_since(std::int64_t start_ns);
std::int64_t now_ns();

}  // namespace zring::bench
