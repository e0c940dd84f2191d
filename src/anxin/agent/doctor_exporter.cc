#include "anxin/agent/doctor_exporter.h"

#include <spdlog/spdlog.h>

#include <array>
#include <string_view>
#include <vector>

#include "anxin/doctor/check_report.h"
#include "anxin/doctor/facts.h"
#include "anxin/doctor/registry.h"
#include "anxin/doctor/tools.h"
#include "anxin/host/root_fs.h"

namespace anxin::agent {
namespace {

// Prometheus-side names of doctor's severities (the rules match "fail").
constexpr std::array<std::pair<doctor::Severity, std::string_view>, 4> kStates = {{
    {doctor::Severity::kOk, "pass"},
    {doctor::Severity::kSkip, "skip"},
    {doctor::Severity::kWarn, "warn"},
    {doctor::Severity::kFail, "fail"},
}};

}  // namespace

Result<std::unique_ptr<DoctorExporter>> DoctorExporter::Create(monitor::Registry& registry,
                                                               Options options) {
  if (options.interval <= std::chrono::milliseconds(0)) {
    return InvalidArgument("the doctor interval must be above 0 (0 turns the checks off)");
  }
  std::unique_ptr<DoctorExporter> d(new DoctorExporter(std::move(options)));
  const std::string& node = d->options_.node;
  ANXIN_ASSIGN_OR_RETURN(
      d->status_,
      registry.AddGauge("anxin_doctor_check_status",
                        "A doctor host check's state: 1 for the current one (pass, skip, warn, "
                        "fail), 0 for the others.",
                        {"node", "check", "state"}));
  ANXIN_ASSIGN_OR_RETURN(auto* runs,
                         registry.AddCounter("anxin_doctor_runs_total",
                                             "Completed rounds of doctor checks.", {"node"}));
  d->runs_ = &runs->WithLabels({node});
  ANXIN_ASSIGN_OR_RETURN(
      auto* last,
      registry.AddGauge("anxin_doctor_last_run_timestamp_seconds",
                        "Unix time at which the last round of checks finished.", {"node"}));
  d->last_run_ = &last->WithLabels({node});
  ANXIN_ASSIGN_OR_RETURN(
      auto* duration,
      registry.AddGauge("anxin_doctor_run_duration_seconds",
                        "How long the last round of doctor checks took.", {"node"}));
  d->duration_ = &duration->WithLabels({node});
  return d;
}

DoctorExporter::~DoctorExporter() { Stop(); }

size_t DoctorExporter::RunOnce() {
  std::lock_guard run_lock(run_mu_);
  const auto start = std::chrono::steady_clock::now();
  doctor::CollectOptions co;
  co.root = options_.root;
  host::HostRoot root(options_.root);
  auto tools = doctor::MakeToolSource(root, options_.tool_timeout_seconds);
  const doctor::CheckRegistry& checks = doctor::BuiltinChecks();
  std::vector<const doctor::Check*> all;
  for (const doctor::Check& c : checks.checks()) all.push_back(&c);
  doctor::Report report = doctor::RunChecks(doctor::CollectFacts(co, *tools), all);
  for (const doctor::Finding& f : report.findings) {
    for (const auto& [severity, state] : kStates) {
      status_->WithLabels({options_.node, f.check_id, std::string(state)})
          .Set(f.severity == severity ? 1 : 0);
    }
    if (f.severity == doctor::Severity::kFail) {
      spdlog::warn("doctor check {} fails: {}", f.check_id, f.summary);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  duration_->Set(seconds);
  last_run_->Set(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  runs_->Inc();
  return report.findings.size();
}

void DoctorExporter::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    for (;;) {
      RunOnce();
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, options_.interval, [this] { return stop_; })) return;
    }
  });
}

void DoctorExporter::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace anxin::agent
