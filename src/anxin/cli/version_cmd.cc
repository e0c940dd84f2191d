// `anxin version`: the version and how it was built, for bug reports.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "anxin/cli/command.h"
#include "anxin/cli/version.h"

namespace anxin::cli::version_cmd {
namespace {

CommandMain Setup(CLI::App&) {
  return [](const GlobalOptions& g) -> int {
    if (g.json) {
      nlohmann::json j;
      j["version"] = std::string(kVersion);
      j["compiler"] = "g++ " __VERSION__;
      j["cplusplus"] = static_cast<long>(__cplusplus);
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("anxin %s (g++ %s)\n", kVersion, __VERSION__);
    }
    return kExitOk;
  };
}

ANXIN_REGISTER_COMMAND(version, "print the version and build information", Setup);

}  // namespace
}  // namespace anxin::cli::version_cmd
