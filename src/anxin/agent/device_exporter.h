// The agent's device side: samples every device of a backend on a
// background loop into a snapshot, turns fault events into counters, and
// writes the last snapshot out as metrics. Writing never calls the backend,
// so a scrape never waits on a device.
//
//   #include "anxin/device/registry.h"
//
//   monitor::Registry registry;   // counters and self-metrics live here
//   ANXIN_ASSIGN_OR_RETURN(auto backend, device::CreateBackend("sim", {}));
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceExporter> exporter,
//                          DeviceExporter::Create(*backend, registry, {.node = "node-1"}));
//   exporter->Start();                        // samples now, then every interval
//   std::string body = registry.TextExposition();
//   exporter->WriteText(body);                // the gauges of the last snapshot
//   exporter->Stop();
//
// Gauges (labels node, device, uuid, model, bus_id, numa_node; rebuilt from
// every snapshot, so a value the device did not report, or a device that did
// not answer, has no series rather than a stale or sentinel value):
//   anxin_device_info{vendor} 1, anxin_device_up (0: the last sample failed,
//   e.g. a backend refused a reading it could not trust; logged as a warning
//   once per reason, with an info line when sampling works again),
//   anxin_device_memory_total_bytes, anxin_device_throttle_temperature_celsius
//   (from the device's description, also while it is down), and from the
//   last sample: anxin_device_memory_used_bytes, _memory_used_ratio,
//   _temperature_celsius, _power_watts, _utilization_ratio (0..1),
//   _core_clock_hertz, _memory_clock_hertz, _throttled (0/1),
//   anxin_device_health{state} (one series per state, 1 for the current one),
//   anxin_device_link_up{port}.
// Counters in the registry:
//   anxin_device_fault_events_total{kind}     every fault event (FaultKindName)
//   anxin_device_error_codes_total{code, severity}  each time a code appears in
//                                             a sample that the previous one lacked
//   anxin_device_ecc_errors_total{type}       single_bit / double_bit, from the
//                                             device's cumulative counts
//   anxin_device_link_flaps_total{port}       link_down events (or up -> down
//                                             between samples when the backend has
//                                             no fault events)
//   anxin_device_sample_errors_total          samples that failed
//   anxin_agent_sample_duration_seconds, anxin_agent_sample_overruns_total
//                                             (labels node): one pass over every
//                                             device, and passes longer than the interval
// With a compatibility mode the same readings are also written under the
// names of Ascend's npu-exporter or NVIDIA's dcgm-exporter (docs/agent.md has
// the mapping), in their units.
//
// Thread safety: every method may be called from any thread; SampleOnce and
// the loop take turns.
#ifndef ANXIN_AGENT_DEVICE_EXPORTER_H_
#define ANXIN_AGENT_DEVICE_EXPORTER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"
#include "anxin/device/table.h"
#include "anxin/monitor/metric_registry.h"

namespace anxin::agent {

// Which other exporter's metric names to write as well.
enum class Compat { kNone, kNpuExporter, kDcgm };
// "none" (or ""), "npu-exporter", "dcgm"; kInvalidArgument otherwise.
Result<Compat> ParseCompat(std::string_view name);
std::string_view CompatName(Compat c);

struct DeviceExporterOptions {
  std::string node{};      // the node label
  Clock* clock = nullptr;  // nullptr: the wall clock
  Clock::Duration interval = std::chrono::seconds(1);
  Compat compat = Compat::kNone;
  // Observers for the agent's page (history.h): each new snapshot, on the
  // sampling thread once it is published, and each fault event, on the
  // backend's thread. They must not call back into the exporter's sampling.
  std::function<void(const device::Snapshot&)> on_snapshot{};
  std::function<void(const device::FaultEvent&)> on_fault{};
};

class DeviceExporter {
 public:
  // Enumerates the devices (an error there is returned), subscribes to fault
  // events when the backend has them, and adds the counters to registry,
  // which must outlive this. Takes no sample yet.
  static Result<std::unique_ptr<DeviceExporter>> Create(device::DeviceBackend& backend,
                                                        monitor::Registry& registry,
                                                        DeviceExporterOptions options);
  ~DeviceExporter();
  DeviceExporter(const DeviceExporter&) = delete;
  DeviceExporter& operator=(const DeviceExporter&) = delete;

  // Samples every device now and publishes that as the snapshot.
  void SampleOnce();
  // Samples now, then every interval on a thread of its own until Stop.
  void Start();
  void Stop();

  // Appends the gauges of the last snapshot (nothing before the first).
  void WriteText(std::string& out) const;
  // The last snapshot; nullptr before the first.
  std::shared_ptr<const device::Snapshot> snapshot() const;

  const std::vector<device::DeviceInfo>& devices() const { return infos_; }
  // Whether fault events come from the backend (else flaps are inferred).
  bool fault_events() const { return subscription_active_; }
  uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }
  uint64_t overruns() const;

 private:
  struct Counters;
  struct Published;
  struct DeviceState {
    std::set<std::string> codes;
    uint64_t ecc_single = 0, ecc_double = 0;
    std::map<int, bool> links;  // port -> up
    bool seen = false;
    std::string sample_error;  // why the last sample failed, logged once; "" when it did not
  };
  DeviceExporter(device::DeviceBackend& backend, monitor::Registry& registry,
                 DeviceExporterOptions options);
  void OnFault(const device::FaultEvent& e);
  void Loop(std::stop_token stop);

  device::DeviceBackend& backend_;
  monitor::Registry& registry_;
  DeviceExporterOptions options_;
  Clock& clock_;
  std::vector<device::DeviceInfo> infos_;
  std::vector<std::vector<std::string>> labels_;  // per device: node, device, uuid, ...
  std::unique_ptr<Counters> counters_;

  std::mutex sample_mu_;  // one pass at a time; guards states_
  std::vector<DeviceState> states_;
  mutable std::mutex publish_mu_;
  std::shared_ptr<const Published> published_;
  std::atomic<uint64_t> passes_{0};

  device::FaultSubscription subscription_;
  bool subscription_active_ = false;
  std::jthread thread_;
};

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_DEVICE_EXPORTER_H_
