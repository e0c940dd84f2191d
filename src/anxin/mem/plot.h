// A self-contained SVG chart of a replay: live bytes and each policy's
// reserved bytes over the trace (no scripts, no external fonts or styles).
//
//   #include "anxin/base/file.h"
//
//   ANXIN_ASSIGN_OR_RETURN(Trace trace, ReadTrace("snap.pickle"));
//   ANXIN_ASSIGN_OR_RETURN(ReplayResult result, Replay(trace, ReplayOptions{}));
//   ANXIN_TRY(WriteFileAtomic("replay.svg", ReplaySvg(result, "snap.pickle")));
#ifndef ANXIN_MEM_PLOT_H_
#define ANXIN_MEM_PLOT_H_

#include <string>

#include "anxin/mem/replay.h"

namespace anxin::mem {

std::string ReplaySvg(const ReplayResult& result, const std::string& title);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_PLOT_H_
