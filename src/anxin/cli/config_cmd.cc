// `anxin config`: the effective global configuration and where each value
// came from (docs/configuration.md).
//
//   anxin --config /etc/anxin/anxin.yaml config
//   ANXIN_LOG_LEVEL=debug anxin config --json
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "anxin/base/global_config.h"
#include "anxin/cli/command.h"

namespace anxin::cli::config_cmd {
namespace {

CommandMain Setup(CLI::App& app) {
  app.footer(
      "Precedence: flag > ANXIN_* environment variable > configuration file > default.\n"
      "A bad value anywhere is an error naming where it came from (exit 2).");
  return [](const GlobalOptions& g) -> int {
    auto entries = DescribeGlobalConfig(g.config);
    if (g.json) {
      nlohmann::json j;
      j["file"] =
          g.config.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.config.source);
      j["keys"] = nlohmann::json::array();
      for (const auto& e : entries) {
        j["keys"].push_back(
            {{"key", e.key}, {"value", e.value}, {"from", e.origin}, {"env", e.environment}});
      }
      std::printf("%s\n", j.dump(2).c_str());
      return kExitOk;
    }
    size_t wk = 3, wv = 5, wo = 4;
    for (const auto& e : entries) {
      wk = std::max(wk, e.key.size());
      wv = std::max(wv, e.value.empty() ? 1 : e.value.size());
      wo = std::max(wo, e.origin.size());
    }
    std::printf("%-*s  %-*s  %-*s  %s\n", static_cast<int>(wk), "KEY", static_cast<int>(wv),
                "VALUE", static_cast<int>(wo), "FROM", "ENVIRONMENT");
    for (const auto& e : entries) {
      std::printf("%-*s  %-*s  %-*s  %s\n", static_cast<int>(wk), e.key.c_str(),
                  static_cast<int>(wv), e.value.empty() ? "-" : e.value.c_str(),
                  static_cast<int>(wo), e.origin.c_str(), e.environment.c_str());
    }
    std::printf("configuration file: %s\n", g.config.source.empty()
                                                ? "none (--config FILE or ANXIN_CONFIG)"
                                                : g.config.source.c_str());
    return kExitOk;
  };
}

ANXIN_REGISTER_COMMAND(config, "show the effective global configuration and where it came from",
                       Setup);

}  // namespace
}  // namespace anxin::cli::config_cmd
