#include "config/keys.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <vector>
#include <zring/error.hpp>

namespace zring::config {
namespace {

constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
// A key file is one line and a comment or two.
constexpr std::size_t kMaxKeyFileBytes = 4096;

std::string errno_text(int error) { return std::system_category().message(error); }

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Closes a descriptor on every way out.
struct Descriptor {
  int fd;
  explicit Descriptor(int d) : fd(d) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::string_view trim(std::string_view line) {
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = line.find_last_not_of(" \t\r");
  return line.substr(first, last - first + 1);
}

// The key line of a key file's text, or the problem.
SecretKeyFile parse_key_text(std::string_view text) {
  std::optional<std::string_view> key;
  std::size_t line_number = 0, key_line = 0;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    if (key)
      return {{},
              "has a second key line (line " + std::to_string(line_number) + ", after line " +
                  std::to_string(key_line) + "); a secret key file holds one key"};
    key = line;
    key_line = line_number;
  }
  if (!key)
    return {{}, "holds no key (only blank or # comment lines); write one with zringctl keygen"};
  if (Problem problem = check_z85_key(*key, false); !problem.empty())
    return {{}, "line " + std::to_string(key_line) + ": the secret key " + problem};
  return {std::string(*key), {}};
}

}  // namespace

Problem check_z85_key(std::string_view text, bool reveal) {
  if (text.size() != kCurveKeyText)
    return "is " + std::to_string(text.size()) + " characters long; a CurveZMQ key in Z85 has " +
           std::to_string(kCurveKeyText) + " (zringctl keygen prints one)";
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (kZ85Alphabet.find(text[i]) == std::string_view::npos)
      return "has " + (reveal ? quote(text.substr(i, 1)) : std::string("a character")) +
             " at position " + std::to_string(i + 1) +
             ", which is not a Z85 character (0-9 a-z A-Z .-:+=^!/*?&<>()[]{}@%$#)";
  }
  CurveKey bytes{};
  const std::string copy(text);
  if (zmq_z85_decode(bytes.data(), copy.c_str()) == nullptr)
    return "is not a valid Z85 key (a group of 5 characters is out of range)";
  return {};
}

CurveKey decode_z85_key(std::string_view text) {
  CurveKey bytes{};
  const std::string copy(text);
  if (text.size() != kCurveKeyText || zmq_z85_decode(bytes.data(), copy.c_str()) == nullptr)
    throw Error(ErrorCode::internal, "decode_z85_key: not a Z85 key: " + quote(text));
  return bytes;
}

std::string encode_z85_key(const CurveKey& key) {
  char text[kCurveKeyText + 1];
  if (zmq_z85_encode(text, key.data(), key.size()) == nullptr)
    throw Error(ErrorCode::internal, "zmq_z85_encode failed");
  return std::string(text, kCurveKeyText);
}

std::string public_key_of(std::string_view secret_z85) {
  const std::string secret(secret_z85);
  char public_text[kCurveKeyText + 1];
  if (zmq_curve_public(public_text, secret.c_str()) != 0)
    throw Error(ErrorCode::internal, std::string("zmq_curve_public: ") + zmq_strerror(zmq_errno()) +
                                         " (is libzmq built with CurveZMQ?)");
  return std::string(public_text, kCurveKeyText);
}

SecretKeyFile read_secret_key_file(const std::string& path) {
  if (path.empty() || path.front() != '/')
    return {{}, quote(path) + " is not an absolute path (expected /PATH/TO/NODE.key)"};
  // O_NONBLOCK: a FIFO must not stop zringd from starting.
  const Descriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (file.fd < 0)
    return {{}, quote(path) + ": cannot open the secret key file: " + errno_text(errno)};
  struct stat info {};
  if (::fstat(file.fd, &info) != 0)
    return {{}, quote(path) + ": cannot stat it: " + errno_text(errno)};
  if (!S_ISREG(info.st_mode)) return {{}, quote(path) + " is not a regular file"};
  if ((info.st_mode & 0077) != 0)
    return {{},
            quote(path) + " has mode " + mode_text(info.st_mode) +
                ": other users than its owner may read or change the secret key (chmod 600 it)"};
  if (static_cast<std::size_t>(info.st_size) > kMaxKeyFileBytes)
    return {{},
            quote(path) + " is " + std::to_string(info.st_size) +
                " bytes; a secret key file is one line (is this the right file?)"};
  std::string text;
  std::vector<char> buffer(kMaxKeyFileBytes + 1);
  for (;;) {
    const ssize_t got = ::read(file.fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return {{}, quote(path) + ": cannot read the secret key file: " + errno_text(errno)};
    if (got == 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(got));
    if (text.size() > kMaxKeyFileBytes)
      return {{},
              quote(path) +
                  " is larger than 4 KiB; a secret key file is one line (is this the right file?)"};
  }
  SecretKeyFile parsed = parse_key_text(text);
  if (!parsed.problem.empty()) parsed.problem = quote(path) + " " + parsed.problem;
  return parsed;
}

KeyPair generate_key_pair() {
  char public_text[kCurveKeyText + 1];
  char secret_text[kCurveKeyText + 1];
  if (zmq_curve_keypair(public_text, secret_text) != 0)
    throw Error(ErrorCode::internal, std::string("zmq_curve_keypair: ") +
                                         zmq_strerror(zmq_errno()) +
                                         " (is libzmq built with CurveZMQ?)");
  return {std::string(public_text, kCurveKeyText), std::string(secret_text, kCurveKeyText)};
}

std::string secret_key_file_text(const KeyPair& keys, std::string_view comment) {
  std::string text = "# zring CurveZMQ secret key";
  if (!comment.empty()) text += " of " + std::string(comment);
  text += ". Keep it private: mode 0600, owned by the user zringd runs as.\n";
  text += "# Its public key (public_key: in the ring file): " + keys.public_key + "\n";
  text += keys.secret_key + "\n";
  return text;
}

}  // namespace zring::config
