// test_method.cpp - CompressionMethod: factories, text form, kept_for.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec_fixtures.hpp"

using zring::CompressionKind;
using zring::CompressionMethod;
using zring::ErrorCode;
using zring::codec::test::throws_code;

namespace {

bool invalid(const auto& f) { return throws_code(f, ErrorCode::invalid_argument); }

}  // namespace

BOOST_AUTO_TEST_SUITE(method)

BOOST_AUTO_TEST_CASE(canonical_text_of_every_factory) {
  const std::vector<std::pair<CompressionMethod, std::string>> cases = {
      {CompressionMethod::none(), "none"},
      {CompressionMethod(), "none"},
      {CompressionMethod::fp16(), "fp16"},
      {CompressionMethod::bf16(), "bf16"},
      {CompressionMethod::topk(5), "topk:5"},
      {CompressionMethod::topk_ratio(0.01), "topk:1%"},
      {CompressionMethod::topk_ratio(1.0), "topk:100%"},
      {CompressionMethod::topk_ratio(0.125), "topk:12.5%"},
      {CompressionMethod::randomk(100), "randomk:100"},
      {CompressionMethod::randomk_ratio(0.005), "randomk:0.5%"},
      {CompressionMethod::randomk_ratio(0.0001), "randomk:0.01%"},
      {CompressionMethod::threshold(0.001f), "threshold:0.001"},
      {CompressionMethod::threshold(2.0f), "threshold:2"},
      {CompressionMethod::threshold(-0.0f), "threshold:0"},
      {CompressionMethod::quantization(8), "quant:8"},
      {CompressionMethod::signsgd(), "sign"},
      {CompressionMethod::error_feedback(CompressionMethod::topk_ratio(0.01)), "ef:topk:1%"},
      {CompressionMethod::error_feedback(CompressionMethod::signsgd()), "ef:sign"},
  };
  for (const auto& [method, text] : cases) {
    BOOST_TEST(method.to_string() == text);
    BOOST_TEST((CompressionMethod::parse(text) == method), text);
  }
}

BOOST_AUTO_TEST_CASE(aliases_parse_to_the_canonical_methods) {
  BOOST_TEST((CompressionMethod::parse("quantization:4") == CompressionMethod::quantization(4)));
  BOOST_TEST((CompressionMethod::parse("signsgd") == CompressionMethod::signsgd()));
  BOOST_TEST((CompressionMethod::parse("error_feedback:fp16") ==
              CompressionMethod::error_feedback(CompressionMethod::fp16())));
  BOOST_TEST((CompressionMethod::parse("topk:1.0e0%") == CompressionMethod::topk_ratio(0.01)));
  BOOST_TEST(CompressionMethod::parse("signsgd").to_string() == "sign");
}

BOOST_AUTO_TEST_CASE(parameters_are_exposed) {
  const CompressionMethod t = CompressionMethod::parse("topk:2.5%");
  BOOST_TEST((t.kind() == CompressionKind::topk));
  BOOST_TEST(t.is_ratio());
  BOOST_TEST(t.ratio() == 0.025);
  const CompressionMethod r = CompressionMethod::parse("randomk:7");
  BOOST_TEST(!r.is_ratio());
  BOOST_TEST(r.count() == 7u);
  BOOST_TEST(CompressionMethod::parse("threshold:0.25").threshold_value() == 0.25f);
  BOOST_TEST(CompressionMethod::parse("quant:12").bits() == 12u);
  const CompressionMethod ef = CompressionMethod::parse("ef:quant:2");
  BOOST_TEST(ef.has_error_feedback());
  BOOST_TEST((ef.base() == CompressionMethod::quantization(2)));
  BOOST_TEST(!ef.base().has_error_feedback());
  BOOST_TEST((ef != ef.base()));
}

// A percentage names a decimal number; every ratio, however unround, must
// print as one that reads back as exactly the same double.
BOOST_AUTO_TEST_CASE(every_ratio_round_trips_exactly) {
  std::vector<double> ratios = {0.01,
                                0.07,
                                0.29,
                                1.0 / 3.0,
                                0.1 + 0.2,
                                1e-10,
                                1.0,
                                std::nextafter(1.0, 0.0),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::min(),
                                0.5,
                                0.999999999};
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int i = 0; i < 2000; ++i) ratios.push_back(uniform(rng));
  for (int i = 0; i < 200; ++i) ratios.push_back(std::pow(10.0, -uniform(rng) * 12.0));
  for (double r : ratios) {
    if (!(r > 0.0)) continue;
    for (const CompressionMethod& m :
         {CompressionMethod::topk_ratio(r), CompressionMethod::randomk_ratio(r)}) {
      const std::string text = m.to_string();
      const CompressionMethod back = CompressionMethod::parse(text);
      BOOST_TEST((back == m), text);
      BOOST_TEST(back.ratio() == r, text);
      BOOST_TEST(back.to_string() == text);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_threshold_round_trips_exactly) {
  std::vector<float> ts = {0.0f,        1e-45f,  std::numeric_limits<float>::min(), 0.1f,
                           1.0f / 3.0f, 3.0e38f, std::numeric_limits<float>::max(), 12345.678f};
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const float t = std::bit_cast<float>(static_cast<std::uint32_t>(rng() & 0x7fffffffu));
    if (std::isfinite(t)) ts.push_back(t);
  }
  for (float t : ts) {
    const CompressionMethod m = CompressionMethod::threshold(t);
    const std::string text = m.to_string();
    BOOST_TEST((CompressionMethod::parse(text) == m), text);
    BOOST_TEST((CompressionMethod::parse("ef:" + text) == CompressionMethod::error_feedback(m)),
               text);
  }
}

BOOST_AUTO_TEST_CASE(every_other_method_round_trips) {
  for (unsigned b = 1; b <= 16; ++b) {
    const CompressionMethod m = CompressionMethod::quantization(b);
    BOOST_TEST((CompressionMethod::parse(m.to_string()) == m));
  }
  for (std::size_t k : {std::size_t{1}, std::size_t{42}, std::size_t{1} << 40,
                        std::numeric_limits<std::size_t>::max()}) {
    BOOST_TEST((CompressionMethod::parse(CompressionMethod::topk(k).to_string()) ==
                CompressionMethod::topk(k)));
    BOOST_TEST((CompressionMethod::parse(CompressionMethod::randomk(k).to_string()) ==
                CompressionMethod::randomk(k)));
  }
  for (const CompressionMethod& m : zring::codec::test::every_method()) {
    BOOST_TEST((CompressionMethod::parse(m.to_string()) == m), m.to_string());
    const CompressionMethod ef = CompressionMethod::error_feedback(m);
    BOOST_TEST((CompressionMethod::parse(ef.to_string()) == ef), ef.to_string());
  }
}

BOOST_AUTO_TEST_CASE(invalid_texts_are_rejected_with_the_accepted_forms) {
  const std::vector<std::string> bad = {"",
                                        "bogus",
                                        "NONE",
                                        " none",
                                        "none ",
                                        "none:",
                                        "none:1",
                                        "fp16:x",
                                        "bf16:16",
                                        "sign:1",
                                        "signsgd:2",
                                        "topk",
                                        "topk:",
                                        "topk:0",
                                        "topk:-1",
                                        "topk:+1",
                                        "topk:1.5",
                                        "topk: 1",
                                        "topk:1 ",
                                        "topk:0x10",
                                        "topk:99999999999999999999999",
                                        "topk:0%",
                                        "topk:101%",
                                        "topk:100.0001%",
                                        "topk:%",
                                        "topk:abc%",
                                        "topk:-1%",
                                        "topk:1e400%",
                                        "topk:1e-400%",
                                        "topk:inf%",
                                        "topk:nan%",
                                        "topk:1%%",
                                        "topk:1e%",
                                        "topk:.%",
                                        "randomk",
                                        "randomk:0",
                                        "randomk:200%",
                                        "threshold",
                                        "threshold:",
                                        "threshold:-1",
                                        "threshold:-0",
                                        "threshold:inf",
                                        "threshold:nan",
                                        "threshold:1e39",
                                        "threshold:1e-50",
                                        "threshold:0x1p3",
                                        "threshold:1,5",
                                        "quant",
                                        "quant:",
                                        "quant:0",
                                        "quant:17",
                                        "quant:8.0",
                                        "quant:+8",
                                        "quant:-1",
                                        "quantization:32",
                                        "ef",
                                        "ef:",
                                        "ef:ef:topk:1%",
                                        "ef:error_feedback:none",
                                        "error_feedback:ef:sign",
                                        "ef:bogus",
                                        "ef:topk:0",
                                        "topk:1:2",
                                        "random:5",
                                        "top-k:5"};
  for (const std::string& text : bad) {
    bool ok = false;
    try {
      (void)CompressionMethod::parse(text);
    } catch (const zring::Error& e) {
      const std::string what = e.what();
      ok = e.code() == ErrorCode::invalid_argument &&
           what.find("'" + text + "'") != std::string::npos &&
           what.find("accepted:") != std::string::npos;
    }
    BOOST_TEST(ok, "parse(\"" << text << "\") must throw invalid_argument naming the text");
  }
}

BOOST_AUTO_TEST_CASE(factories_validate_their_arguments) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  BOOST_TEST(invalid([] { (void)CompressionMethod::topk(0); }));
  BOOST_TEST(invalid([] { (void)CompressionMethod::randomk(0); }));
  for (double r : {0.0, -0.1, 1.5, nan, inf, -inf}) {
    BOOST_TEST(invalid([r] { (void)CompressionMethod::topk_ratio(r); }), r);
    BOOST_TEST(invalid([r] { (void)CompressionMethod::randomk_ratio(r); }), r);
  }
  for (float t : {-1.0f, -1e-30f, static_cast<float>(nan), static_cast<float>(inf)}) {
    BOOST_TEST(invalid([t] { (void)CompressionMethod::threshold(t); }), t);
  }
  BOOST_TEST(invalid([] { (void)CompressionMethod::quantization(0); }));
  BOOST_TEST(invalid([] { (void)CompressionMethod::quantization(17); }));
  const CompressionMethod ef = CompressionMethod::error_feedback(CompressionMethod::none());
  BOOST_TEST(invalid([&] { (void)CompressionMethod::error_feedback(ef); }));
  try {
    (void)CompressionMethod::topk_ratio(1.5);
  } catch (const zring::Error& e) {
    BOOST_TEST(std::string(e.what()).find("1.5") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(kept_for_counts_and_ratios) {
  const CompressionMethod k5 = CompressionMethod::topk(5);
  BOOST_TEST(k5.kept_for(0) == 0u);
  BOOST_TEST(k5.kept_for(3) == 3u);
  BOOST_TEST(k5.kept_for(5) == 5u);
  BOOST_TEST(k5.kept_for(1000) == 5u);
  const CompressionMethod r1 = CompressionMethod::randomk_ratio(0.01);
  BOOST_TEST(r1.kept_for(0) == 0u);
  BOOST_TEST(r1.kept_for(1) == 1u);    // never below 1
  BOOST_TEST(r1.kept_for(149) == 1u);  // 1.49 rounds to 1
  BOOST_TEST(r1.kept_for(150) == 2u);  // 1.5 rounds away from zero
  BOOST_TEST(r1.kept_for(1000) == 10u);
  BOOST_TEST(CompressionMethod::topk_ratio(1.0).kept_for(12345) == 12345u);
  BOOST_TEST(CompressionMethod::topk_ratio(0.999).kept_for(10) == 10u);
  for (const CompressionMethod& m :
       {CompressionMethod::none(), CompressionMethod::quantization(4),
        CompressionMethod::threshold(1.0f), CompressionMethod::signsgd()}) {
    BOOST_TEST(m.kept_for(0) == 0u);
    BOOST_TEST(m.kept_for(77) == 77u);
  }
}

BOOST_AUTO_TEST_CASE(to_dense_scatters_the_view) {
  zring::CompressedGradient g;
  g.original_size = 5;
  g.indices = {1, 4};
  g.values = {2.0f, -3.0f};
  BOOST_TEST((g.to_dense() == std::vector<float>{0.0f, 2.0f, 0.0f, 0.0f, -3.0f}));
  g.indices.clear();
  g.values = {1, 2, 3, 4, 5};
  BOOST_TEST((g.to_dense() == std::vector<float>{1, 2, 3, 4, 5}));
  g.values.clear();  // a sparse view that kept nothing
  BOOST_TEST((g.to_dense() == std::vector<float>(5, 0.0f)));
  g.indices = {7};
  g.values = {1.0f};
  BOOST_TEST(invalid([&] { (void)g.to_dense(); }));
  g.indices = {1, 2};
  BOOST_TEST(invalid([&] { (void)g.to_dense(); }));
}

BOOST_AUTO_TEST_SUITE_END()

// The exact sentences, so that where they are made may move without them
// changing.
BOOST_AUTO_TEST_CASE(error_texts_are_pinned) {
  const std::string accepted =
      " (accepted: none | fp16 | bf16 | topk:K | topk:R% | randomk:K | randomk:R% | "
      "threshold:T | quant:B with B in 1..16 | sign | ef:<one of these>)";
  const auto message_of = [](const auto& f) -> std::string {
    try {
      f();
    } catch (const zring::Error& e) {
      return e.code() == ErrorCode::invalid_argument ? e.what() : "wrong code";
    }
    return "no error";
  };
  const auto parse_error = [&](const std::string& text) {
    return message_of([&] { (void)CompressionMethod::parse(text); });
  };
  BOOST_TEST(parse_error("zip") == "compression method 'zip': unknown method 'zip'" + accepted);
  BOOST_TEST(parse_error("fp16:2") ==
             "compression method 'fp16:2': 'fp16' takes no parameter" + accepted);
  BOOST_TEST(parse_error("signsgd:1") ==
             "compression method 'signsgd:1': 'signsgd' takes no parameter" + accepted);
  BOOST_TEST(parse_error("quantization") ==
             "compression method 'quantization': 'quantization' needs a parameter" + accepted);
  BOOST_TEST(parse_error("ef:ef:sign") ==
             "compression method 'ef:ef:sign': error feedback cannot be nested" + accepted);
  BOOST_TEST(parse_error("ef") ==
             "compression method 'ef': error feedback needs a method to wrap" + accepted);
  BOOST_TEST(parse_error("quant:17") ==
             "compression method 'quant:17': quantization takes 1..16 bits" + accepted);
  BOOST_TEST(parse_error("topk:0") ==
             "compression method 'topk:0': the count must be at least 1" + accepted);
  BOOST_TEST(parse_error("randomk:0%") ==
             "compression method 'randomk:0%': the percentage must be above 0% and at most 100%" +
                 accepted);
  BOOST_TEST(parse_error("threshold:x") ==
             "compression method 'threshold:x': the threshold must be a finite number >= 0" +
                 accepted);
  BOOST_TEST(message_of([] { (void)CompressionMethod::topk(0); }) ==
             "compression method: topk needs k >= 1, got 0" + accepted);
  BOOST_TEST(message_of([] { (void)CompressionMethod::randomk_ratio(2.0); }) ==
             "compression method: randomk ratio must be in (0, 1], got 2" + accepted);
  BOOST_TEST(message_of([] { (void)CompressionMethod::quantization(0); }) ==
             "compression method: quantization needs 1..16 bits, got 0" + accepted);
}
