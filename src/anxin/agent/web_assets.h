// The agent page's files (web/ and the chart library from web/node_modules),
// built into the binary: web_assets.cc is generated at build time by
// cmake/EmbedFiles.cmake (src/anxin/agent/CMakeLists.txt lists the files).
// Nothing is read from disk or the network at run time.
#ifndef ANXIN_AGENT_WEB_ASSETS_H_
#define ANXIN_AGENT_WEB_ASSETS_H_

#include <span>
#include <string_view>

namespace anxin::agent::internal {

struct WebAsset {
  std::string_view path;          // the URL path it is served at, e.g. "/app.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every asset, in the order the build listed them. The views point at
// static storage.
std::span<const WebAsset> WebAssets();

}  // namespace anxin::agent::internal

#endif  // ANXIN_AGENT_WEB_ASSETS_H_
