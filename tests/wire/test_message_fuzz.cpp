// test_message_fuzz.cpp - ring headers, summaries, IPC messages, traces and
// payload lists against every truncation, other protocol versions and
// thousands of seeded corruptions: each throws zring::Error or decodes to a
// message that keeps every promise of its decoder. Any other exception, a crash or a
// sanitizer report fails the test.
#include <boost/test/unit_test.hpp>
#include <functional>
#include <random>
#include <zring/error.hpp>

#include "message_samples.hpp"
#include "msgpack_value.hpp"
#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wt = zring::wire_test;
namespace wire = zring::wire;
using wt::Bytes;
using zring::ErrorCode;

namespace {

// Decodes bytes: true when it threw zring::Error; otherwise checks the
// message and that encoding it again decodes to the same.
template <typename Decode, typename Encode>
bool rejected_by(const Bytes& bytes, Decode decode, Encode encode) {
  decltype(decode(bytes.data(), bytes.size())) message;
  try {
    message = decode(bytes.data(), bytes.size());
  } catch (const zring::Error&) {
    return true;
  }
  wt::check_valid(message);
  const Bytes again = encode(message);
  wt::check_equal(decode(again.data(), again.size()), message);
  return false;
}

// One message type under test: a valid sample and its decoder.
struct Subject {
  std::string name;
  Bytes sample;
  std::function<bool(const Bytes&)> rejected;
};

std::vector<Subject> subjects() {
  std::vector<Subject> out;
  const auto ring_rejects = [](const Bytes& b) {
    return rejected_by(b, wire::decode_ring_header, wire::encode_ring_header);
  };
  const auto summary_rejects = [](const Bytes& b) {
    return rejected_by(b, wire::decode_summary, wire::encode_summary);
  };
  const auto ipc_rejects = [](const Bytes& b) {
    return rejected_by(b, wire::decode_ipc, wire::encode_ipc);
  };
  for (const wire::RingKind kind : wt::all_ring_kinds())
    out.push_back({"ring header, kind " + std::to_string(static_cast<int>(kind)),
                   wire::encode_ring_header(wt::sample_ring_header(kind)), ring_rejects});
  out.push_back({"summary", wire::encode_summary(wt::sample_summary()), summary_rejects});
  for (const wire::IpcKind kind : wt::all_ipc_kinds())
    out.push_back({"IPC message, kind " + std::to_string(static_cast<int>(kind)),
                   wire::encode_ipc(wt::sample_ipc_message(kind)), ipc_rejects});
  const auto trace_rejects = [](const Bytes& b) {
    return rejected_by(b, wire::decode_trace, wire::encode_trace);
  };
  out.push_back({"trace", wire::encode_trace(wt::sample_trace()), trace_rejects});
  return out;
}

// Decodes a payload list of the sample's count: true when it threw
// zring::Error; otherwise the spans must tile the buffer exactly.
bool list_rejected(const Bytes& bytes) {
  const std::size_t count = wt::sample_payloads().size();
  std::vector<wire::Span> spans;
  try {
    spans = wire::decode_payload_list(bytes.data(), bytes.size(), count);
  } catch (const zring::Error&) {
    return true;
  }
  BOOST_TEST_REQUIRE(spans.size() == count);
  const std::uint8_t* at = bytes.data() + 4 + 4 * count;
  for (const wire::Span& span : spans) {
    BOOST_TEST((span.data == at));
    at += span.size;
  }
  BOOST_TEST((at == bytes.data() + bytes.size()));
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(message_fuzz)

BOOST_AUTO_TEST_CASE(every_truncation_throws) {
  for (const Subject& s : subjects()) {
    BOOST_TEST_CONTEXT(s.name) {
      BOOST_TEST_REQUIRE(!s.rejected(s.sample));
      for (std::size_t n = 0; n < s.sample.size(); ++n) {
        // A fresh allocation of exactly n bytes, so a read past it is caught
        // by the address sanitizer.
        const Bytes cut(s.sample.begin(), s.sample.begin() + static_cast<std::ptrdiff_t>(n));
        BOOST_TEST_CONTEXT("length " << n) { BOOST_TEST(s.rejected(cut)); }
      }
    }
  }
  const Bytes list = wire::encode_payload_list(wt::sample_payloads());
  BOOST_TEST_REQUIRE(!list_rejected(list));
  for (std::size_t n = 0; n < list.size(); ++n) {
    const Bytes cut(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n));
    BOOST_TEST_CONTEXT("payload list, length " << n) { BOOST_TEST(list_rejected(cut)); }
  }
}

BOOST_AUTO_TEST_CASE(other_versions_are_unsupported) {
  const std::vector<std::pair<std::string, wt::Decoder>> decoders = {
      {"ring", [](const std::uint8_t* d, std::size_t n) { (void)wire::decode_ring_header(d, n); }},
      {"summary", [](const std::uint8_t* d, std::size_t n) { (void)wire::decode_summary(d, n); }},
      {"ipc", [](const std::uint8_t* d, std::size_t n) { (void)wire::decode_ipc(d, n); }},
      {"trace", [](const std::uint8_t* d, std::size_t n) { (void)wire::decode_trace(d, n); }}};
  const std::vector<Bytes> samples = {
      wire::encode_ring_header(wt::sample_ring_header(wire::RingKind::abort)),
      wire::encode_summary(wt::sample_summary()),
      wire::encode_ipc(wt::sample_ipc_message(wire::IpcKind::submit)),
      wire::encode_trace(wt::sample_trace())};
  for (std::size_t i = 0; i < decoders.size(); ++i) {
    // Not a structured binding: clang 14 cannot capture one in a lambda.
    const std::string& name = decoders[i].first;
    const wt::Decoder& decode = decoders[i].second;
    for (const std::uint64_t version :
         {0ull, 1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull, 8ull, 9ull, 11ull, 255ull, 1ull << 40}) {
      BOOST_TEST_CONTEXT(name << ", version " << version) {
        wt::Value m = wt::parse_value(samples[i]);
        m[0] = version;
        const Bytes bytes = wt::pack_value(m);
        std::string message;
        BOOST_TEST((wt::code_of([&] { decode(bytes.data(), bytes.size()); }, &message) ==
                    ErrorCode::unsupported_version));
        BOOST_TEST(message.find(std::to_string(version)) != std::string::npos);
      }
    }
    // The version is judged before the body, whatever layout it has.
    const std::uint8_t type = samples[i][2];
    const auto next = static_cast<std::uint8_t>(wire::kWireVersion + 1);
    const Bytes future = {0x93, next, type, 0x80};  // [next, type, {}]
    BOOST_TEST_CONTEXT(name << ", future layout") {
      BOOST_TEST((wt::code_of([&] { decode(future.data(), future.size()); }) ==
                  ErrorCode::unsupported_version));
    }
    const Bytes cut = {0xdd, 0x00, 0x00, 0x00, 0x09, next};  // array32 of 9: [next, ...
    BOOST_TEST(
        (wt::code_of([&] { decode(cut.data(), cut.size()); }) == ErrorCode::unsupported_version));
  }
}

BOOST_AUTO_TEST_CASE(corruptions_of_the_header_all_throw) {
  // The array header, the version and the type: any other value of any of
  // these bytes must be caught.
  for (const Subject& s : subjects()) {
    const std::size_t header = s.sample[0] == 0xdc ? 5 : 3;  // array16 or fixarray
    for (std::size_t at = 0; at < header; ++at)
      for (int v = 0; v < 256; ++v) {
        if (v == s.sample[at]) continue;
        Bytes bytes = s.sample;
        bytes[at] = static_cast<std::uint8_t>(v);
        BOOST_TEST_CONTEXT(s.name << ", byte " << at << " = " << v) {
          BOOST_TEST(s.rejected(bytes));
        }
      }
  }
}

BOOST_AUTO_TEST_CASE(seeded_corruptions_throw_or_decode_valid_messages) {
  std::mt19937_64 rng(20240612);
  constexpr int kTrials = 3000;  // per message type
  for (const Subject& s : subjects()) {
    std::uniform_int_distribution<std::size_t> position(0, s.sample.size() - 1);
    std::uniform_int_distribution<int> delta(1, 255), changes(1, 3);
    std::size_t thrown = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
      Bytes bytes = s.sample;
      for (int c = changes(rng); c > 0; --c) {
        const std::size_t at = position(rng);
        bytes[at] = static_cast<std::uint8_t>(bytes[at] + delta(rng));
      }
      BOOST_TEST_CONTEXT(s.name << ", trial " << trial) { thrown += s.rejected(bytes); }
    }
    BOOST_TEST_MESSAGE(s.name << ": " << thrown << " of " << kTrials << " corruptions thrown");
    BOOST_TEST(thrown > 0u);
  }
}

BOOST_AUTO_TEST_CASE(seeded_corruptions_of_payload_lists) {
  const Bytes list = wire::encode_payload_list(wt::sample_payloads());
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::size_t> position(0, list.size() - 1);
  std::uniform_int_distribution<int> delta(1, 255);
  std::size_t thrown = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes bytes = list;
    const std::size_t at = position(rng);
    bytes[at] = static_cast<std::uint8_t>(bytes[at] + delta(rng));
    BOOST_TEST_CONTEXT("trial " << trial << ", byte " << at) { thrown += list_rejected(bytes); }
  }
  BOOST_TEST(thrown > 0u);
}

BOOST_AUTO_TEST_CASE(random_bytes_throw_or_decode_valid_messages) {
  const std::vector<Subject> all = subjects();
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 64);
  for (int trial = 0; trial < 2000; ++trial) {
    Bytes bytes(static_cast<std::size_t>(length(rng)));
    for (auto& b : bytes) b = static_cast<std::uint8_t>(byte(rng));
    // Mostly a fixarray of version 1, so that the body gets parsed.
    if (!bytes.empty() && trial % 4 != 0) bytes[0] = static_cast<std::uint8_t>(0x90 + trial % 16);
    if (bytes.size() > 1 && trial % 4 != 0) bytes[1] = 1;
    for (const Subject& s : all) {
      BOOST_TEST_CONTEXT(s.name << ", trial " << trial) { (void)s.rejected(bytes); }
    }
    (void)list_rejected(bytes);
  }
}

BOOST_AUTO_TEST_SUITE_END()
