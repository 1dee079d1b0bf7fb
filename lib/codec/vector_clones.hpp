// vector_clones.hpp - ZRING_VECTOR_CLONES (internal).
//
// Marks a bulk loop to be compiled twice on x86-64 Linux: for the baseline
// (SSE2) and for AVX2, picked once at load time (GNU ifunc). The loops are
// plain scalar C++ that the compiler vectorises; only the vector width
// changes, and FMA is not enabled, so both versions produce the same bits.
// Elsewhere (or with ZRING_NO_VECTOR_CLONES) the baseline build is used.
#pragma once

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(ZRING_NO_VECTOR_CLONES)
#define ZRING_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ZRING_VECTOR_CLONES
#endif

// Hand-written AVX2 kernels (intrinsics in a function marked
// __attribute__((target("avx2")))) are chosen at run time with have_avx2();
// ZRING_AVX2_DISPATCH says whether this build has any.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZRING_AVX2_DISPATCH 1
namespace zring::codec {
inline bool have_avx2() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
}  // namespace zring::codec
#endif
