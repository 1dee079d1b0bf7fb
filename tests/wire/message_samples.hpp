// message_samples.hpp - valid ring, summary, IPC and trace messages for the wire
// tests, field-by-field comparison, and the promises of every decoded one.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "wire/wire.hpp"

namespace zring::wire_test {

// The first number that is not an error code (codes run 0 .. count - 1).
inline constexpr std::uint64_t kUnknownErrorCode = std::size(kErrorCodes);

const std::vector<wire::RingKind>& all_ring_kinds();
const std::vector<wire::IpcKind>& all_ipc_kinds();

// Tensors of every shape kind (scalar, empty, matrix, 4-D, long names),
// sorted by name.
wire::Manifest sample_manifest(std::size_t tensors = 5);

// Every field set to something other than its default.
wire::RingHeader sample_ring_header(wire::RingKind kind);
wire::NodeSummary sample_summary();  // with stats, non-finite entries and an error
wire::IpcMessage sample_ipc_message(wire::IpcKind kind);
// Every list non-empty, every member state, every flag set one way or the other.
wire::DaemonStatus sample_daemon_status();
std::vector<std::vector<std::uint8_t>> sample_payloads();
// Three records: one that went through, one that failed on the ring, one
// that never reached it.
wire::Trace sample_trace();

void check_equal(const wire::RingHeader& got, const wire::RingHeader& want);
void check_equal(const wire::NodeSummary& got, const wire::NodeSummary& want);
void check_equal(const wire::IpcMessage& got, const wire::IpcMessage& want);
void check_equal(const wire::Trace& got, const wire::Trace& want);

// What a decoder promises about everything it returns.
void check_valid(const wire::Manifest& m);
void check_valid(const wire::RingHeader& h);
void check_valid(const wire::NodeSummary& s);
void check_valid(const wire::IpcMessage& m);
void check_valid(const wire::Trace& t);

// A decoder under test, its result thrown away.
using Decoder = std::function<void(const std::uint8_t* data, std::size_t size)>;

// Checks that decode throws zring::Error(malformed_message) on bytes, with a
// message that mentions `mention`; returns the message.
std::string expect_malformed(const Decoder& decode, const std::vector<std::uint8_t>& bytes,
                             const std::string& mention = "");

}  // namespace zring::wire_test
