#include "anxin/agent/page.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "anxin/agent/web_assets.h"

namespace anxin::agent {

namespace {

// Scripts, styles and requests from this origin only; uPlot sizes its
// elements through the style property, which style-src does not govern.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

HttpResponse WithPageHeaders(HttpResponse r) {
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  // The binary is the page's only source: a new agent brings a new page.
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

HttpResponse BadParameter(std::string_view name, std::string_view expected, std::string_view got) {
  const std::string text = std::string(name) + ": expected " + std::string(expected) + ", got '" +
                           std::string(got.substr(0, 64)) + "'";
  return HttpResponse::Json(400, nlohmann::json{{"error", text}}.dump(
                                     -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                     "\n");
}

// Route patterns are regular expressions; asset paths are literal.
std::string Literal(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// ?since=UNIX_SECONDS (default 0: everything kept).
std::optional<double> Since(const HttpRequest& req) {
  auto text = req.Query("since");
  if (!text || text->empty()) return 0.0;
  double v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || !std::isfinite(v) || v < 0)
    return std::nullopt;
  return v;
}

}  // namespace

void AddPageRoutes(HttpServer& server, const History& history) {
  for (const internal::WebAsset& asset : internal::WebAssets()) {
    server.Get(Literal(asset.path), [&asset](const HttpRequest&) {
      HttpResponse r = HttpResponse::Text(200, std::string(asset.body));
      r.content_type = std::string(asset.content_type);
      return WithPageHeaders(std::move(r));
    });
  }
  server.Get("/api/v1/history", [&history](const HttpRequest& req) {
    auto since = Since(req);
    if (!since) return BadParameter("since", "unix seconds like 1764694650.5", *req.Query("since"));
    return WithPageHeaders(HttpResponse::Json(200, history.DevicesJson(*since)));
  });
  server.Get("/api/v1/jobs", [&history](const HttpRequest& req) {
    auto since = Since(req);
    if (!since) return BadParameter("since", "unix seconds like 1764694650.5", *req.Query("since"));
    return WithPageHeaders(HttpResponse::Json(200, history.JobsJson(*since)));
  });
  server.Get("/api/v1/events", [&history](const HttpRequest& req) {
    uint64_t after = 0;
    if (auto text = req.Query("after"); text && !text->empty()) {
      auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), after);
      if (ec != std::errc() || end != text->data() + text->size())
        return BadParameter("after", "an event's seq, a whole number like 12", *text);
    }
    return WithPageHeaders(HttpResponse::Json(200, history.EventsJson(after)));
  });
}

}  // namespace anxin::agent
