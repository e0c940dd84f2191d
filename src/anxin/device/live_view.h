// A live view of a node's devices for a terminal or a log: what
// `anxin devices --watch` and `anxin demo` print frame by frame.
//
//   #include "anxin/base/stop_token.h"
//   #include "anxin/device/registry.h"
//   #include "anxin/device/watch.h"
//
//   ANXIN_ASSIGN_OR_RETURN(auto backend, CreateBackend("sim", {.scenario = "demo"}));
//   LiveView view(stdout, {.tty = false, .color = false});
//   StopOnSignals signals;                      // base/stop_token.h: Ctrl-C ends it
//   ANXIN_TRY(Watch(*backend, RealClock(), {.interval_seconds = 1, .count = 5}, signals.token(),
//                   [&](const Snapshot& s, int frame) { view.Show(s, frame); }));
//   view.Finish();   // the last table (in a log) and what changed
//
// On a terminal each frame redraws the screen (ANSI clear) with the table.
// In a log, frames are printed one after another; with `compact` only the
// first and last tables are printed and the frames between become one line
// each (the hottest device and the fullest HBM), so a log stays readable.
// JSON mode prints one JSON document per frame, one per line.
//
// Thread safety: none; use from one thread.
#ifndef ANXIN_DEVICE_LIVE_VIEW_H_
#define ANXIN_DEVICE_LIVE_VIEW_H_

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "anxin/device/table.h"

namespace anxin::device {

struct LiveViewOptions {
  bool tty = false;    // redraw in place
  bool color = false;  // ANSI colours
  bool json = false;   // JSON lines instead of tables
  bool compact = false;
  std::string heading{};     // a line above the table, e.g. "anxin demo"
  double total_seconds = 0;  // for "t=2.5 s of 6 s"; 0 = open-ended
};

class LiveView {
 public:
  LiveView(std::FILE* out, LiveViewOptions options);

  void Show(const Snapshot& snap, int frame);
  // Prints what is still owed (the last table of a compact log) and the
  // changes between the first and last frames, unless in JSON mode.
  void Finish();

  // What changed between the first and last frames (DescribeChanges).
  std::vector<std::string> Changes() const;
  int frames() const { return frames_; }

 private:
  std::string Heading(const Snapshot& snap) const;
  std::string ProgressLine(const Snapshot& snap) const;

  std::FILE* out_;
  LiveViewOptions options_;
  std::optional<Snapshot> first_;
  std::optional<Snapshot> last_;
  int frames_ = 0;
  bool last_printed_ = false;
};

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_LIVE_VIEW_H_
