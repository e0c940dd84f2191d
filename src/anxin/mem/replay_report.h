// Text and JSON renderings of replays and plans for `anxin mem`.
//
//   ANXIN_ASSIGN_OR_RETURN(Trace trace, ReadTrace("snap.pickle"));
//   ANXIN_ASSIGN_OR_RETURN(ReplayResult result, Replay(trace, ReplayOptions{}));
//   fmt::print("{}", ReplayText(result));
//   nlohmann::json j = ReplayJson(result);
#ifndef ANXIN_MEM_REPLAY_REPORT_H_
#define ANXIN_MEM_REPLAY_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "anxin/base/error.h"
#include "anxin/mem/plan.h"
#include "anxin/mem/replay.h"

namespace anxin::mem {

std::string ReplayText(const ReplayResult& r);
nlohmann::json ReplayJson(const ReplayResult& r);
std::string PlanText(const Plan& p);
nlohmann::json PlanJson(const Plan& p);
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_REPLAY_REPORT_H_
