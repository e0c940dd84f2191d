#include "anxin/doctor/tools.h"

#include "anxin/doctor/process_runner.h"

namespace anxin::doctor {

namespace {

const std::vector<std::string> kVendorDirs = {"/usr/local/Ascend/driver/tools", "/usr/local/sbin",
                                              "/usr/local/bin", "/usr/sbin", "/sbin"};

class LiveTools : public ToolSource {
 public:
  explicit LiveTools(double timeout_s) : timeout_s_(timeout_s) {}
  Result<std::string> Run(const std::vector<std::string>& argv) override {
    std::string exe = FindExecutable(argv[0], kVendorDirs);
    if (exe.empty()) return NotFound(argv[0] + " is not installed");
    std::vector<std::string> full = argv;
    full[0] = exe;
    ANXIN_ASSIGN_OR_RETURN(ProcessOutput out, RunProcess(full, timeout_s_));
    if (out.exit_code != 0) {
      std::string err = out.err.empty() ? out.out : out.err;
      if (err.size() > 300) err.resize(300);
      while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
      return Unavailable(argv[0] + " exited with " + std::to_string(out.exit_code) +
                         (err.empty() ? "" : ": " + err));
    }
    return out.out;
  }

 private:
  double timeout_s_;
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
  if (root.is_live()) return std::make_unique<LiveTools>(timeout_s);
  return std::make_unique<CapturedTools>(root);
}

}  // namespace anxin::doctor
