// The agent's live page at "/": charts of every device (HBM used,
// temperature, power, utilisation), the jobs that report through the SDK
// (step time, bus bandwidth per collective, kernel jitter), link states and
// the timeline of fault events, from the agent's History (history.h).
//
//   monitor::Registry registry;
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<History> history, History::Create(registry, {}));
//   HttpServer server({.port = 0});
//   AddPageRoutes(server, *history);
//   ANXIN_TRY(server.Start());      // http://127.0.0.1:PORT/ in a browser
//   server.Stop();
//
// Routes (docs/dashboard.md):
//   GET /                           the page (web/index.html)
//   GET /app.js, /style.css         its script and style (web/)
//   GET /vendor/uPlot.iife.min.js   the chart library (uPlot, from npm),
//       /vendor/uPlot.min.css,      its style and its MIT licence
//       /vendor/uPlot.LICENSE
//   GET /api/v1/history?since=T     device series (History::DevicesJson)
//   GET /api/v1/jobs?since=T        job series (History::JobsJson)
//   GET /api/v1/events?after=SEQ    the timeline (History::EventsJson)
// The files are built into the binary (web_assets.h); the page asks for
// everything with relative URLs, so it works behind a reverse proxy, TLS or
// basic authentication, and it needs no internet. Page responses carry a
// Content-Security-Policy that allows only this origin's scripts, styles and
// requests. A bad `since` or `after` is a 400 naming the parameter.
//
// Thread safety: the handlers may run on several threads at once.
#ifndef ANXIN_AGENT_PAGE_H_
#define ANXIN_AGENT_PAGE_H_

#include "anxin/agent/history.h"
#include "anxin/base/http.h"

namespace anxin::agent {

// REQUIRES: before server.Start(); history outlives the server's handlers.
void AddPageRoutes(HttpServer& server, const History& history);

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_PAGE_H_
