#include "anxin/doctor/tools.h"

#include "anxin/doctor/process_runner.h"

namespace anxin::doctor {

namespace {

const std::vector<std::string> kVendorDirs = {"/usr/local/Ascend/driver/tools", "/usr/local/sbin",
                                              "/usr/local/bin", "/usr/sbin", "/sbin"};

class LiveTools : public ToolSource {
 public:
  LiveTools(double timeout_s, ProcessRunner run) : timeout_s_(timeout_s), run_(std::move(run)) {}
  Result<std::string> Run(const std::vector<std::string>& argv) override {
    return RunTool(run_, argv, timeout_s_);
  }

 private:
  double timeout_s_;
  ProcessRunner run_;
};

class CapturedTools : public ToolSource {
 public:
  explicit CapturedTools(host::HostRoot root) : root_(std::move(root)) {}
  Result<std::string> Run(const std::vector<std::string>& argv) override {
    std::string path = CapturePath(argv);
    if (path.empty() || !root_.Exists(path)) {
      std::string cmd;
      for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
      return NotFound(argv[0] + " output not captured in " + root_.root() + " (" + cmd + ")");
    }
    return root_.ReadFile(path);
  }

 private:
  host::HostRoot root_;
};

}  // namespace

std::string CapturePath(const std::vector<std::string>& a) {
  const std::string base = "/anxin-captures/";
  if (a.size() == 3 && a[0] == "mlnx_qos" && a[1] == "-i")
    return base + "mlnx_qos/" + a[2] + ".txt";
  if (a.size() == 5 && a[0] == "hccn_tool" && a[1] == "-i" && a[4] == "-g" &&
      (a[3] == "-pfc" || a[3] == "-dscp_to_tc")) {
    return base + "hccn_tool/" + a[2] + "." + a[3].substr(1) + ".txt";
  }
  if (a.size() == 2 && a[0] == "npu-smi" && a[1] == "info") return base + "npu-smi/info.txt";
  return "";
}

std::unique_ptr<ToolSource> MakeToolSource(const host::HostRoot& root, double timeout_s) {
  if (root.is_live())
    return std::make_unique<LiveTools>(timeout_s, ProcessRunnerAlsoIn(kVendorDirs));
  return std::make_unique<CapturedTools>(root);
}

}  // namespace anxin::doctor
