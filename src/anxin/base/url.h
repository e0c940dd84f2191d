// The one reading of a server address that a flag or configuration key gives
// (bench serve --url, serve gate --upstream, webhook URLs, ...).
//
// Accepted, and nothing else:
//   http://HOST[:PORT][/PATH]    port 80 when left out
//   https://HOST[:PORT][/PATH]   port 443 when left out
//   HOST[:PORT][/PATH]           no scheme: read as http://HOST[:PORT][/PATH]
// HOST is a name, an IPv4 address or a bracketed IPv6 address ("[::1]:8000").
// Any other scheme (ftp://, ws://) is refused with the forms above in the
// message (docs/configuration.md).
//
//   ANXIN_ASSIGN_OR_RETURN(HttpUrl u, ParseHttpUrl("127.0.0.1:8000/v1"));
//   // u.scheme == "http", u.host == "127.0.0.1", u.port == 8000, u.path == "/v1"
//   std::string base = u.Origin();   // "http://127.0.0.1:8000"
//
// Thread safety: a free function on values.
#ifndef ANXIN_BASE_URL_H_
#define ANXIN_BASE_URL_H_

#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin {

struct HttpUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // without brackets for IPv6
  int port = 0;        // 1..65535
  std::string path;    // "" or starting with '/' ("/" alone is kept as "/")

  // "http://host:port" (IPv6 hosts in brackets), without the path.
  std::string Origin() const;
};

// Errors are kInvalidArgument naming the text and the accepted forms.
[[nodiscard]] Result<HttpUrl> ParseHttpUrl(std::string_view text);

}  // namespace anxin

#endif  // ANXIN_BASE_URL_H_
