#include "anxin/base/url.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace anxin {
namespace {

constexpr std::string_view kForms =
    "use http://HOST:PORT, https://HOST:PORT or HOST:PORT (read as http://), e.g. "
    "http://127.0.0.1:8000";

Error Bad(std::string_view text, std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("'{}': {}; {}", text, what, kForms));
}

}  // namespace

std::string HttpUrl::Origin() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}", scheme, v6 ? "[" : "", host, v6 ? "]" : "", port);
}

Result<HttpUrl> ParseHttpUrl(std::string_view text) {
  HttpUrl url;
  std::string_view rest = text;
  int default_port = 80;
  if (const size_t sep = rest.find("://"); sep != std::string_view::npos) {
    std::string scheme(rest.substr(0, sep));
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "https") {
      default_port = 443;
    } else if (scheme != "http") {
      return std::unexpected(Bad(text, fmt::format("scheme '{}' is not HTTP", scheme)));
    }
    url.scheme = std::move(scheme);
    rest.remove_prefix(sep + 3);
  } else {
    url.scheme = "http";
  }
  const size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) url.path = std::string(rest.substr(slash));
  std::string_view port_text;
  if (hostport.starts_with('[')) {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return std::unexpected(Bad(text, "unclosed '['"));
    url.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::unexpected(Bad(text, "text after ']'"));
      port_text = after.substr(1);
      if (port_text.empty()) return std::unexpected(Bad(text, "no port after ':'"));
    }
  } else {
    const size_t colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      if (hostport.find(':') != colon) {
        return std::unexpected(Bad(text, "an IPv6 address needs brackets, e.g. [::1]:8000"));
      }
      port_text = hostport.substr(colon + 1);
      if (port_text.empty()) return std::unexpected(Bad(text, "no port after ':'"));
      hostport = hostport.substr(0, colon);
    }
    url.host = std::string(hostport);
  }
  if (url.host.empty()) return std::unexpected(Bad(text, "no host"));
  if (port_text.empty()) {
    url.port = default_port;
  } else {
    int port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return std::unexpected(
          Bad(text, fmt::format("port '{}' is not a number from 1 to 65535", port_text)));
    }
    url.port = port;
  }
  return url;
}

}  // namespace anxin
