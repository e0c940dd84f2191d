// `anxin doctor`: host and fabric preflight (src/anxin/doctor, docs/doctor.md).
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "anxin/base/file.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/doctor/check_report.h"
#include "anxin/doctor/facts.h"
#include "anxin/doctor/fix.h"
#include "anxin/doctor/multi_host.h"
#include "anxin/doctor/registry.h"
#include "anxin/doctor/tools.h"

namespace anxin::cli::doctor_cmd {
namespace {

struct Opts {
  std::string root = "/";
  std::string root_source = "--root";  // or ANXIN_DOCTOR_ROOT, for messages
  std::string only;
  bool fix = false;
  bool dry_run = false;
  bool apply = false;
  bool verbose = false;
  std::string env_file;
  int nodes = 0;
  double tool_timeout = 5;
  std::string hosts_file;
  std::string ssh_config;
  std::vector<std::string> ssh_options;
  std::string remote_anxin = "anxin";
  double host_timeout = 30;
  int parallel = 16;
};

int RunHosts(const Opts& o, const GlobalOptions& g) {
  if (o.fix) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--fix applies to one host; run `anxin doctor --fix` on each host"));
  }
  auto text = ReadInputFile(o.hosts_file, "--hosts");
  if (!text) return ReportError(text.error());
  auto hosts = doctor::ParseHostsFile(*text);
  if (!hosts) return ReportError(hosts.error().With(o.hosts_file));
  doctor::RemoteOptions ro;
  ro.ssh_config = o.ssh_config;
  ro.ssh_options = o.ssh_options;
  ro.remote_anxin = o.remote_anxin;
  ro.timeout_s = o.host_timeout;
  ro.parallel = o.parallel;
  if (!o.only.empty()) ro.remote_args = {"--only", o.only};
  if (o.nodes > 0) {
    ro.remote_args.push_back("--nodes");
    ro.remote_args.push_back(std::to_string(o.nodes));
  }
  if (o.root != "/") {
    ro.remote_args.push_back("--root");
    ro.remote_args.push_back(o.root);
  }
  auto results = doctor::RunOnHosts(*hosts, ro);
  if (g.json) {
    std::printf("%s\n", doctor::MatrixJson(results).dump(2).c_str());
  } else {
    std::fputs(doctor::RenderMatrix(results).c_str(), stdout);
  }
  return doctor::WorstOverHosts(results) == doctor::Severity::kFail ? kExitCheckFailed : kExitOk;
}

int RunLocal(const Opts& o, const GlobalOptions& g) {
  auto checks = doctor::BuiltinChecks().Select(o.only);
  if (!checks) return ReportError(checks.error());
  doctor::CollectOptions co;
  co.root = o.root;
  if (!o.env_file.empty()) {
    auto text = ReadInputFile(o.env_file, "--env");
    if (!text) return ReportError(text.error());
    auto env = host::ParseEnvFile(*text);
    if (!env) return ReportError(env.error().With(o.env_file));
    co.env = *env;
    co.env_source = "--env " + o.env_file;
  }
  if (o.nodes > 0) co.job_nodes = o.nodes;
  host::HostRoot root(o.root);
  if (!root.Exists("/proc") && !root.Exists("/sys")) {
    return ReportError(Error(ErrorCode::kNotFound,
                             o.root_source + (o.root_source == "--root" ? " " : "=") + o.root +
                                 ": neither proc/ nor sys/ under it; point it at a captured host "
                                 "tree"));
  }
  auto tools = doctor::MakeToolSource(root, o.tool_timeout);
  doctor::Report report = doctor::RunChecks(doctor::CollectFacts(co, *tools), *checks);

  if (!o.fix) {
    if (g.json) {
      std::printf("%s\n", doctor::ToJson(report).dump(2).c_str());
    } else {
      std::fputs(doctor::RenderTable(report, o.verbose).c_str(), stdout);
    }
    return report.Worst() == doctor::Severity::kFail ? kExitCheckFailed : kExitOk;
  }
  doctor::FixRun fix = doctor::RunFix(
      report, {.collect = co, .tools = tools.get(), .checks = *checks, .apply = o.apply});
  if (g.json) {
    nlohmann::json j = doctor::ToJson(report);
    doctor::AddFixRunJson(fix, j);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fputs(doctor::RenderFixRun(fix).c_str(), stdout);
  }
  return fix.worst == doctor::Severity::kFail ? kExitCheckFailed : kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.description(
      "Host and fabric preflight: IRQ placement, NUMA binding of ranks, RoCE QoS (DSCP, PFC, "
      "trust, ECN), HCCL/NCCL algorithm and timeouts, allocator options, hugepages, CPU governor, "
      "/etc/ascend_numa.conf. Exit 1 when a check fails. See docs/doctor.md.");
  // ANXIN_DOCTOR_ROOT is read below rather than by CLI11 so that errors name it.
  CLI::Option* root_flag =
      app.add_option("--root", o->root,
                     "read /sys, /proc and /etc under this directory (a captured tree; default /, "
                     "or env ANXIN_DOCTOR_ROOT)");
  app.add_option("--only", o->only, "comma-separated check ids or groups (irq,qos.ecn)");
  app.add_option("--env", o->env_file,
                 "KEY=VALUE file with the job's environment, for a preflight before launch "
                 "(used when no running rank holds an accelerator)");
  app.add_option("--nodes", o->nodes, "number of nodes in the job (for comm.algo)")
      ->check(InRange(1, 1000000));
  app.add_flag("--verbose,-v", o->verbose, "show the evidence of passing checks too");
  app.add_flag(
      "--fix", o->fix,
      "list the safe host fixes (stop irqbalance, spread NIC IRQs over local cores); a dry "
      "run unless --apply");
  app.add_flag("--dry-run", o->dry_run, "with --fix: only list the commands (the default)");
  app.add_flag("--apply", o->apply,
               "with --fix: really write /proc/irq/*/smp_affinity_list and "
               "stop irqbalance (under --root when given)");
  app.add_option("--tool-timeout", o->tool_timeout,
                 "seconds for each mlnx_qos/hccn_tool/npu-smi run")
      ->check(InRange(0.1, 600));
  app.add_option("--hosts", o->hosts_file,
                 "run on every host of FILE ([user@]host[:port] per line) over ssh and print a "
                 "check x host matrix with drift marked");
  app.add_option("--ssh-config", o->ssh_config, "with --hosts: ssh -F FILE");
  app.add_option("--ssh-option", o->ssh_options,
                 "with --hosts: extra ssh -o Key=Value (repeatable)");
  app.add_option("--remote-anxin", o->remote_anxin, "with --hosts: the anxin program on the hosts");
  app.add_option("--timeout", o->host_timeout, "with --hosts: seconds per host (default 30)")
      ->check(InRange(1, 3600));
  app.add_option("--parallel", o->parallel, "with --hosts: hosts at once (default 16)")
      ->check(InRange(1, 1024));
  return [o, root_flag](const GlobalOptions& g) -> int {
    if (root_flag->count() == 0) {
      if (const char* env = std::getenv("ANXIN_DOCTOR_ROOT"); env != nullptr && *env != '\0') {
        o->root = env;
        o->root_source = "ANXIN_DOCTOR_ROOT";
      }
    }
    if ((o->apply || o->dry_run) && !o->fix) {
      return ReportError(Error(ErrorCode::kInvalidArgument, "--apply and --dry-run go with --fix"));
    }
    if (o->apply && o->dry_run) {
      return ReportError(Error(ErrorCode::kInvalidArgument, "choose one of --apply and --dry-run"));
    }
    for (const std::string& opt : o->ssh_options) {
      if (opt.find('=') == std::string::npos || opt.front() == '-') {
        return ReportError(
            Error(ErrorCode::kInvalidArgument, "--ssh-option '" + opt + "': expected Key=Value"));
      }
    }
    if (!o->ssh_config.empty()) {
      // ssh reads the file; an empty one (-F /dev/null: no configuration) is
      // valid, so only what ReadFile cannot read is refused, naming the flag.
      if (!ReadFile(o->ssh_config, 16 << 20)) {
        auto text = ReadInputFile(o->ssh_config, "--ssh-config", 16 << 20);
        if (!text) return ReportError(text.error());
      }
    }
    if (!o->hosts_file.empty()) return RunHosts(*o, g);
    return RunLocal(*o, g);
  };
}

ANXIN_REGISTER_COMMAND(doctor, "host and fabric preflight: IRQs, NUMA, RoCE QoS, HCCL/NCCL env",
                       Setup);

}  // namespace
}  // namespace anxin::cli::doctor_cmd
