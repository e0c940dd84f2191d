// Running other programs: always an argument vector (never a shell string),
// in their own process group, with output delivered line by line, timeouts,
// and a stop that reaches every process the program started.
//
// Short tools (ssh, mlnx_qos, npu-smi):
//
//   ANXIN_ASSIGN_OR_RETURN(CommandOutput out,
//                          RunCommand({"mlnx_qos", "-i", "eth0"}, {.timeout = 10s}));
//   if (!out.ok()) return Unavailable("mlnx_qos " + out.Describe() + ": " + out.stderr_text);
//
// Long-running children (training ranks under the supervisor):
//
//   SubprocessOptions opts;
//   opts.argv = {"python3", "train.py", "--rank", "0"};
//   opts.env = {"RANK=0"};
//   opts.on_stdout = [](const OutputLine& l) { spdlog::info("rank0: {}", l.text); };
//   ANXIN_ASSIGN_OR_RETURN(auto child, Subprocess::Start(std::move(opts)));
//   auto st = child->Wait(std::chrono::steady_clock::now() + 1h);   // or:
//   ANXIN_ASSIGN_OR_RETURN(ExitStatus final, child->Stop(5s));    // TERM, 5 s, KILL
//
// What is guaranteed:
// - The child leads a new process group; Stop(), the timeout and the
//   destructor signal the whole group, so grandchildren (`sh -c 'a & b'`)
//   stop too. When the leader exits by itself, what is left of its group is
//   killed (SubprocessOptions::kill_stragglers) before the leader is reaped,
//   so the group id cannot be reused in between.
// - The child gets SIGKILL if this process dies (PR_SET_PDEATHSIG); it is
//   forked from the Subprocess's own I/O thread, which lives as long as the
//   child, so the signal never fires early because some other thread ended.
//   The kernel sends it to the direct child only: its own children are
//   orphaned then (see BecomeSubreaper for supervisors).
// - Every child is reaped; exit codes and signals are decoded ("exited 3",
//   "killed by SIGKILL").
// - The I/O thread sleeps in poll(2) on the pipes and a pidfd: no busy waiting.
//
// Thread safety: Wait, Stop, Signal, Running and the accessors may be called
// from any thread. The line callbacks run on the Subprocess's I/O thread, one
// at a time, in order per stream; they must not call Wait or Stop on the same
// object (that would wait on themselves).
#ifndef ANXIN_BASE_SUBPROCESS_H_
#define ANXIN_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin {

// How a process ended.
struct ExitStatus {
  int exit_code = -1;  // 0..255 when it exited; -1 when killed by a signal
  int signal = 0;      // the signal that killed it; 0 when it exited
  bool core_dumped = false;
  bool timed_out = false;  // stopped because SubprocessOptions::timeout passed

  bool ok() const { return exit_code == 0; }
  // "exited 0", "exited 3", "killed by SIGKILL", "killed by SIGSEGV (core
  // dumped)", "timed out after 2s, killed by SIGTERM".
  std::string Describe() const;
};

// One line of output. text excludes the '\n'.
struct OutputLine {
  enum class Stream { kStdout, kStderr };
  Stream stream = Stream::kStdout;
  std::string text{};
  // When the line was read (wall clock).
  std::chrono::system_clock::time_point time{};
  // False for the last line when the output did not end with '\n', and for
  // the pieces of a line cut at max_line_bytes (all but its last piece).
  bool newline = true;
};

struct SubprocessOptions {
  // argv[0] is looked up in PATH unless it contains a '/'.
  std::vector<std::string> argv{};
  // "NAME=VALUE" entries added to (or replacing in) the inherited environment.
  std::vector<std::string> env{};
  // Start from an empty environment instead of this process's.
  bool clear_env = false;
  // Working directory of the child; "" = this process's.
  std::string cwd{};
  // A file the child reads as its standard input; "" = /dev/null.
  std::string stdin_path{};
  // Line callbacks (see the thread-safety note above); unset = discard.
  std::function<void(const OutputLine&)> on_stdout{};
  std::function<void(const OutputLine&)> on_stderr{};
  // A longer line is delivered in pieces of this size (newline == false),
  // then the rest with its newline.
  size_t max_line_bytes = 1 << 20;
  // After this, the child is stopped like Stop(stop_grace) and the status says
  // timed_out. Unset = no limit.
  std::optional<std::chrono::nanoseconds> timeout{};
  // Time between SIGTERM and SIGKILL when the timeout stops the child.
  std::chrono::nanoseconds stop_grace = std::chrono::seconds(2);
  // Kill what is left of the process group when the leader exits.
  bool kill_stragglers = true;
  // How long to keep reading after the leader is reaped while some process
  // outside its group still holds the output pipes open.
  std::chrono::nanoseconds output_linger = std::chrono::seconds(1);
};

class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the child. A missing executable -> kNotFound naming it; a bad cwd
  // or another failure before exec -> the errno's code with what failed.
  static Result<std::unique_ptr<Subprocess>> Start(SubprocessOptions options);

  // Kills the group (SIGKILL) if it still runs, reaps, and joins the I/O thread.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // The process group id (== pid()).
  pid_t pgid() const { return pid_; }

  // Blocks until the child is reaped and its output delivered, or until the
  // deadline (-> kDeadlineExceeded; the child keeps running).
  Result<ExitStatus> Wait(std::optional<Clock::time_point> deadline = std::nullopt);
  // SIGTERM to the group, up to `grace` for it to exit, then SIGKILL to the
  // group; returns how the leader ended. Returns at once if already done.
  Result<ExitStatus> Stop(std::chrono::nanoseconds grace = std::chrono::seconds(5));
  // Sends sig to the whole group, unless the child has already been reaped.
  Status Signal(int sig);
  // True until the child has been reaped and its output delivered.
  bool Running() const;

 private:
  struct Impl;
  explicit Subprocess(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  pid_t pid_ = -1;
};

// The result of RunCommand.
struct CommandOutput {
  int exit_code = -1;  // as in ExitStatus
  int signal = 0;
  bool timed_out = false;
  std::string stdout_text{};
  std::string stderr_text{};

  bool ok() const { return exit_code == 0; }
  std::string Describe() const;
  // What the command said, for one error line: its standard error, or its
  // standard output when that is empty, trimmed (base/strings.h Trim) and
  // with newlines as spaces.
  std::string OneLineMessage() const;
};

struct RunOptions {
  std::optional<std::chrono::nanoseconds> timeout{};  // then TERM, 1 s, KILL
  std::vector<std::string> env{};                     // "NAME=VALUE" additions
  bool clear_env = false;  // start from an empty environment, then add env
  std::string cwd{};
  std::string stdin_path{};  // the child's standard input; "" = /dev/null
  // Output beyond this many bytes per stream is dropped (the child keeps
  // running; the text ends with "\n[... N bytes dropped]").
  size_t max_output_bytes = 64 << 20;
};

// Runs argv to completion and returns its output. A failure to start is an
// error; a non-zero exit or a timeout is not (see CommandOutput).
Result<CommandOutput> RunCommand(std::vector<std::string> argv, RunOptions options = {});

// "SIGKILL" for 9; "signal 77" for numbers without a name.
std::string SignalName(int sig);

// Makes this process the reaper of its orphaned descendants
// (PR_SET_CHILD_SUBREAPER): when a child's own children outlive it, they are
// re-parented here instead of to init, so a supervisor can still signal and
// reap them (waitpid(-pgid, ...) for a stopped group). Process-wide and
// inherited by nothing; call once at start-up.
Status BecomeSubreaper();

}  // namespace anxin

#endif  // ANXIN_BASE_SUBPROCESS_H_
