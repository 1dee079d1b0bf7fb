#include "config/yaml_reading.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "config/endpoint.hpp"

namespace zring::config {
namespace {

// A ring file is a few kilobytes; anything much larger is the wrong file.
constexpr std::size_t kMaxFileBytes = 1 * MiB;

// "65536 (64 KiB)" for byte sizes that are a whole number of KiB/MiB/GiB.
std::string show_number(std::uint64_t value, bool bytes) {
  std::string text = std::to_string(value);
  if (!bytes || value == 0) return text;
  for (auto [unit, name] :
       {std::pair{GiB, " GiB"}, std::pair{MiB, " MiB"}, std::pair{KiB, " KiB"}}) {
    if (value % unit == 0) return text + " (" + std::to_string(value / unit) + name + ")";
  }
  return text;
}

// Edit distance, for "did you mean" on misspelt keys.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t replace = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, replace});
    }
  }
  return row[b.size()];
}

std::string suggestion(std::string_view unknown, std::span<const std::string_view> known) {
  for (std::string_view candidate : known) {
    const bool prefix =
        unknown.size() >= 3 && (candidate.starts_with(unknown) || unknown.starts_with(candidate));
    if (prefix || distance(unknown, candidate) <= 2)
      return "; did you mean " + quote(candidate) + "?";
  }
  return "";
}

std::uint64_t to_integer(const YAML::Node& value, const Where& where, Range range) {
  if (!value.IsScalar()) where.fail("expected an integer, got " + kind_of(value));
  const std::string& text = value.Scalar();
  // yaml-cpp tags quoted scalars "!": "10" is a string in YAML, and a typed
  // config should not guess.
  if (value.Tag() == "!")
    where.fail(quote(text) + " is quoted, so it is a string, not an integer (remove the quotes)");
  const bool negative = text.starts_with('-');
  const std::string_view digits = std::string_view(text).substr(negative ? 1 : 0);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    where.fail(quote(text) + " is not an integer");
  }
  if (digits.size() > 1 && digits[0] == '0') {
    where.fail(quote(text) +
               " has a leading zero, which YAML 1.1 tools read as octal (write it without)");
  }
  if (negative) where.fail(text + " is below " + show_number(range.min, range.bytes));
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (error == std::errc::result_out_of_range || number > range.max) {
    where.fail(text + " is above " + show_number(range.max, range.bytes));
  }
  if (number < range.min) where.fail(text + " is below " + show_number(range.min, range.bytes));
  return number;
}

// -------------------------------------------------------------- documents --

std::string position(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// yaml-cpp's message for a tab in indentation ("illegal block entry", ...)
// does not say what is wrong; tabs are a common slip in hand-edited files.
std::string tab_hint(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  std::size_t start = 0;
  for (int i = 0; i < mark.line && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos) return "";
  const std::string_view line = text.substr(start);
  const std::string_view indent = line.substr(0, line.find_first_not_of(" \t"));
  return indent.find('\t') == std::string_view::npos
             ? ""
             : " (this line is indented with a tab; YAML needs spaces)";
}

// Counts the documents of a YAML stream, stopping at the second, and notes
// where that one's content starts. The text is not read with YAML::LoadAll:
// yaml-cpp 0.7 (Debian 12) never returns from it on some malformed streams,
// a lone "," for one (yaml-cpp issue #1040), and allocates an empty document
// per round until memory runs out.
class DocumentCounter final : public YAML::EventHandler {
 public:
  [[nodiscard]] std::size_t documents() const { return documents_; }
  [[nodiscard]] const YAML::Mark& second() const { return second_; }

  void OnDocumentStart(const YAML::Mark&) override { ++documents_; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node_at(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnMapEnd() override {}

 private:
  void node_at(const YAML::Mark& mark) {
    if (documents_ == 2 && !seen_second_) {
      second_ = mark;
      seen_second_ = true;
    }
  }

  std::size_t documents_ = 0;
  YAML::Mark second_ = YAML::Mark::null_mark();
  bool seen_second_ = false;
};

[[noreturn]] void fail_file(const std::string& path, const std::string& problem) {
  throw Error(ErrorCode::config_invalid, path + ": " + problem);
}

// Closes a file descriptor on every path out of read_text_file.
struct FileDescriptor {
  int fd;
  explicit FileDescriptor(int descriptor) : fd(descriptor) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { ::close(fd); }
};

}  // namespace

std::string kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "the value " + quote(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// ------------------------------------------------------------ YAML access --

// A repeated key is refused: yaml-cpp keeps both copies and lookups see only
// the first, so a later edit would silently not apply.
void check_keys(const YAML::Node& map, const Where& where,
                std::span<const std::string_view> known) {
  std::map<std::string, std::size_t, std::less<>> line_of;
  for (const auto& entry : map) {
    if (!entry.first.IsScalar())
      where.fail("a key must be a plain word, got " + kind_of(entry.first));
    const std::string& name = entry.first.Scalar();
    const Where at = where.key(name);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      at.fail("unknown key" + suggestion(name, known) + " (known keys: " + join(known) + ")");
    }
    const auto line = static_cast<std::size_t>(entry.first.Mark().line) + 1;
    const auto [first, inserted] = line_of.emplace(name, line);
    if (!inserted) {
      at.fail("duplicate key (lines " + std::to_string(first->second) + " and " +
              std::to_string(line) + ")");
    }
  }
}

std::optional<YAML::Node> value_of(const YAML::Node& map, std::string_view name,
                                   const Where& where) {
  const YAML::Node value = map[std::string(name)];
  if (!value.IsDefined()) return std::nullopt;
  if (value.IsNull()) where.fail("has no value (give one, or remove the key to use the default)");
  return value;
}

std::optional<std::string> read_string(const YAML::Node& map, std::string_view name,
                                       const Where& parent) {
  const Where where = parent.key(name);
  const auto value = value_of(map, name, where);
  if (!value) return std::nullopt;
  if (!value->IsScalar()) where.fail("expected a string, got " + kind_of(*value));
  return value->Scalar();
}

std::string require_string(const YAML::Node& map, std::string_view name, const Where& parent,
                           std::string_view hint) {
  auto value = read_string(map, name, parent);
  if (!value) parent.key(name).fail("missing" + std::string(hint));
  return *std::move(value);
}

std::optional<std::uint64_t> read_integer(const YAML::Node& map, std::string_view name,
                                          const Where& parent, Range range) {
  const Where where = parent.key(name);
  const auto value = value_of(map, name, where);
  if (!value) return std::nullopt;
  return to_integer(*value, where, range);
}

YAML::Node load_document(std::string_view text, const Where& top,
                         std::span<const std::string_view> keys) {
  const std::string copy(text);
  DocumentCounter counter;
  YAML::Node document;
  try {
    std::istringstream stream(copy);
    YAML::Parser parser(stream);
    while (counter.documents() < 2 && parser.HandleNextDocument(counter)) {
    }
    document = YAML::Load(copy);
  } catch (const YAML::Exception& e) {
    const std::string at = e.mark.is_null() ? "" : position(e.mark) + ": ";
    throw Error(ErrorCode::config_invalid,
                std::string(top.source) + ": " + at + e.msg + tab_hint(text, e.mark));
  }
  if (document.IsNull()) {
    top.fail(
        "the configuration is empty; it needs at least nodes and ipc (see configs/ for examples)");
  }
  if (counter.documents() > 1) {
    throw Error(ErrorCode::config_invalid,
                std::string(top.source) + ": " + position(counter.second()) +
                    ": a second YAML document; a ring configuration is one document");
  }
  if (!document.IsMap()) {
    top.fail("expected a map of keys (" + join(keys) + "), got " + kind_of(document));
  }
  return document;
}

std::string read_text_file(const std::string& path) {
  const auto why = [](int error) { return std::system_category().message(error); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_file(path, "cannot open the configuration file: " + why(errno));
  const FileDescriptor file(fd);
  struct stat info {};
  if (::fstat(file.fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    fail_file(path, "cannot read the configuration file: " + why(EISDIR));
  }
  std::string text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t got = ::read(file.fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail_file(path, "cannot read the configuration file: " + why(errno));
    if (got == 0) return text;
    text.append(buffer.data(), static_cast<std::size_t>(got));
    if (text.size() > kMaxFileBytes) {
      fail_file(path,
                "is larger than 1 MiB; a ring configuration is a few kilobytes (is this the right "
                "file?)");
    }
  }
}

}  // namespace zring::config
