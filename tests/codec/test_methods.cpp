// test_methods.cpp - the table of methods (codec/methods.hpp), row by row:
// each method reads back from the text it prints, under both of its names
// and with error feedback; it makes a codec of itself; its parameter form,
// summation and 16-bit words agree with what its codec does.
#include <boost/test/unit_test.hpp>
#include <set>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec/methods.hpp"
#include "codec_fixtures.hpp"

using zring::CompressionKind;
using zring::CompressionMethod;
using zring::ErrorCode;
namespace codec = zring::codec;
using codec::MethodRow;
using codec::Parameter;

namespace {

// A method of the row, with an example of each form of its parameter.
std::vector<CompressionMethod> examples_of(const MethodRow& row) {
  switch (row.parameter) {
    case Parameter::none:
      return {row.plain()};
    case Parameter::kept:
      return {row.count(3), row.ratio(0.25)};
    case Parameter::threshold:
      return {row.real(0.5f)};
    case Parameter::bits:
      return {row.bits(4)};
  }
  return {};
}

std::string message_of(const std::string& text) {
  try {
    (void)CompressionMethod::parse(text);
  } catch (const zring::Error& e) {
    return e.code() == ErrorCode::invalid_argument ? e.what() : "wrong code";
  }
  return "no error";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(methods_table)

BOOST_AUTO_TEST_CASE(one_row_per_kind_in_the_order_of_the_enum) {
  const auto rows = codec::method_rows();
  BOOST_TEST(rows.size() == static_cast<std::size_t>(CompressionKind::signsgd) + 1);
  std::set<std::string> names;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    BOOST_TEST(static_cast<std::size_t>(rows[i].kind) == i);
    BOOST_TEST(&codec::method_row(rows[i].kind) == &rows[i]);
    BOOST_TEST(names.insert(rows[i].text).second, rows[i].text);
    if (std::string(rows[i].identifier) != rows[i].text) {
      BOOST_TEST(names.insert(rows[i].identifier).second, rows[i].identifier);
    }
  }
  BOOST_TEST(!names.contains("ef"));
  BOOST_TEST(!names.contains("error_feedback"));
  BOOST_TEST(codec::method_named("bogus") == nullptr);
}

BOOST_AUTO_TEST_CASE(every_method_reads_back_from_its_text) {
  for (const MethodRow& row : codec::method_rows()) {
    BOOST_TEST((codec::method_named(row.text) == &row));
    BOOST_TEST((codec::method_named(row.identifier) == &row));
    for (const CompressionMethod& m : examples_of(row)) {
      const std::string text = m.to_string();
      BOOST_TEST((m.kind() == row.kind), text);
      BOOST_TEST(!m.has_error_feedback());
      BOOST_TEST(text.starts_with(row.text), text);
      BOOST_TEST((CompressionMethod::parse(text) == m), text);
      const std::string other = row.identifier + text.substr(std::string(row.text).size());
      BOOST_TEST((CompressionMethod::parse(other) == m), other);
      const CompressionMethod ef = CompressionMethod::error_feedback(m);
      BOOST_TEST(ef.to_string() == "ef:" + text);
      BOOST_TEST((CompressionMethod::parse("ef:" + text) == ef), text);
      BOOST_TEST((CompressionMethod::parse("error_feedback:" + other) == ef), other);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_method_is_in_the_accepted_list) {
  const std::string& accepted = codec::accepted_methods();
  BOOST_TEST(accepted.starts_with("accepted: none | "));
  BOOST_TEST(accepted.ends_with(" | ef:<one of these>"));
  for (const MethodRow& row : codec::method_rows()) {
    BOOST_TEST(accepted.find(" " + std::string(row.text)) != std::string::npos, row.text);
  }
}

BOOST_AUTO_TEST_CASE(the_parameter_form_is_what_the_text_asks_for) {
  for (const MethodRow& row : codec::method_rows()) {
    const std::string name = row.text;
    const std::string why = row.parameter == Parameter::none ? "'" + name + "' takes no parameter"
                                                             : "'" + name + "' needs a parameter";
    const std::string text = row.parameter == Parameter::none ? name + ":1" : name;
    BOOST_TEST(message_of(text) == "compression method '" + text + "': " + why + " (" +
                                       codec::accepted_methods() + ")");
    // Only a kept count keeps fewer than all of n.
    for (const CompressionMethod& m : examples_of(row)) {
      const bool kept = row.parameter == Parameter::kept;
      BOOST_TEST((m.kept_for(100) < 100) == kept, m.to_string());
    }
  }
}

BOOST_AUTO_TEST_CASE(every_method_makes_its_codec_which_sums_as_its_row_says) {
  const std::vector<float> x = codec::test::normal_values(300, 5);
  for (const MethodRow& row : codec::method_rows()) {
    for (const CompressionMethod& m : examples_of(row)) {
      const auto made = row.make_codec(m);
      BOOST_TEST((made->method() == m), m.to_string());
      BOOST_TEST((made->summation() == row.summation), m.to_string());
      BOOST_TEST((codec::make_codec(m)->method() == m), m.to_string());

      // The 16-bit words are exactly the codec's: the ring's round trips
      // (collective/plan_dense.cpp) give what the codec decodes.
      const bool sixteen = row.summation == codec::Summation::rounded_half;
      BOOST_TEST((row.words.encode != nullptr) == sixteen, m.to_string());
      BOOST_TEST((row.words.decode != nullptr) == sixteen, m.to_string());
      if (!sixteen) continue;
      const zring::CompressedGradient g = made->compress(x.data(), x.size(), {});
      std::vector<std::uint16_t> words(x.size());
      std::vector<float> back(x.size());
      row.words.encode(x.data(), x.size(), words.data());
      row.words.decode(words.data(), words.size(), back.data());
      BOOST_TEST(codec::test::same_bits(g.values, back), m.to_string());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_kind_outside_the_enum_has_no_row) {
  const auto bogus = static_cast<CompressionKind>(200);
  BOOST_TEST(
      codec::test::throws_code([&] { (void)codec::method_row(bogus); }, ErrorCode::internal));
}

BOOST_AUTO_TEST_SUITE_END()
