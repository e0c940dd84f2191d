// `anxin precision`: mixed-precision checks, and `anxin precision check
// DUMP_DIR`: flags the tensors of an msprobe dump that break the FP32-master /
// BF16-gradient / FP16-activation policy (docs/kernels.md).
//
//   anxin precision check dump/step0/rank0
//   anxin precision check dump/step0/rank0 --lr 3e-4 --as-half --json
#include <cstdio>
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/kernels/precision.h"

namespace anxin::cli::precision_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(precision, "mixed-precision checks of training dumps");

struct Opts {
  std::string dump;
  kernels::PrecisionOptions options;
};

int Run(const Opts& o, const GlobalOptions& g) {
  auto report = kernels::CheckPrecision(o.dump, o.options);
  if (!report) return ReportError(report.error());
  if (g.json) {
    std::printf("%s\n", kernels::PrecisionJson(*report).dump(2).c_str());
  } else {
    std::fputs(kernels::PrecisionText(*report).c_str(), stdout);
  }
  return report->findings.empty() ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("DUMP_DIR", o->dump, "msprobe dump directory (holding dump.json)")->required();
  app.add_option("--lr", o->options.learning_rate,
                 "learning rate, for whether a gradient's update survives bfloat16 weights")
      ->capture_default_str()
      ->check(Above(0));
  app.add_flag("--as-half", o->options.as_half,
               "judge float32 tensors as if activations and gradients were float16 and weights "
               "bfloat16");
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(precision, check,
                          "flag fp16 overflow/underflow, lost bf16 updates and non-fp32 master "
                          "weights in an msprobe dump",
                          Setup);

}  // namespace
}  // namespace anxin::cli::precision_cmd
