// lib/config/keys.hpp - CurveZMQ keys: the Z85 text of a key, the secret key
// file (its format, permissions and content) and key generation. Plain
// checks, kept apart from the YAML reading in config.cpp like endpoint.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/endpoint.hpp"

namespace zring::config {

// A CurveZMQ key is 32 bytes; its Z85 text is 40 characters.
inline constexpr std::size_t kCurveKeyBytes = 32;
inline constexpr std::size_t kCurveKeyText = 40;
using CurveKey = std::array<std::uint8_t, kCurveKeyBytes>;

// 40 characters of the Z85 alphabet (ZeroMQ RFC 32). The problem names a
// wrong character only when reveal is set (never for a secret key).
[[nodiscard]] Problem check_z85_key(std::string_view text, bool reveal = true);
// The 32 bytes of a key that passed check_z85_key.
[[nodiscard]] CurveKey decode_z85_key(std::string_view text);
[[nodiscard]] std::string encode_z85_key(const CurveKey& key);
// The public key (Z85) that belongs to a secret key (Z85).
[[nodiscard]] std::string public_key_of(std::string_view secret_z85);

// The secret key file: text, at most 4 KiB; lines that are blank or start
// with '#' are comments; one other line holds the secret key in Z85. It must
// be a regular file that only its owner can read or write (mode 0600 or
// 0400): the secret key is the node's identity on the ring.
struct SecretKeyFile {
  std::string secret_key;  // Z85, when problem is empty
  Problem problem;         // what is wrong with the path, the file or its content
};
[[nodiscard]] SecretKeyFile read_secret_key_file(const std::string& path);

// A fresh key pair (zmq_curve_keypair), both Z85.
struct KeyPair {
  std::string public_key;
  std::string secret_key;
};
[[nodiscard]] KeyPair generate_key_pair();

// The text of a secret key file for key pair `keys` (the public key in a
// comment, so an operator can tell which node a file belongs to).
[[nodiscard]] std::string secret_key_file_text(const KeyPair& keys, std::string_view comment);

}  // namespace zring::config
