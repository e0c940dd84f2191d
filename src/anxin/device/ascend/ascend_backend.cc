#include "anxin/device/ascend/ascend_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <set>

#include "anxin/base/subprocess.h"
#include "anxin/device/ascend/npu_smi.h"
#include "anxin/device/ascend/source.h"

namespace anxin::device::ascend {
namespace {

class AscendBackend final : public DeviceBackend {
 public:
  AscendBackend(std::unique_ptr<ChipSource> source, AscendOptions options, Clock& clock)
      : source_(std::move(source)), options_(std::move(options)), clock_(clock) {}

  std::string_view name() const override { return "ascend"; }

  std::string Describe() const override {
    std::lock_guard lock(mu_);
    std::string d = fmt::format("ascend via {}", source_->Describe());
    if (!chips_.empty()) d += fmt::format(" ({} x {})", chips_.size(), chips_[0].info.model);
    return d;
  }

  Result<std::vector<DeviceInfo>> Enumerate() override {
    std::lock_guard lock(mu_);
    ANXIN_TRY(ListLocked());
    std::vector<DeviceInfo> out;
    for (const Chip& c : chips_) out.push_back(c.info);
    return out;
  }

  Result<DeviceSample> Sample(int index) override {
    ANXIN_ASSIGN_OR_RETURN(Chip chip, Find(index));
    ANXIN_ASSIGN_OR_RETURN(DeviceSample s, source_->Read(chip));
    s.index = index;
    std::lock_guard lock(mu_);
    if (resetting_.contains(index)) s.health = Health::kResetting;
    return s;
  }

  Result<FaultSubscription> SubscribeFaults(FaultCallback callback) override {
    // Resets are the only faults this backend sees happen; health and error
    // codes are read by Sample.
    std::lock_guard lock(sub_mu_);
    int id = next_id_++;
    subscribers_[id] = std::move(callback);
    return FaultSubscription([this, id] {
      std::lock_guard lock(sub_mu_);
      subscribers_.erase(id);
    });
  }

  Status ClearMemory(int index) override { return ResetChip(index, "clear the memory of"); }
  Status Reset(int index) override { return ResetChip(index, "reset"); }

 private:
  Status ListLocked() {
    if (!chips_.empty()) return Ok();
    ANXIN_ASSIGN_OR_RETURN(chips_, source_->List());
    return Ok();
  }

  Result<Chip> Find(int index) {
    std::lock_guard lock(mu_);
    ANXIN_TRY(ListLocked());
    for (const Chip& c : chips_) {
      if (c.info.index == index) return c;
    }
    std::string known;
    for (const Chip& c : chips_)
      known += (known.empty() ? "" : ", ") + std::to_string(c.info.index);
    return NotFound(fmt::format("NPU {} does not exist (this node has: {})", index, known));
  }

  void Publish(const FaultEvent& e) {
    std::lock_guard lock(sub_mu_);
    for (auto& [id, cb] : subscribers_) cb(e);
  }

  // The processes npu-smi lists on the chip.
  Result<std::vector<NpuSmiProcess>> Holders(const Chip& chip) {
    ANXIN_ASSIGN_OR_RETURN(CommandOutput out, RunCommand({options_.npu_smi, "info"},
                                                         {.timeout = options_.command_timeout}));
    if (!out.ok()) {
      return Unavailable(fmt::format("NPU {}: cannot tell whether a process holds it: {} info {}",
                                     chip.info.index, options_.npu_smi, out.Describe()));
    }
    ANXIN_ASSIGN_OR_RETURN(NpuSmiInfo info, ParseNpuSmiInfo(out.stdout_text));
    std::vector<NpuSmiProcess> held;
    for (const NpuSmiProcess& p : info.processes) {
      if (p.npu == chip.card && p.chip == chip.chip) held.push_back(p);
    }
    return held;
  }

  Status ResetChip(int index, std::string_view what) {
    ANXIN_ASSIGN_OR_RETURN(Chip chip, Find(index));
    ANXIN_ASSIGN_OR_RETURN(std::vector<NpuSmiProcess> held, Holders(chip));
    if (!held.empty()) {
      std::string who;
      for (const NpuSmiProcess& p : held) {
        who += fmt::format("{}{} (pid {})", who.empty() ? "" : ", ", p.name, p.pid);
      }
      return FailedPrecondition(
          fmt::format("NPU {}: cannot {} it while a process holds it: {}; stop the job first",
                      index, what, who));
    }
    {
      std::lock_guard lock(mu_);
      if (!resetting_.insert(index).second) {
        return FailedPrecondition(fmt::format("NPU {}: a reset is already in progress", index));
      }
    }
    Status st = ResetAndPoll(chip);
    {
      std::lock_guard lock(mu_);
      resetting_.erase(index);
    }
    Publish(MakeFaultEvent(
        index, clock_.Now(), st ? FaultKind::kResetDone : FaultKind::kResetFailed,
        st ? fmt::format("NPU {}: reset done, health OK", index) : st.error().message()));
    return st;
  }

  Status ResetAndPoll(const Chip& chip) {
    const int index = chip.info.index;
    std::string card = std::to_string(chip.card), c = std::to_string(chip.chip);
    ANXIN_ASSIGN_OR_RETURN(CommandOutput out,
                           RunCommand({options_.npu_smi, "set", "-t", "reset", "-i", card, "-c", c},
                                      {.timeout = options_.reset_timeout}));
    if (!out.ok()) {
      return Unavailable(fmt::format("NPU {}: npu-smi set -t reset -i {} -c {} {}: {}", index, card,
                                     c, out.Describe(), out.OneLineMessage()));
    }
    // The driver brings the chip back over 20 s or more: poll its health.
    const Clock::TimePoint deadline = clock_.Now() + options_.poll_timeout;
    std::string last = "no reading";
    for (;;) {
      clock_.SleepFor(options_.poll_interval);
      Result<DeviceSample> s = source_->Read(chip);
      if (s && s->health == Health::kOk) return Ok();
      last = s ? fmt::format("health {}", HealthName(s->health)) : s.error().message();
      if (clock_.Now() >= deadline) break;
    }
    return DeadlineExceeded(fmt::format(
        "NPU {}: not healthy {:.0f} s after the reset ({}): check npu-smi info -t health -i {} "
        "-c {}; a second reset or a reboot may be needed",
        index, ToSeconds(options_.poll_timeout), last, card, c));
  }

  const std::unique_ptr<ChipSource> source_;
  const AscendOptions options_;
  Clock& clock_;

  mutable std::mutex mu_;
  std::vector<Chip> chips_;  // guarded by mu_
  std::set<int> resetting_;  // guarded by mu_

  std::mutex sub_mu_;
  int next_id_ = 0;                           // guarded by sub_mu_
  std::map<int, FaultCallback> subscribers_;  // guarded by sub_mu_
};

}  // namespace

Result<std::unique_ptr<DeviceBackend>> MakeAscendBackend(const AscendOptions& options,
                                                         Clock& clock) {
  // Enumerated at once, so that Describe() names the chips from the start.
  auto make = [&](std::unique_ptr<ChipSource> source) -> Result<std::unique_ptr<DeviceBackend>> {
    auto backend = std::make_unique<AscendBackend>(std::move(source), options, clock);
    ANXIN_TRY(backend->Enumerate());
    return std::unique_ptr<DeviceBackend>(std::move(backend));
  };
  auto dcmi = MakeDcmiSource(options, clock);
  if (dcmi) return make(*std::move(dcmi));
  auto smi = MakeNpuSmiSource(options, clock);
  if (smi) return make(*std::move(smi));
  if (smi.error().code() == ErrorCode::kDataLoss) {
    return Unavailable(fmt::format("ascend: {}", smi.error().message()));
  }
  return Unavailable(fmt::format(
      "ascend: neither DCMI nor npu-smi answers (DCMI: {}; npu-smi: {}): install the Ascend "
      "driver, which ships both (add /usr/local/Ascend/driver/lib64/driver to LD_LIBRARY_PATH "
      "and npu-smi to PATH), or use --backend sim on a machine without NPUs",
      dcmi.error().message(), smi.error().message()));
}

}  // namespace anxin::device::ascend
