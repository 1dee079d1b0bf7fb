// lib/config/endpoint.cpp - node name, tcp:// address and ipc:// endpoint rules.
#include "config/endpoint.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

namespace zring::config {
namespace {

constexpr std::size_t kMaxNameLength = 64;
// sockaddr_un.sun_path is 108 bytes on Linux (104 on BSDs) including the NUL;
// 100 leaves a margin and holds everywhere.
constexpr std::size_t kIpcPathLimit = 100;
constexpr std::string_view kExpectTcp = " (expected tcp://HOST:PORT)";
constexpr std::string_view kExpectIpc = " (expected ipc:///ABSOLUTE/PATH)";

// The canonical text of an IP literal of `family`, or "" if host is not one.
std::string canonical_ip(int family, std::string_view host) {
  std::array<unsigned char, 16> bytes{};
  std::array<char, INET6_ADDRSTRLEN> text{};
  const std::string copy(host);
  if (inet_pton(family, copy.c_str(), bytes.data()) != 1) return "";
  return inet_ntop(family, bytes.data(), text.data(), text.size()) != nullptr ? text.data() : "";
}

// RFC 1123 host names, plus '_', which container networks use in service names.
bool is_host_name(std::string_view host) {
  if (host.size() > 253) return false;
  const auto allowed = [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_'; };
  std::size_t start = 0;
  while (start <= host.size()) {
    const std::size_t dot = std::min(host.find('.', start), host.size());
    const std::string_view label = host.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
        !std::all_of(label.begin(), label.end(), allowed)) {
      return false;
    }
    start = dot + 1;
  }
  return true;
}

Problem check_host(std::string_view host, bool bracketed, const std::string& shown) {
  if (host.empty()) return shown + " has no host" + std::string(kExpectTcp);
  const std::string canonical = canonical_host(host);
  if (host == "*" || canonical == "0.0.0.0" || canonical == "::") {
    return shown + " is a wildcard address; a node must name the address its peers reach it at";
  }
  if (bracketed) {
    return canonical_ip(AF_INET6, host).empty()
               ? shown + " has an invalid IPv6 address " + quote(host)
               : "";
  }
  if (host.find_first_not_of("0123456789.") == std::string_view::npos) {
    return canonical_ip(AF_INET, host).empty()
               ? shown + " has an invalid IPv4 address " + quote(host)
               : "";
  }
  if (!is_host_name(host)) {
    return shown + " has an invalid host name " + quote(host) +
           " (letters, digits, '-', '_' and '.'; labels of 1..63 characters)";
  }
  return "";
}

// scheme is how addresses of this kind start ("tcp://", or "" for a listen
// address), so that hints show the form the key expects.
std::string expected_form(std::string_view scheme) {
  return " (expected " + std::string(scheme) + "HOST:PORT)";
}

Problem parse_port(std::string_view port, const std::string& shown, std::uint16_t& out,
                   std::string_view scheme = "tcp://") {
  if (port.empty()) return shown + " has no port" + expected_form(scheme);
  if (port.find_first_not_of("0123456789") != std::string_view::npos) {
    return shown + " has port " + quote(port) + ", which is not a number" + expected_form(scheme);
  }
  unsigned number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (error != std::errc{} || number < 1 || number > 65535) {
    return shown + " has port " + std::string(port) + ", outside 1..65535";
  }
  out = static_cast<std::uint16_t>(number);
  return "";
}

// "HOST:PORT" or "[IPv6]:PORT", the part of an address after tcp://.
struct HostPort {
  std::string_view host;
  std::string_view port;
  bool bracketed = false;
  Problem problem;
};

HostPort split_host_port(std::string_view rest, const std::string& shown,
                         std::string_view scheme = "tcp://") {
  HostPort out;
  out.bracketed = rest.starts_with('[');
  if (out.bracketed) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      out.problem = shown + " opens '[' without a closing ']' (expected " + std::string(scheme) +
                    "[IPv6]:PORT)";
      return out;
    }
    out.host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty() && after[0] != ':')
      out.problem = shown + " has " + quote(after) + " after ']' where :PORT belongs";
    out.port = after.substr(after.empty() ? 0 : 1);
    return out;
  }
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) {
    out.problem = shown + " has no port" + expected_form(scheme);
    return out;
  }
  out.host = rest.substr(0, colon);
  out.port = rest.substr(colon + 1);
  if (out.host.find(':') != std::string_view::npos) {
    out.problem = shown + " has an IPv6 address without brackets (write " + std::string(scheme) +
                  "[" + std::string(out.host) + "]:PORT)";
  }
  return out;
}

}  // namespace

TcpAddress parse_tcp_address(std::string_view address) {
  constexpr std::string_view scheme = "tcp://";
  const std::string shown = quote(address);
  TcpAddress out;
  if (!address.starts_with(scheme)) {
    out.problem = shown + " does not start with tcp://" + std::string(kExpectTcp);
    return out;
  }
  const HostPort parts = split_host_port(address.substr(scheme.size()), shown);
  out.problem = parts.problem;
  if (out.problem.empty()) out.problem = check_host(parts.host, parts.bracketed, shown);
  if (out.problem.empty()) out.problem = parse_port(parts.port, shown, out.port);
  if (out.problem.empty()) out.host = std::string(parts.host);
  return out;
}

TcpAddress parse_listen_address(std::string_view address) {
  constexpr std::string_view expect = " (expected HOST:PORT, such as 127.0.0.1:9464)";
  const std::string shown = quote(address);
  TcpAddress out;
  const auto fail = [&](const std::string& problem) {
    out.problem = problem;
    return out;
  };
  if (address.find("://") != std::string_view::npos) {
    return fail(shown + " has a scheme; write only HOST:PORT" + std::string(expect));
  }
  if (address.find('/') != std::string_view::npos) {
    return fail(shown + " has a path; write only HOST:PORT (the path is always /metrics)");
  }
  const HostPort parts = split_host_port(address, shown, "");
  if (!parts.problem.empty()) return fail(parts.problem);
  if (parts.host.empty()) return fail(shown + " has no host" + std::string(expect));
  if (parts.bracketed) {
    if (canonical_ip(AF_INET6, parts.host).empty())
      return fail(shown + " has an invalid IPv6 address " + quote(parts.host));
  } else if (parts.host.find_first_not_of("0123456789.") == std::string_view::npos) {
    if (canonical_ip(AF_INET, parts.host).empty())
      return fail(shown + " has an invalid IPv4 address " + quote(parts.host));
  } else if (!is_host_name(parts.host)) {
    return fail(shown + " has an invalid host name " + quote(parts.host) +
                " (letters, digits, '-', '_' and '.'; labels of 1..63 characters)");
  }
  if (parts.port.empty()) return fail(shown + " has no port" + std::string(expect));
  out.problem = parse_port(parts.port, shown, out.port, "");
  if (out.problem.empty()) out.host = std::string(parts.host);
  return out;
}

Problem check_node_name(std::string_view name) {
  if (name.empty()) return "is empty; a node needs a name";
  if (name.size() > kMaxNameLength) {
    return quote(name) + " is " + std::to_string(name.size()) + " characters, more than " +
           std::to_string(kMaxNameLength);
  }
  const auto allowed = [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '.' || c == '-';
  };
  const auto bad = std::find_if_not(name.begin(), name.end(), allowed);
  if (bad == name.end()) return "";
  return quote(name) + " contains a character other than A-Z a-z 0-9 _ . - (at position " +
         std::to_string(bad - name.begin() + 1) + ")";
}

Problem check_ipc_endpoint(std::string_view endpoint) {
  constexpr std::string_view scheme = "ipc://";
  const std::string shown = quote(endpoint);
  if (!endpoint.starts_with(scheme))
    return shown + " does not start with ipc://" + std::string(kExpectIpc);
  const std::string_view path = endpoint.substr(scheme.size());
  if (path.empty()) return shown + " has an empty path" + std::string(kExpectIpc);
  if (path[0] != '/')
    return shown + " has a relative path; it must be absolute" + std::string(kExpectIpc);
  if (path.find('\0') != std::string_view::npos) return shown + " has a NUL byte in its path";
  if (path.back() == '/') return shown + " ends in '/'; name the socket file, not its directory";
  if (path.size() >= kIpcPathLimit) {
    return shown + " has a path of " + std::to_string(path.size()) +
           " bytes; it must be shorter than " + std::to_string(kIpcPathLimit) +
           " bytes, because a Unix socket path must fit in sun_path (108 bytes on Linux, 104 on "
           "BSD)";
  }
  return "";
}

std::string quote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xf]};
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string canonical_host(std::string_view host) {
  for (int family : {AF_INET, AF_INET6}) {
    if (std::string ip = canonical_ip(family, host); !ip.empty()) return ip;
  }
  std::string lower(host);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return lower;
}

}  // namespace zring::config
