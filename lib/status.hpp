// status.hpp - a failure as a value (internal to libzring and zringd).
//
// Where a failure travels instead of being thrown (from the ring thread to
// the IPC thread, in a node's summary to the other nodes, from a control
// message to the op it fails, from a late rank's abandoned op to its next
// submission), it is one Status: the ErrorCode (docs/errors.md; never
// renumbered), the sentence that says what happened and where, and whether
// every node reaches the same verdict by itself from what all of them saw
// (a manifest mismatch: the ring stays in step, no abort is needed).
#pragma once

#include <string>
#include <zring/error.hpp>

namespace zring {

struct Status {
  ErrorCode code = ErrorCode::internal;
  std::string text;
  bool everyone_knows = false;

  [[nodiscard]] static Status of(const Error& e, bool everyone_knows = false) {
    return Status{e.code(), e.what(), everyone_knows};
  }
  // Throws it as the zring::Error it stands for.
  [[noreturn]] void raise() const { throw Error(code, text); }

  friend bool operator==(const Status&, const Status&) = default;
};

}  // namespace zring
