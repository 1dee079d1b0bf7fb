// fuzz_check.hpp - what the fuzz targets share: a check that turns a broken
// promise into a crash libFuzzer reports, and a guard that lets
// zring::Error (the expected answer to hostile input) through and nothing
// else.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>
#include <zring/error.hpp>

namespace zring::fuzz {

// A decoded value that breaks a decoder's promise is a bug like a crash:
// print what and where, then abort so libFuzzer saves the input.
[[noreturn]] inline void broken(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", file, line, what);
  std::abort();
}

#define ZRING_FUZZ_CHECK(condition) \
  ((condition) ? (void)0 : ::zring::fuzz::broken(#condition, __FILE__, __LINE__))

// Runs body; true when it returned, false when it threw zring::Error. Any
// other exception is a bug: it is printed and the process aborts.
template <typename Body>
bool accepted(Body&& body) {
  try {
    body();
    return true;
  } catch (const zring::Error&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: %s escaped (not a zring::Error): %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: a non-std exception escaped\n");
    std::abort();
  }
}

}  // namespace zring::fuzz
