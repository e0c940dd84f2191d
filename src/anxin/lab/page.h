// The lab's status page: nodes, the job's generation and steps, the alerts
// firing in Prometheus, the cards the sink got, and the per-fault table, as
// one self-contained HTML page that reloads itself every two seconds.
//
//   nlohmann::json status_json = {{"nodes", nlohmann::json::array()}};  // lab status --json
//   nlohmann::json report_json = {{"rows", nlohmann::json::array()}};   // lab report --json
//   std::string html = RenderLabPage(status_json, report_json);
//
// `status_json` is the document `anxin lab status --json` prints and
// `report_json` the one `anxin lab report --json` prints. Every text from
// the documents is HTML-escaped.
//
// Thread safety: a pure function.
#ifndef ANXIN_LAB_PAGE_H_
#define ANXIN_LAB_PAGE_H_

#include <nlohmann/json.hpp>
#include <string>

namespace anxin::lab {

std::string RenderLabPage(const nlohmann::json& status, const nlohmann::json& report);

}  // namespace anxin::lab

#endif  // ANXIN_LAB_PAGE_H_
