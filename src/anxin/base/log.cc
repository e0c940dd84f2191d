#include "anxin/base/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace anxin {
namespace {

// Formats each record as one JSON object; the message is escaped by the JSON
// library, so quotes and newlines in log text cannot break the line.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    auto us = duration_cast<microseconds>(msg.time.time_since_epoch()).count();
    nlohmann::json j;
    j["ts"] = static_cast<double>(us) / 1e6;
    j["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                             spdlog::level::to_string_view(msg.level).size());
    if (msg.logger_name.size() > 0) {
      j["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
    }
    j["msg"] = std::string(msg.payload.data(), msg.payload.size());
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

Status InitLogging(std::string_view level, std::string_view format) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgument("unknown log level '" + std::string(level) +
                           "': use trace, debug, info, warn, error or off");
  }
  if (format != "text" && format != "json") {
    return InvalidArgument("unknown log format '" + std::string(format) + "': use text or json");
  }
  // Calling again reconfigures (tests do, and a command may after reading
  // its own configuration); spdlog refuses a second logger of one name.
  spdlog::drop("anxin");
  auto logger = spdlog::stderr_color_mt("anxin");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  }
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return Ok();
}

}  // namespace anxin
