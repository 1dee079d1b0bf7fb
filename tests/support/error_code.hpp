// error_code.hpp - which zring::Error a call throws, for tests that assert
// the exact error they expect (not just that something failed).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <zring/error.hpp>

namespace zring::testing {

// Runs f; the code of the zring::Error it throws (its text in *what), or
// nothing when it returns. Other exceptions propagate.
template <typename F>
std::optional<ErrorCode> error_of(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return std::nullopt;
}

// Runs f and returns the code of the zring::Error it throws (its text in
// *what); throws std::logic_error, failing the test, when f throws nothing.
template <typename F>
ErrorCode code_of(F&& f, std::string* what = nullptr) {
  if (std::optional<ErrorCode> code = error_of(std::forward<F>(f), what)) return *code;
  throw std::logic_error("expected a zring::Error, nothing was thrown");
}

// True when f throws zring::Error with this code (false when it throws
// another code or nothing).
template <typename F>
bool throws_code(F&& f, ErrorCode code) {
  return error_of(std::forward<F>(f)) == code;
}

}  // namespace zring::testing
