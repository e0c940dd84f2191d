// Times sequential scrapes of a Prometheus endpoint, as a Prometheus server
// would make them (one connection per scrape), and counts the series of each
// response, so that two exporters can be compared per series.
//
//   agent_scrape_bench URL COUNT
//
// Prints one JSON object: scrapes, series (of the last response), bytes,
// p50_ms, p99_ms, max_ms, per_series_us (p50 / series). Every response must be
// 200 with the same series count +-1%; anything else exits 1, naming it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/http.h"

namespace {

size_t CountSeries(std::string_view body) {
  size_t series = 0;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    if (end > start && body[start] != '#') ++series;
    start = end + 1;
  }
  return series;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s URL COUNT (URL like http://127.0.0.1:9466)\n", argv[0]);
    return 2;
  }
  const int count = std::atoi(argv[2]);
  if (count < 10) {
    std::fprintf(stderr, "COUNT must be at least 10, got %s\n", argv[2]);
    return 2;
  }
  auto client = anxin::HttpClient::ForUrl(argv[1], {});
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().ToString().c_str());
    return 2;
  }
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(count));
  size_t series = 0;
  size_t bytes = 0;
  for (int i = 0; i < count + 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto r = client->Get("/metrics");
    const double elapsed =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r) {
      std::fprintf(stderr, "scrape %d: %s\n", i, r.error().ToString().c_str());
      return 1;
    }
    if (r->status != 200) {
      std::fprintf(stderr, "scrape %d: HTTP %d\n", i, r->status);
      return 1;
    }
    const size_t n = CountSeries(r->body);
    if (series != 0 && (n * 100 < series * 99 || n * 100 > series * 101)) {
      std::fprintf(stderr, "scrape %d: %zu series, the one before had %zu\n", i, n, series);
      return 1;
    }
    series = n;
    bytes = r->body.size();
    if (i >= 5) ms.push_back(elapsed);  // the first few warm caches up
  }
  if (series == 0) {
    std::fprintf(stderr, "the endpoint exposes no series\n");
    return 1;
  }
  const double p50 = Percentile(ms, 0.50);
  nlohmann::json out = {{"scrapes", ms.size()},
                        {"series", series},
                        {"bytes", bytes},
                        {"p50_ms", p50},
                        {"p99_ms", Percentile(ms, 0.99)},
                        {"max_ms", *std::max_element(ms.begin(), ms.end())},
                        {"per_series_us", p50 * 1000.0 / static_cast<double>(series)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
