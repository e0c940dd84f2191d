#include "anxin/doctor/finding.h"

namespace anxin::doctor {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "ok";
    case Severity::kSkip:
      return "skip";
    case Severity::kWarn:
      return "warn";
    case Severity::kFail:
      return "fail";
  }
  return "?";
}

bool ParseSeverity(std::string_view name, Severity& out) {
  for (Severity s : {Severity::kOk, Severity::kSkip, Severity::kWarn, Severity::kFail}) {
    if (SeverityName(s) == name) {
      out = s;
      return true;
    }
  }
  return false;
}

FixAction FixAction::Write(std::string path, std::string content, std::string description) {
  FixAction a;
  a.write_path = std::move(path);
  a.write_content = std::move(content);
  a.description = std::move(description);
  return a;
}

FixAction FixAction::Command(std::vector<std::string> argv, std::string description) {
  FixAction a;
  a.argv = std::move(argv);
  a.description = std::move(description);
  return a;
}

std::string FixAction::Render() const {
  if (is_write()) return "echo " + write_content + " > " + write_path;
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

}  // namespace anxin::doctor
