// Logging for anxin programs: spdlog to stderr, as text (default) or as JSON
// lines ({"ts":..., "level":..., "logger":..., "msg":...}) for log shippers.
//
//   ANXIN_TRY(InitLogging("info", "json"));
//   spdlog::info("sampled {} devices", 8);
//
// Thread safety: call InitLogging before other threads log; calling it again
// reconfigures the logger.
#ifndef ANXIN_BASE_LOG_H_
#define ANXIN_BASE_LOG_H_

#include <string_view>

#include "anxin/base/error.h"

namespace anxin {

// level: trace, debug, info, warn, error, off. format: text or json.
// Returns kInvalidArgument naming the bad value and the accepted ones.
Status InitLogging(std::string_view level, std::string_view format);

}  // namespace anxin

#endif  // ANXIN_BASE_LOG_H_
