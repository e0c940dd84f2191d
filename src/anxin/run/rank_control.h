// The supervisor's end of the rank control channel (docs/sdk.md, "In-process
// restart"): an abstract Unix stream socket that the ranks and warm spares
// of `anxin run` connect to from anxin_sdk.run(). Each process is told the
// address (ANXIN_CONTROL_SOCKET) and its token (ANXIN_CONTROL_TOKEN); it says
// {"hello": {"token": T, "pid": P}} and, for a spare, {"spare_ready": {...}}.
// The supervisor sends {"abort": {"generation": G}}, the rank answers
// {"aborted": {"generation": G}} once its process group is gone, and
// {"rejoin": {"generation", "env", "checkpoint", "step"}} starts the next
// generation in the same process. One JSON object per line, both ways. A
// connection that closes means its process is going; the supervisor dying
// closes every connection, which ends the ranks (the SDK exits).
//
//   ANXIN_ASSIGN_OR_RETURN(auto control, RankControl::Start());
//   std::vector<std::string> env;  // the rank's, when it is started
//   env.push_back("ANXIN_CONTROL_SOCKET=" + control->address());
//   env.push_back("ANXIN_CONTROL_TOKEN=rank-0-3");
//   // ... the rank runs and connects ...
//   if (control->Connected("rank-0-3")) {
//     ANXIN_TRY(control->Send("rank-0-3", {{"abort", {{"generation", 4}}}}));
//     const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
//     std::set<std::string> answered = control->WaitAborted(
//         {"rank-0-3"}, 4, deadline, [](const std::string&) { return false; });
//   }
//
// Thread safety: every method may be called from any thread.
#ifndef ANXIN_RUN_RANK_CONTROL_H_
#define ANXIN_RUN_RANK_CONTROL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::run {

class RankControl {
 public:
  // Listens on a fresh abstract address ("@anxin-run-PID-N").
  static Result<std::unique_ptr<RankControl>> Start();
  ~RankControl();
  RankControl(const RankControl&) = delete;
  RankControl& operator=(const RankControl&) = delete;

  // What ANXIN_CONTROL_SOCKET holds: '@' then the abstract name.
  const std::string& address() const;

  // The process of `token` said hello and its connection is open.
  bool Connected(const std::string& token) const;
  // A warm spare of `token` is waiting in anxin_sdk.run for its rank.
  bool SpareReady(const std::string& token) const;
  // Called (from the control thread) whenever a spare becomes ready.
  void OnSpareReady(std::function<void()> callback);

  // Sends msg as one line. kUnavailable when the token has no open
  // connection or the write fails.
  Status Send(const std::string& token, const nlohmann::json& msg);

  // Waits until every token in `tokens` answered "aborted" for `generation`,
  // or is gone (gone(token) true: its process exited), or `deadline`.
  // Returns the tokens that answered.
  std::set<std::string> WaitAborted(const std::vector<std::string>& tokens, int generation,
                                    std::chrono::steady_clock::time_point deadline,
                                    const std::function<bool(const std::string&)>& gone);

  // Closes the connection of `token` and forgets it (its process is gone
  // or was killed).
  void Forget(const std::string& token);

 private:
  RankControl() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anxin::run

#endif  // ANXIN_RUN_RANK_CONTROL_H_
