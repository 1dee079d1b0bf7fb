#include "reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "codec/codec.hpp"  // random_indices only

namespace zring::testing {
namespace {

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float round_to_half(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

float round_to_bf16(float x) {
  if (std::isnan(x)) return x;
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // to nearest, ties to even
  bits &= 0xFFFF0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

using Vec = std::vector<float>;

// One rank's D(C(c)) for the methods decided by the rank alone.
Vec own_selection(const CompressionMethod& m, const Vec& c) {
  Vec d(c.size(), 0.0f);
  switch (m.kind()) {
    case CompressionKind::none:
      return c;
    case CompressionKind::fp16:
      for (std::size_t i = 0; i < c.size(); ++i) d[i] = round_to_half(c[i]);
      return d;
    case CompressionKind::bf16:
      for (std::size_t i = 0; i < c.size(); ++i) d[i] = round_to_bf16(c[i]);
      return d;
    case CompressionKind::threshold:
      for (std::size_t i = 0; i < c.size(); ++i)
        if (!(std::fabs(c[i]) <= m.threshold_value())) d[i] = c[i];
      return d;
    case CompressionKind::topk: {
      std::vector<std::size_t> order(c.size());
      std::iota(order.begin(), order.end(), 0);
      auto key = [&](std::size_t i) { return std::isnan(c[i]) ? INFINITY : std::fabs(c[i]); };
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
      for (std::size_t j = 0; j < m.kept_for(c.size()); ++j) d[order[j]] = c[order[j]];
      return d;
    }
    default:
      return d;
  }
}

// quantization / signsgd: every rank on the block's shared grid.
// noise: how much float arithmetic on the grid (step, scale) may move a value.
std::vector<Vec> shared_grid(const CompressionMethod& m, const std::vector<Vec>& c,
                             std::vector<double>& boundary, std::vector<double>& noise) {
  const std::size_t n = c[0].size(), world = c.size();
  std::vector<Vec> d(world, Vec(n));
  for (std::size_t b = 0; b < n; b += 4096) {
    const std::size_t e = std::min(n, b + 4096);
    double lo = INFINITY, hi = -INFINITY, abs_sum = 0;
    bool finite = true;
    for (const Vec& v : c)
      for (std::size_t i = b; i < e; ++i) {
        finite = finite && std::isfinite(v[i]);
        lo = std::min<double>(lo, v[i]);
        hi = std::max<double>(hi, v[i]);
        abs_sum += std::fabs(v[i]);
      }
    for (std::size_t r = 0; r < world; ++r)
      for (std::size_t i = b; i < e; ++i) {
        if (!finite) {
          d[r][i] = NAN;
          continue;
        }
        if (m.kind() == CompressionKind::signsgd) {
          const double s = abs_sum / (static_cast<double>(world) * (e - b));
          d[r][i] = static_cast<float>(c[r][i] >= 0 ? s : -s);
          noise[i] = 5e-5 * s;  // a float sum of up to 4096 W magnitudes
          // A value this close to 0 may have the other sign in float: with
          // error feedback the residuals carry the float32 scale, not this
          // double one. Its sign flipping moves the average by 2s / W.
          if (std::fabs(c[r][i]) <= 1e-5 * s) boundary[i] = std::max(boundary[i], 2 * s / world);
          continue;
        }
        const double levels = std::ldexp(1.0, m.bits()) - 1;
        // The grid's step travels as float32: round it the same way.
        const double step = static_cast<float>((hi - lo) / levels);
        const double code = step == 0 ? 0 : std::nearbyint((c[r][i] - lo) / step);
        d[r][i] = static_cast<float>(lo + std::clamp(code, 0.0, levels) * step);
        boundary[i] = step / world;
        noise[i] = 1e-6 * (std::fabs(lo) + std::fabs(hi));
      }
  }
  return d;
}

}  // namespace

std::vector<float> make_values(std::uint64_t seed, std::size_t n) {
  std::vector<float> v(n);
  std::uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix(state) >> 11) / 9007199254740992.0;
    const double scale = 0.5 + static_cast<double>(i % 97) / 50.0;
    v[i] = static_cast<float>((2 * u - 1) * scale);
  }
  return v;
}

TensorMap tensors_from_bytes(const std::string& bytes, std::size_t offset, const TensorMap& like) {
  TensorMap out;
  std::size_t at = offset;
  for (const auto& [name, t] : like) {
    std::vector<float> v(t.numel(), std::numeric_limits<float>::quiet_NaN());
    const std::size_t have = at < bytes.size() ? std::min(v.size(), (bytes.size() - at) / 4) : 0;
    if (have != 0) std::memcpy(v.data(), bytes.data() + at, have * 4);
    at += v.size() * 4;
    out.emplace(name, Tensor(std::move(v), t.shape()));
  }
  return out;
}

TensorMap make_gradients(std::uint64_t seed, std::uint64_t round, std::size_t rank,
                         const std::vector<std::size_t>& sizes) {
  TensorMap out;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    char name[32];
    std::snprintf(name, sizeof name, "t%03zu", t);
    const std::uint64_t s = seed ^ (round * 0x100000001b3ull) ^ (rank * 0x9e3779b1ull) ^ (t << 40);
    out.emplace(name, Tensor(make_values(s, sizes[t])));
  }
  return out;
}

Expected expected_average(const CompressionMethod& method, const std::vector<TensorMap>& ranks,
                          std::vector<std::map<std::string, std::vector<float>>>* residuals) {
  Expected out;
  const std::size_t world = ranks.size();
  const CompressionMethod base = method.base();
  const bool ef = method.has_error_feedback() && residuals != nullptr;
  for (const auto& [name, tensor0] : ranks[0]) {
    const std::size_t n = tensor0.numel();
    std::vector<Vec> c;
    for (std::size_t r = 0; r < world; ++r) {
      Vec v = ranks[r].at(name).data();
      if (ef) {
        Vec& e = (*residuals)[r][name];
        e.resize(n, 0.0f);
        for (std::size_t i = 0; i < n; ++i) v[i] += e[i];
      }
      c.push_back(std::move(v));
    }
    std::vector<double> boundary(n, 0.0), noise(n, 0.0);
    std::vector<Vec> d;
    if (base.kind() == CompressionKind::quantization || base.kind() == CompressionKind::signsgd) {
      d = shared_grid(base, c, boundary, noise);
    } else {
      for (const Vec& v : c) d.push_back(own_selection(base, v));
    }
    Vec mean(n);
    std::vector<double> tol(n);
    const double unit = base.kind() == CompressionKind::fp16   ? std::ldexp(1.0, -10)
                        : base.kind() == CompressionKind::bf16 ? std::ldexp(1.0, -7)
                                                               : 4e-7;
    for (std::size_t i = 0; i < n; ++i) {
      double sum = 0, magnitude = 0;
      for (std::size_t r = 0; r < world; ++r) {
        sum += d[r][i];
        magnitude += std::fabs(d[r][i]);
      }
      mean[i] = static_cast<float>(sum / static_cast<double>(world));
      // Float sums in another order, and for fp16/bf16 one rounding per hop.
      tol[i] =
          unit * (magnitude + 1e-30) *
              (base.kind() == CompressionKind::fp16 || base.kind() == CompressionKind::bf16 ? 1.0
                                                                                            : 2.0) +
          noise[i] + 1e-37;
      boundary[i] = std::max(boundary[i] * 1.001 + tol[i], tol[i]);
    }
    if (ef) {
      for (std::size_t r = 0; r < world; ++r) {
        Vec& e = (*residuals)[r][name];
        for (std::size_t i = 0; i < n; ++i) {
          const float left = c[r][i] - d[r][i];
          e[i] = std::isfinite(left) ? left : 0.0f;
        }
      }
    }
    out.mean.emplace(name, Tensor(std::move(mean), tensor0.shape()));
    out.tolerance.emplace(name, std::move(tol));
    out.boundary.emplace(name, std::move(boundary));
  }
  return out;
}

Comparison compare(const TensorMap& result, const Expected& expected) {
  Comparison cmp;
  auto bad = [&](const std::string& what) {
    if (cmp.first_bad.empty()) cmp.first_bad = what;
    ++cmp.bad;
  };
  if (result.size() != expected.mean.size()) bad("result has another number of tensors");
  for (const auto& [name, want] : expected.mean) {
    auto it = result.find(name);
    if (it == result.end() || it->second.numel() != want.numel() ||
        it->second.shape() != want.shape()) {
      bad("tensor '" + name + "' missing or of another shape");
      continue;
    }
    const auto& tol = expected.tolerance.at(name);
    const auto& boundary = expected.boundary.at(name);
    for (std::size_t i = 0; i < want.numel(); ++i) {
      ++cmp.elements;
      const float got = it->second[i], w = want[i];
      if (!std::isfinite(w) || !std::isfinite(got)) {
        if (std::isfinite(w) != std::isfinite(got))
          bad(name + "[" + std::to_string(i) + "]: got " + std::to_string(got) + ", expected " +
              std::to_string(w));
        continue;
      }
      const double diff = std::fabs(static_cast<double>(got) - w);
      if (diff <= tol[i]) continue;
      if (diff <= boundary[i]) {
        ++cmp.at_boundary;
        continue;
      }
      bad(name + "[" + std::to_string(i) + "]: got " + std::to_string(got) + ", expected " +
          std::to_string(w) + " (tolerance " + std::to_string(tol[i]) + ")");
    }
  }
  return cmp;
}

std::string check_randomk(const CompressionMethod& method, const TensorMap& result,
                          const std::vector<TensorMap>& ranks) {
  const double world = static_cast<double>(ranks.size());
  for (const auto& [name, tensor] : ranks[0]) {
    const Tensor& got = result.at(name);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < got.numel(); ++i) {
      if (got[i] == 0.0f) continue;
      ++kept;
      double sum = 0, magnitude = 0;
      for (const TensorMap& r : ranks) {
        sum += r.at(name)[i];
        magnitude += std::fabs(r.at(name)[i]);
      }
      if (std::fabs(got[i] - sum / world) > 4e-7 * magnitude + 1e-37)
        return name + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
               " is not the average " + std::to_string(sum / world);
    }
    // A sampled average can be exactly 0 only by accident (measure zero here).
    if (kept != method.kept_for(tensor.numel()))
      return name + ": " + std::to_string(kept) + " values kept, expected " +
             std::to_string(method.kept_for(tensor.numel()));
  }
  return "";
}

std::vector<std::uint32_t> topk_by_bits(const std::vector<float>& x, std::size_t k) {
  const auto key = [&](std::uint32_t i) {
    return std::bit_cast<std::uint32_t>(x[i]) & 0x7fffffffu;
  };
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return key(a) != key(b) ? key(a) > key(b) : a < b;
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace zring::testing
