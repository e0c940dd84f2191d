#include "anxin/device/live_view.h"

#include <fmt/format.h>

#include "anxin/base/strings.h"
#include "anxin/device/summary.h"

namespace anxin::device {
namespace {

const char* kClearScreen = "\x1b[H\x1b[2J";

}  // namespace

LiveView::LiveView(std::FILE* out, LiveViewOptions options)
    : out_(out), options_(std::move(options)) {}

std::string LiveView::Heading(const Snapshot& snap) const {
  double t = first_ ? ToSeconds(snap.time - first_->time) : 0;
  std::string clock = options_.total_seconds > 0
                          ? fmt::format("t = {:.1f} s of {:.0f} s", t, options_.total_seconds)
                          : fmt::format("t = {:.1f} s", t);
  if (options_.heading.empty()) return clock + "\n";
  return fmt::format("{}   {}\n", options_.heading, clock);
}

std::string LiveView::ProgressLine(const Snapshot& snap) const {
  // The two readings an operator watches first: the hottest device and the
  // fullest memory.
  const DeviceRow* hottest = nullptr;
  const DeviceRow* fullest = nullptr;
  int unreadable = 0;
  for (const DeviceRow& r : snap.rows) {
    if (!r.sample) {
      ++unreadable;
      continue;
    }
    if (Reported(r.sample->temperature_celsius) &&
        (!hottest || r.sample->temperature_celsius > hottest->sample->temperature_celsius)) {
      hottest = &r;
    }
    auto ratio = [](const DeviceRow& x) {
      return x.info.hbm_total_bytes && Reported(x.sample->hbm_used_bytes)
                 ? double(x.sample->hbm_used_bytes) / x.info.hbm_total_bytes
                 : 0.0;
    };
    if (Reported(r.sample->hbm_used_bytes) && (!fullest || ratio(r) > ratio(*fullest))) {
      fullest = &r;
    }
  }
  double t = first_ ? ToSeconds(snap.time - first_->time) : 0;
  std::string line = fmt::format("  t = {:4.1f} s", t);
  if (hottest) {
    line += fmt::format("   hottest {} {:.0f} C", DeviceLabel(hottest->info),
                        hottest->sample->temperature_celsius);
  }
  if (fullest) {
    line +=
        fmt::format("   fullest HBM {} {:.1f} / {:.0f} GiB ({:.0f}%)", DeviceLabel(fullest->info),
                    ToGiB(fullest->sample->hbm_used_bytes), ToGiB(fullest->info.hbm_total_bytes),
                    100.0 * fullest->sample->hbm_used_bytes / fullest->info.hbm_total_bytes);
  }
  if (unreadable) line += fmt::format("   {} device(s) not answering", unreadable);
  size_t notes = Notes(snap).size();
  if (notes) line += fmt::format("   [{} to look at]", notes);
  return line + "\n";
}

void LiveView::Show(const Snapshot& snap, int frame) {
  if (!first_) first_ = snap;
  last_ = snap;
  ++frames_;
  if (options_.json) {
    nlohmann::json j = SnapshotToJson(snap);
    j["frame"] = frame;
    std::fprintf(out_, "%s\n", j.dump().c_str());
    std::fflush(out_);
    return;
  }
  TableStyle style{.color = options_.color, .notes = true};
  std::string text;
  if (options_.tty) {
    text = kClearScreen + Heading(snap) + RenderTable(snap, style);
    last_printed_ = true;
  } else if (options_.compact && frame > 0) {
    text = ProgressLine(snap);
    last_printed_ = false;
  } else {
    text = (frame > 0 ? "\n" : "") + Heading(snap) + RenderTable(snap, style);
    last_printed_ = true;
  }
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
}

void LiveView::Finish() {
  if (options_.json || !last_) return;
  std::string text;
  if (!last_printed_)
    text += "\n" + Heading(*last_) + RenderTable(*last_, {.color = options_.color, .notes = true});
  if (frames_ > 1) {
    std::vector<std::string> changes = Changes();
    text += fmt::format("\nWhat changed in {:.1f} s:\n", ToSeconds(last_->time - first_->time));
    if (changes.empty()) text += "  nothing beyond the usual wobble of busy devices\n";
    for (const std::string& c : changes) text += "  " + c + "\n";
  }
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
}

std::vector<std::string> LiveView::Changes() const {
  if (!first_ || !last_) return {};
  return DescribeChanges(*first_, *last_);
}

}  // namespace anxin::device
