// Known accelerator models: memory size, nominal power and clocks. The
// simulator builds devices from these, and real backends use them to fill in
// what a driver does not report.
//
//   const ModelSpec* m = FindModel("Ascend910C");   // nullptr when unknown
//   uint64_t hbm = m != nullptr ? m->hbm_bytes : 0; // 64 GiB
//
// The figures are nominal (data-sheet class numbers, rounded); the simulator
// needs plausible values, not a particular board's.
#ifndef ANXIN_DEVICE_MODELS_H_
#define ANXIN_DEVICE_MODELS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace anxin::device {

struct ModelSpec {
  std::string_view name;        // "Ascend910C": what scenarios and JSON use
  std::string_view short_name;  // "910C": what the table shows, as npu-smi does
  std::string_view vendor;      // "huawei" or "nvidia"
  uint64_t hbm_bytes = 0;
  double tdp_watts = 0;
  double throttle_celsius = 0;  // the device slows its clocks from here on
  double core_clock_mhz = 0;
  double memory_clock_mhz = 0;
};

// REQUIRES nothing; matching ignores case. nullptr when unknown.
const ModelSpec* FindModel(std::string_view name);
std::span<const ModelSpec> KnownModels();
// "Ascend910C, Ascend910B2C, ..." for error messages.
std::string KnownModelNames();

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_MODELS_H_
