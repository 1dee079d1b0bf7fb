#include <ostream>
#include <zring/error.hpp>

namespace zring {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::size_mismatch:
      return "size_mismatch";
    case ErrorCode::count_mismatch:
      return "count_mismatch";
    case ErrorCode::missing_tensor:
      return "missing_tensor";
    case ErrorCode::no_communicator:
      return "no_communicator";
    case ErrorCode::malformed_message:
      return "malformed_message";
    case ErrorCode::unsupported_version:
      return "unsupported_version";
    case ErrorCode::config_invalid:
      return "config_invalid";
    case ErrorCode::manifest_mismatch:
      return "manifest_mismatch";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::peer_lost:
      return "peer_lost";
    case ErrorCode::connection_failed:
      return "connection_failed";
    case ErrorCode::aborted:
      return "aborted";
    case ErrorCode::resource_limit:
      return "resource_limit";
    case ErrorCode::internal:
      return "internal";
    case ErrorCode::system_error:
      return "system_error";
    case ErrorCode::ring_changed:
      return "ring_changed";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, ErrorCode code) { return out << to_string(code); }

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

}  // namespace zring
