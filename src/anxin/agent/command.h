// `anxin agent` as one call: its flags over the `agent:` section and the
// environment (ANXIN_AGENT_SOCKET, ANXIN_DOCTOR_ROOT), the device backend,
// then one sample (--once) or the exporter until SIGINT/SIGTERM or
// --duration. Docs: docs/agent.md.
//
//   AgentFlags flags;
//   flags.once = true;
//   ANXIN_ASSIGN_OR_RETURN(AgentSetup setup, LoadAgentSetup(flags, GlobalConfig{}));
//   // setup.config.port == kDefaultPort, setup.socket == "" with --once
//   ANXIN_ASSIGN_OR_RETURN(int status, RunAgentCommand(flags, GlobalConfig{}, "1.0"));
//   if (status != 0) spdlog::warn("agent: status {}", status);
//
// Thread safety: both functions may be called from any thread;
// RunAgentCommand takes SIGINT/SIGTERM while the agent serves.
#ifndef ANXIN_AGENT_COMMAND_H_
#define ANXIN_AGENT_COMMAND_H_

#include <optional>
#include <string>
#include <string_view>

#include "anxin/agent/agent.h"
#include "anxin/agent/web_config.h"
#include "anxin/base/error.h"
#include "anxin/base/global_config.h"

namespace anxin::agent {

// The flags of `anxin agent`; nullopt and "" mean "not given".
struct AgentFlags {
  std::string backend;
  std::string scenario;
  std::optional<std::string> listen;
  std::optional<int> port;
  std::string port_file;
  std::optional<std::string> interval;
  std::optional<std::string> socket;  // "" turns the socket off
  std::optional<std::string> compat;
  std::optional<std::string> node;
  bool once = false;
  std::string duration;  // "" = until a signal
  std::string at;        // with once: the sim scenario this far in
  std::optional<std::string> web_config;
  std::optional<std::string> doctor_interval;
  std::optional<std::string> doctor_root;
};

// What the flags, the section and the environment come to.
struct AgentSetup {
  AgentConfig config;
  WebConfig web;
  std::string socket;           // "" = none
  double duration_seconds = 0;  // 0 = until a signal
  std::optional<double> at_seconds;
};

// Errors: kInvalidArgument naming the flag or the file:line:col.
Result<AgentSetup> LoadAgentSetup(const AgentFlags& flags, const GlobalConfig& config);

// Runs the command; `version` is the build_info label. Returns the exit
// status (0).
Result<int> RunAgentCommand(const AgentFlags& flags, const GlobalConfig& config,
                            std::string_view version);

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_COMMAND_H_
