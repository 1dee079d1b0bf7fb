// tests/config/test_curve_config.cpp - CurveZMQ keys in the ring file: the
// nodes' public keys, this node's secret key file (its permissions, its
// content, that it belongs to this node's public key), and every mistake
// named by key and problem.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <zring/config.hpp>
#include <zring/error.hpp>

#include "config/keys.hpp"

namespace fs = std::filesystem;
using zring::RingConfig;
using zring::config::KeyPair;

namespace {

std::string config_error(const std::string& yaml,
                         const std::optional<std::string>& node = std::nullopt) {
  try {
    (void)zring::parse_config(yaml, "ring.yaml", node);
  } catch (const zring::Error& e) {
    BOOST_TEST(zring::to_string(e.code()) == std::string("config_invalid"));
    return e.what();
  }
  BOOST_FAIL("no error for:\n" + yaml);
  return "";
}

boost::test_tools::predicate_result has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  boost::test_tools::predicate_result result(false);
  result.message() << "[" << part << "] not in [" << text << "]";
  return result;
}

// Three nodes with their own key pairs; key files in a scratch directory.
struct Keys {
  fs::path dir = fs::temp_directory_path() / ("zring-test-curve-" + std::to_string(::getpid()));
  std::vector<KeyPair> pairs{zring::config::generate_key_pair(), zring::config::generate_key_pair(),
                             zring::config::generate_key_pair()};
  Keys() { fs::create_directories(dir); }
  ~Keys() { fs::remove_all(dir); }

  std::string file(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const fs::path path = dir / name;
    fs::remove(path);
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path.string();
  }
  std::string key_file(std::size_t node, mode_t mode = 0600) const {
    return file("n" + std::to_string(node) + ".key",
                zring::config::secret_key_file_text(pairs[node], "a test node"), mode);
  }
  // nodes a, b, c with public keys (those in `without` have none), self a,
  // and `extra` appended.
  std::string ring(const std::string& extra, const std::vector<std::size_t>& without = {},
                   const std::string& node_extra = "") const {
    std::string yaml = "nodes:\n";
    for (std::size_t n = 0; n < 3; ++n) {
      yaml += "  - {name: " + std::string(1, static_cast<char>('a' + n)) +
              ", address: tcp://10.0.0." + std::to_string(n + 1) + ":7101";
      if (std::find(without.begin(), without.end(), n) == without.end())
        yaml += ", public_key: '" + pairs[n].public_key + "'";
      if (n == 0) yaml += node_extra;
      yaml += "}\n";
    }
    return yaml + "self: a\nipc: ipc:///run/zring/zringd.sock\n" + extra;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(curve)

BOOST_AUTO_TEST_CASE(without_keys_there_is_no_curve) {
  const Keys keys;
  BOOST_TEST(!zring::parse_config(keys.ring("", {0, 1, 2}), "ring.yaml").curve.has_value());
}

BOOST_AUTO_TEST_CASE(keys_and_the_secret_key_file_are_read) {
  const Keys keys;
  const std::string path = keys.key_file(0);
  const RingConfig ring =
      zring::parse_config(keys.ring("curve: {secret_key_file: " + path + "}\n"), "ring.yaml");
  BOOST_TEST_REQUIRE(ring.curve.has_value());
  BOOST_TEST(ring.curve->secret_key_file == path);
  BOOST_TEST(ring.curve->secret_key == keys.pairs[0].secret_key);
  for (std::size_t n = 0; n < 3; ++n)
    BOOST_TEST(ring.nodes[n].public_key == keys.pairs[n].public_key);
  // A node's own secret_key_file wins over curve.secret_key_file.
  const std::string b = keys.key_file(1);
  std::string yaml = keys.ring("curve: {secret_key_file: " + path + "}\n");
  yaml.replace(yaml.find(keys.pairs[1].public_key) + 40, 0, "', secret_key_file: '" + b);
  const RingConfig own = zring::parse_config(yaml, "ring.yaml", std::string("b"));
  BOOST_TEST(own.nodes[1].secret_key_file == b);
  BOOST_TEST(own.curve->secret_key_file == b);
  BOOST_TEST(own.curve->secret_key == keys.pairs[1].secret_key);
}

BOOST_AUTO_TEST_CASE(skip_leaves_the_secret_key_unread) {
  const Keys keys;
  const RingConfig ring =
      zring::parse_config(keys.ring("curve: {secret_key_file: /nonexistent/a.key}\n"), "ring.yaml",
                          std::nullopt, zring::SecretKey::skip);
  BOOST_TEST_REQUIRE(ring.curve.has_value());
  BOOST_TEST(ring.curve->secret_key_file == "/nonexistent/a.key");
  BOOST_TEST(ring.curve->secret_key.empty());
  BOOST_TEST(has(
      config_error(keys.ring("curve: {secret_key_file: /nonexistent/a.key}\n")),
      "ring.yaml: curve.secret_key_file: '/nonexistent/a.key': cannot open the secret key file: "
      "No such file or directory"));
}

BOOST_AUTO_TEST_CASE(bad_public_keys_are_named) {
  const Keys keys;
  const std::string file = "curve: {secret_key_file: " + keys.key_file(0) + "}\n";
  std::string yaml = keys.ring(file);
  const std::string& good = keys.pairs[1].public_key;
  const auto with = [&](const std::string& key) {
    std::string text = yaml;
    text.replace(text.find(good), good.size(), key);
    return text;
  };
  BOOST_TEST(has(config_error(with(good.substr(0, 39))),
                 "ring.yaml: nodes[1].public_key: '" + good.substr(0, 39) +
                     "' is 39 characters long; a CurveZMQ key in Z85 has 40"));
  BOOST_TEST(has(config_error(with(good + "x")),
                 "nodes[1].public_key: '" + good + "x' is 41 characters long"));
  BOOST_TEST(has(config_error(with(good.substr(0, 10) + "~" + good.substr(11))),
                 "nodes[1].public_key: '" + good.substr(0, 10) + "~" + good.substr(11) +
                     "' has '~' at position 11, which is not a Z85 character"));
  BOOST_TEST(has(config_error(with("")), "nodes[1].public_key: '' is 0 characters long"));
  // '#' is the largest Z85 digit: five of them exceed 32 bits.
  BOOST_TEST(has(config_error(with(std::string(40, '#'))),
                 "nodes[1].public_key: '" + std::string(40, '#') +
                     "' is not a valid Z85 key (a group of 5 characters is out of range)"));
  BOOST_TEST(has(config_error(with(keys.pairs[0].public_key)),
                 "ring.yaml: nodes[1].public_key: the same key as nodes[0].public_key; every node "
                 "needs its own key pair"));
}

BOOST_AUTO_TEST_CASE(all_nodes_or_none_have_keys) {
  const Keys keys;
  const std::string file = "curve: {secret_key_file: " + keys.key_file(0) + "}\n";
  BOOST_TEST(has(config_error(keys.ring(file, {2})),
                 "ring.yaml: nodes[2].public_key: missing; nodes[0] has one, so the ring uses "
                 "CurveZMQ and every node "
                 "needs its public key"));
  BOOST_TEST(has(config_error(keys.ring(file, {0})),
                 "ring.yaml: nodes[0].public_key: missing; nodes[1] has one"));
  BOOST_TEST(
      has(config_error(keys.ring(file, {0, 1, 2})),
          "ring.yaml: nodes[0].public_key: missing; curve is set, so the ring uses CurveZMQ"));
  BOOST_TEST(has(config_error(keys.ring("", {0, 1, 2}, ", secret_key_file: /etc/zring/a.key")),
                 "ring.yaml: nodes[0].public_key: missing; nodes[0].secret_key_file is set"));
}

BOOST_AUTO_TEST_CASE(this_node_needs_its_secret_key_file) {
  const Keys keys;
  BOOST_TEST(has(config_error(keys.ring("")),
                 "ring.yaml: curve.secret_key_file: missing; the ring uses CurveZMQ, so node 'a' "
                 "needs its secret "
                 "key file (set curve.secret_key_file, or nodes[0].secret_key_file)"));
  BOOST_TEST(has(config_error(keys.ring("curve: {secret_key_file: keys/a.key}\n")),
                 "ring.yaml: curve.secret_key_file: 'keys/a.key' is not an absolute path"));
  BOOST_TEST(has(config_error(keys.ring("", {}, ", secret_key_file: a.key")),
                 "ring.yaml: nodes[0].secret_key_file: 'a.key' is not an absolute path"));
  BOOST_TEST(
      has(config_error(keys.ring("curve: /etc/a.key\n")),
          "ring.yaml: curve: expected a map like {secret_key_file: /etc/zring/keys/NODE.key}"));
  BOOST_TEST(has(config_error(keys.ring("curve: {secret_key: x}\n")),
                 "ring.yaml: curve.secret_key: unknown key; did you mean 'secret_key_file'?"));
}

BOOST_AUTO_TEST_CASE(secret_key_file_must_be_private_and_hold_this_nodes_key) {
  const Keys keys;
  const auto error_with = [&](const std::string& path) {
    return config_error(keys.ring("curve: {secret_key_file: '" + path + "'}\n"));
  };
  for (const mode_t mode : {0644, 0640, 0604, 0660, 0606}) {
    const std::string path = keys.key_file(0, mode);
    char shown[8];
    std::snprintf(shown, sizeof shown, "%04o", static_cast<unsigned>(mode));
    BOOST_TEST(
        has(error_with(path),
            "ring.yaml: curve.secret_key_file: '" + path + "' has mode " + shown +
                ": other users than its owner may read or change the secret key (chmod 600 it)"));
  }
  BOOST_TEST(zring::parse_config(
                 keys.ring("curve: {secret_key_file: " + keys.key_file(0, 0400) + "}\n"), "r")
                 .curve->secret_key == keys.pairs[0].secret_key);
  BOOST_TEST(has(error_with(keys.dir.string()), "' is not a regular file"));
  const std::string other = keys.key_file(1);
  const std::string message = error_with(other);
  BOOST_TEST(has(message, "ring.yaml: curve.secret_key_file: '" + other +
                              "' holds the secret key of public key '" + keys.pairs[1].public_key +
                              "', not of node 'a''s public_key '" + keys.pairs[0].public_key +
                              "'"));
  BOOST_TEST(!has(message, keys.pairs[1].secret_key));
  BOOST_TEST(has(error_with(keys.file("empty.key", "# nothing\n\n")), "' holds no key"));
  BOOST_TEST(has(error_with(keys.file(
                     "two.key", keys.pairs[0].secret_key + "\n" + keys.pairs[0].secret_key + "\n")),
                 "' has a second key line (line 2, after line 1)"));
  const std::string bad_secret =
      keys.pairs[0].secret_key.substr(0, 20) + "~" + keys.pairs[0].secret_key.substr(21);
  const std::string bad = error_with(keys.file("bad.key", "# comment\n" + bad_secret + "\n"));
  BOOST_TEST(
      has(bad,
          "' line 2: the secret key has a character at position 21, which is not a Z85 character"));
  BOOST_TEST(!has(bad, bad_secret));
  BOOST_TEST(has(error_with(keys.file("big.key", std::string(5000, '#'))), "' is 5000 bytes"));
  // The key alone on its line, with blanks around it and comments, is fine.
  const std::string spaced =
      keys.file("spaced.key", "\n# a\n  " + keys.pairs[0].secret_key + "  \r\n\n");
  BOOST_TEST(zring::parse_config(keys.ring("curve: {secret_key_file: " + spaced + "}\n"), "r")
                 .curve->secret_key == keys.pairs[0].secret_key);
}

BOOST_AUTO_TEST_CASE(key_texts) {
  const KeyPair pair = zring::config::generate_key_pair();
  BOOST_TEST(zring::config::check_z85_key(pair.public_key).empty());
  BOOST_TEST(zring::config::public_key_of(pair.secret_key) == pair.public_key);
  BOOST_TEST(zring::config::encode_z85_key(zring::config::decode_z85_key(pair.public_key)) ==
             pair.public_key);
  BOOST_TEST(!zring::config::check_z85_key(std::string(40, ' ')).empty());
}

// Ring messages over plain TCP (tcp_data): on by default, off with CurveZMQ,
// which they would bypass, and never both.
BOOST_AUTO_TEST_CASE(tcp_data_is_on_without_curve_and_off_with_it) {
  const Keys keys;
  const std::string plain = keys.ring("", {0, 1, 2});
  BOOST_TEST(zring::parse_config(plain, "r").tcp_data);
  BOOST_TEST(!zring::parse_config(plain + "tcp_data: false\n", "r").tcp_data);
  BOOST_TEST(zring::parse_config(plain + "tcp_data: true\n", "r").tcp_data);
  const std::string curve = keys.ring("curve: {secret_key_file: " + keys.key_file(0) + "}\n");
  BOOST_TEST(!zring::parse_config(curve, "r").tcp_data);
  BOOST_TEST(!zring::parse_config(curve + "tcp_data: false\n", "r").tcp_data);
  BOOST_TEST(has(config_error(curve + "tcp_data: true\n"),
                 "ring.yaml: tcp_data: true would send ring messages unencrypted beside CurveZMQ"));
  BOOST_TEST(has(config_error(plain + "tcp_data: yes\n"),
                 "ring.yaml: tcp_data: 'yes' is not true or false"));
  BOOST_TEST(
      has(config_error(plain + "tcp_data: 'true'\n"), "tcp_data: 'true' is not true or false"));
  BOOST_TEST(has(config_error(plain + "tcp_data: [true]\n"),
                 "tcp_data: expected true or false, got a list"));
}

BOOST_AUTO_TEST_SUITE_END()
