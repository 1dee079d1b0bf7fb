// zring/error.hpp - the one exception type of zring and its error kinds.
#pragma once

#include <iosfwd>
#include <stdexcept>
#include <string>

namespace zring {

// What went wrong, coarse enough to act on. docs/errors.md says what each
// kind means and what the user does about it.
enum class ErrorCode {
  invalid_argument,   // a bad value passed by the caller (method text, shape, ...)
  size_mismatch,      // a tensor whose length differs from what it must match
  count_mismatch,     // the number of contributions does not match world_size
  missing_tensor,     // a tensor present on one side and absent on the other
  no_communicator,    // world_size > 1 on a standalone object: nothing to talk to
  malformed_message,  // bytes that do not decode (wire format, IPC, ring frame)
  unsupported_version,// a wire message of a protocol version we do not speak
  config_invalid,     // a YAML configuration that does not validate
  manifest_mismatch,  // ranks submitted different tensors or methods to one op
  timeout,            // a deadline passed while waiting for a peer or the daemon
  peer_lost,          // a ring peer or the daemon went away during an op
  connection_failed,  // the daemon could not be reached
  aborted,            // the op was aborted (another rank failed, or shutdown)
  resource_limit,     // a size beyond the configured or sane limits
  internal,           // a broken invariant inside zring: a bug, please report
};

// Stable lower-case name of an error kind ("size_mismatch", ...).
const char* to_string(ErrorCode code) noexcept;
std::ostream& operator<<(std::ostream& out, ErrorCode code);

// The one exception zring throws. what() is a full sentence: what happened,
// where (rank / tensor / node) and, where it helps, what to do.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace zring
