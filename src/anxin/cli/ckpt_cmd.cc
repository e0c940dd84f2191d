// `anxin ckpt list DIR` and `anxin ckpt seal DIR`: which checkpoints a job
// could resume from, and sealing one with a manifest. Docs: docs/recovery.md.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "anxin/cli/command.h"
#include "anxin/run/checkpoint.h"

namespace anxin::cli::ckpt_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(ckpt, "training checkpoints: list which verify, seal with a manifest");

CommandMain SetupList(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  app.add_option("dir", *dir, "the job's checkpoint directory")->required();
  app.add_flag("--json", *json, "print JSON");
  return [dir, json](const GlobalOptions& g) -> int {
    auto scan = run::ScanCheckpoints(*dir);
    if (!scan) return ReportError(scan.error());
    const run::Checkpoint* chosen = scan->Chosen();
    if (*json || g.json) {
      nlohmann::json out = {{"dir", scan->dir},
                            {"pointer", scan->pointer},
                            {"chosen", chosen ? chosen->path : ""},
                            {"checkpoints", nlohmann::json::array()}};
      for (const run::Checkpoint& c : scan->checkpoints) {
        out["checkpoints"].push_back({{"name", c.name},
                                      {"path", c.path},
                                      {"format", c.format},
                                      {"step", c.step},
                                      {"sealed", c.sealed},
                                      {"valid", c.valid},
                                      {"reason", c.reason}});
      }
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("%-20s %-15s %10s  %-7s %s\n", "CHECKPOINT", "FORMAT", "STEP", "SEALED",
                  "STATUS");
      for (const run::Checkpoint& c : scan->checkpoints) {
        std::string status = &c == chosen ? "chosen" : c.valid ? "valid" : "skipped: " + c.reason;
        std::printf("%-20s %-15s %10lld  %-7s %s\n", c.name.c_str(), c.format.c_str(),
                    static_cast<long long>(c.step), c.sealed ? "yes" : "no", status.c_str());
      }
      if (chosen == nullptr) std::printf("no valid checkpoint in %s\n", scan->dir.c_str());
    }
    return chosen != nullptr ? kExitOk : kExitCheckFailed;
  };
}
ANXIN_REGISTER_SUBCOMMAND(
    ckpt, list, "list checkpoints newest first, the one to resume from, and why others are skipped",
    SetupList);

CommandMain SetupSeal(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  app.add_option("dir", *dir, "one checkpoint directory (e.g. iter_0000200)")->required();
  return [dir](const GlobalOptions&) -> int {
    auto n = run::SealCheckpoint(*dir);
    if (!n) return ReportError(n.error());
    std::printf("sealed %s: %d file(s) in %s\n", dir->c_str(), *n, run::kManifestName);
    return kExitOk;
  };
}
ANXIN_REGISTER_SUBCOMMAND(ckpt, seal,
                          "write anxin-manifest.json (sizes, SHA-256) into a checkpoint",
                          SetupSeal);

}  // namespace
}  // namespace anxin::cli::ckpt_cmd
