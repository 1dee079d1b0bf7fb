// yaml_reading.hpp - reading the ring file's YAML (internal): where in the
// file a check is, typed reads of its keys that fail with a config_invalid
// Error "<source>: <key path>: <problem>", its one document, and the text of
// a file. config.cpp says what each key means; this is how any key is read.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <zring/error.hpp>

namespace zring::config {

inline constexpr std::uint64_t KiB = 1024;
inline constexpr std::uint64_t MiB = 1024 * KiB;
inline constexpr std::uint64_t GiB = 1024 * MiB;

// Inclusive bounds of an integer key; `bytes` adds a KiB/MiB/GiB reading to messages.
struct Range {
  std::uint64_t min;
  std::uint64_t max;
  bool bytes = false;
};

// The text being read and the key being looked at, so that every check can
// fail with "<source>: <key path>: <problem>".
struct Where {
  std::string_view source;
  std::string path;  // empty at the top level

  [[nodiscard]] Where key(std::string_view name) const {
    return {source, path.empty() ? std::string(name) : path + "." + std::string(name)};
  }
  [[nodiscard]] Where index(std::size_t i) const {
    return {source, path + "[" + std::to_string(i) + "]"};
  }
  [[noreturn]] void fail(const std::string& problem) const {
    const std::string at = path.empty() ? "top level" : path;
    throw Error(ErrorCode::config_invalid, std::string(source) + ": " + at + ": " + problem);
  }
};

template <typename Strings>
std::string join(const Strings& items) {
  std::string out;
  for (const auto& item : items) {
    out += out.empty() ? "" : ", ";
    out += item;
  }
  return out;
}

// The value of `name` in `map`, or nothing when the key is absent. A key with
// no value is an error: it is usually a half-finished edit.
std::optional<YAML::Node> value_of(const YAML::Node& map, std::string_view name,
                                   const Where& where);
std::optional<std::string> read_string(const YAML::Node& map, std::string_view name,
                                       const Where& parent);
// As read_string; a missing key fails with "missing" and `hint`.
std::string require_string(const YAML::Node& map, std::string_view name, const Where& parent,
                           std::string_view hint);
std::optional<std::uint64_t> read_integer(const YAML::Node& map, std::string_view name,
                                          const Where& parent, Range range);
// Rejects non-word keys, keys not in `known` (suggesting the nearest) and
// repeated keys.
void check_keys(const YAML::Node& map, const Where& where, std::span<const std::string_view> known);
// "a map", "a list", "the value 'x'" or "nothing", for messages.
std::string kind_of(const YAML::Node& node);

// The one YAML document of the text, which must be a map (of `keys`, which a
// message lists when it is not).
YAML::Node load_document(std::string_view text, const Where& top,
                         std::span<const std::string_view> keys);
// The text of the file at `path`: a ring file is a few kilobytes, so one of
// more than 1 MiB is refused as the wrong file.
std::string read_text_file(const std::string& path);

}  // namespace zring::config
