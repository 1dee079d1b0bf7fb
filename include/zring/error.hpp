// zring/error.hpp - the one exception type of zring and its error kinds.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>

namespace zring {

// What went wrong, coarse enough to act on. docs/errors.md says what each
// kind means and what the user does about it.
// Each code's number is part of the protocol (it travels between zringd and
// its clients and between nodes): numbers are never reused or changed, and a
// new code takes the next one and joins kErrorCodes.
enum class ErrorCode : std::uint32_t {
  invalid_argument = 0,     // a bad value passed by the caller (method text, shape, ...)
  size_mismatch = 1,        // a tensor whose length differs from what it must match
  count_mismatch = 2,       // the number of contributions does not match world_size
  missing_tensor = 3,       // a tensor present on one side and absent on the other
  no_communicator = 4,      // world_size > 1 on a standalone object: nothing to talk to
  malformed_message = 5,    // bytes that do not decode (wire format, IPC, ring frame)
  unsupported_version = 6,  // a wire message of a protocol version we do not speak
  config_invalid = 7,       // a YAML configuration that does not validate
  manifest_mismatch = 8,    // ranks submitted different tensors or methods to one op
  timeout = 9,              // a deadline passed while waiting for a peer or the daemon
  peer_lost = 10,           // a ring peer or the daemon went away during an op
  connection_failed = 11,   // the daemon could not be reached
  aborted = 12,             // the op was aborted (another rank failed, or shutdown)
  resource_limit = 13,      // a size beyond the configured or sane limits
  internal = 14,            // a broken invariant inside zring: a bug, please report
  system_error = 15,        // the operating system refused (a file that cannot be
                            // written, no room for a shared buffer, ...)
  ring_changed = 16,        // the ring's members changed during the op (a node was
                            // dropped, came back or was taken in): run it again
};

// Every code, in number order: the one list that metrics, the Python module
// and the wire decoders go by.
inline constexpr ErrorCode kErrorCodes[] = {
    ErrorCode::invalid_argument,
    ErrorCode::size_mismatch,
    ErrorCode::count_mismatch,
    ErrorCode::missing_tensor,
    ErrorCode::no_communicator,
    ErrorCode::malformed_message,
    ErrorCode::unsupported_version,
    ErrorCode::config_invalid,
    ErrorCode::manifest_mismatch,
    ErrorCode::timeout,
    ErrorCode::peer_lost,
    ErrorCode::connection_failed,
    ErrorCode::aborted,
    ErrorCode::resource_limit,
    ErrorCode::internal,
    ErrorCode::system_error,
    ErrorCode::ring_changed,
};

// Whether `number` is one of kErrorCodes (a code may arrive from the wire).
constexpr bool is_error_code(std::uint64_t number) noexcept {
  for (const ErrorCode code : kErrorCodes)
    if (static_cast<std::uint64_t>(code) == number) return true;
  return false;
}

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
