// Runs doctor's host checks on a loop of its own and exports each check's
// status, so a node that drifts after a reboot (irqbalance back on, a NUMA
// binding lost, a governor reset) raises an alert before the next job
// suffers. The checks are the ones `anxin doctor` runs (doctor/registry.h),
// on the same facts (doctor/facts.h).
//
//   monitor::Registry registry;
//   DoctorExporter::Options o;
//   o.node = "npu-node-01";
//   o.interval = std::chrono::minutes(10);
//   ANXIN_ASSIGN_OR_RETURN(auto doctor, DoctorExporter::Create(registry, o));
//   doctor->Start();     // runs the checks now, then every interval
//   doctor->Stop();
//
// Series (label node):
//   anxin_doctor_check_status{check, state}  1 for the check's state now, 0
//       for its other states (pass, skip, warn, fail), one series each
//   anxin_doctor_runs_total                  completed rounds
//   anxin_doctor_last_run_timestamp_seconds  when the last round finished
//   anxin_doctor_run_duration_seconds        how long it took
//
// Thread safety: Start and Stop from one thread; RunOnce from any, one at a
// time (the loop and a caller are serialised).
#ifndef ANXIN_AGENT_DOCTOR_EXPORTER_H_
#define ANXIN_AGENT_DOCTOR_EXPORTER_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/monitor/metric_registry.h"

namespace anxin::agent {

class DoctorExporter {
 public:
  struct Options {
    std::string node;
    // The host tree to check: "/" on the node, "/host" in a container that
    // mounts the node's root there, or a captured tree in tests.
    std::string root = "/";
    std::chrono::milliseconds interval = std::chrono::minutes(10);
    double tool_timeout_seconds = 5;  // each vendor tool doctor runs
  };

  static Result<std::unique_ptr<DoctorExporter>> Create(monitor::Registry& registry,
                                                        Options options);
  ~DoctorExporter();
  DoctorExporter(const DoctorExporter&) = delete;
  DoctorExporter& operator=(const DoctorExporter&) = delete;

  // Runs a round now, then one every interval on a thread of its own.
  void Start();
  void Stop();
  // One round: collect facts, run every check, update the series. Returns
  // the number of checks run.
  size_t RunOnce();

 private:
  explicit DoctorExporter(Options options) : options_(std::move(options)) {}

  Options options_;
  monitor::Family<monitor::Gauge>* status_ = nullptr;
  monitor::Counter* runs_ = nullptr;
  monitor::Gauge* last_run_ = nullptr;
  monitor::Gauge* duration_ = nullptr;
  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_DOCTOR_EXPORTER_H_
