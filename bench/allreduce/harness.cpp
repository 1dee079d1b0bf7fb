#include "harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace zring::bench {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform double in (0, 1]: never 0, so log() is finite.
double uniform(std::uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

std::size_t to_size(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(what + ": '" + text + "' is not a whole number");
  return static_cast<std::size_t>(v);
}

}  // namespace

Args::Args(int argc, char** argv, const std::vector<std::string>& known) {
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0 ||
        std::find(known.begin(), known.end(), key.substr(2)) == known.end())
      throw std::invalid_argument("unknown argument '" + key + "'");
    if (i + 1 >= argc) throw std::invalid_argument(key + " needs a value");
    values_[key.substr(2)] = argv[++i];
  }
}

std::string Args::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::invalid_argument("--" + key + " is required");
  return it->second;
}

std::string Args::get(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

long Args::get_int(const std::string& key, long fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : static_cast<long>(to_size(it->second, "--" + key));
}

std::vector<SizeStep> parse_plan(const std::string& text) {
  std::vector<SizeStep> steps;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const std::size_t a = item.find(':');
    const std::size_t b = a == std::string::npos ? a : item.find(':', a + 1);
    if (b == std::string::npos)
      throw std::invalid_argument("--plan: '" + item + "' is not BYTES:WARMUP:ITERS");
    SizeStep s;
    s.bytes = to_size(item.substr(0, a), "--plan bytes");
    s.warmup = static_cast<int>(to_size(item.substr(a + 1, b - a - 1), "--plan warmup"));
    s.iters = static_cast<int>(to_size(item.substr(b + 1), "--plan iters"));
    if (s.bytes == 0 || s.bytes % sizeof(float) != 0 || s.iters == 0)
      throw std::invalid_argument("--plan: '" + item + "' needs whole floats and iters >= 1");
    steps.push_back(s);
    begin = end + 1;
  }
  return steps;
}

std::vector<float> make_gradient(std::size_t elements, std::uint64_t rank) {
  std::vector<float> v(elements);
  std::uint64_t state = 0x5eed0000ull + rank * 0x1000193ull;
  constexpr double kTwoPi = 6.283185307179586;
  for (std::size_t i = 0; i < elements; i += 2) {  // Box-Muller: two normals per draw
    const double r = std::sqrt(-2.0 * std::log(uniform(state))) * 1e-3;
    const double t = kTwoPi * uniform(state);
    v[i] = static_cast<float>(r * std::cos(t));
    if (i + 1 < elements) v[i + 1] = static_cast<float>(r * std::sin(t));
  }
  return v;
}

std::uint64_t checksum(const float* values, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, values + i, sizeof bits);
      h = (h ^ bits) * 0x100000001b3ull;
    }
  };
  const std::size_t head = std::min<std::size_t>(n, 1024);
  mix(0, head);
  mix(std::max(head, n - std::min<std::size_t>(n, 1024)), n);
  return h;
}

TimingsFile::TimingsFile(const std::string& path) : out_(path) {
  if (!out_) throw std::runtime_error("cannot write " + path);
  out_ << "bytes,iter,seconds,wire_bytes,checksum\n";
}

void TimingsFile::row(std::size_t bytes, int iter, double seconds,
                      std::optional<std::uint64_t> wire_bytes, std::uint64_t sum) {
  char line[160];
  std::snprintf(line, sizeof line, "%zu,%d,%.9f,", bytes, iter, seconds);
  out_ << line;
  if (wire_bytes) out_ << *wire_bytes;
  std::snprintf(line, sizeof line, ",%016llx\n", static_cast<unsigned long long>(sum));
  out_ << line;
  out_.flush();
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double seconds_since(std::int64_t start_ns) {
  return static_cast<double>(now_ns() - start_ns) * 1e-9;
}

}  // namespace zring::bench
