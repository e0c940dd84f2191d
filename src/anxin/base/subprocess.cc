#include "anxin/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "anxin/base/strings.h"

extern char** environ;

namespace anxin {
namespace {

using SteadyClock = std::chrono::steady_clock;

// What failed in the child between fork and exec; sent to the parent over a
// close-on-exec pipe, which reads EOF when exec succeeds.
enum ChildStage : int { kStageChdir = 1, kStageExec = 2, kStageSetup = 3 };

struct ChildReport {
  int stage = 0;
  int error = 0;
};

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The executable for argv0: itself when it has a '/', else the first
// executable regular file of that name along PATH.
Result<std::string> ResolveExecutable(const std::string& argv0, const std::string& path_env) {
  if (argv0.empty()) return InvalidArgument("cannot start a program with an empty name");
  if (argv0.find('/') != std::string::npos) {
    if (::access(argv0.c_str(), X_OK) != 0) {
      return std::unexpected(ErrnoError(errno, "start '" + argv0 + "'"));
    }
    return argv0;
  }
  std::string_view rest = path_env;
  while (true) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + argv0;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return NotFound("start '" + argv0 + "': no executable named '" + argv0 + "' in PATH (" +
                  path_env + "): install it or give its full path");
}

// Chooses a poll timeout that wakes at `when`, rounded up so that it never
// spins with 0 ms waits just before a deadline.
int MillisUntil(SteadyClock::time_point now, SteadyClock::time_point when) {
  if (when <= now) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(when - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

std::string ExitStatus::Describe() const {
  std::string how;
  if (signal != 0) {
    how = "killed by " + SignalName(signal);
    if (core_dumped) how += " (core dumped)";
  } else {
    how = "exited " + std::to_string(exit_code);
  }
  if (timed_out) return "timed out (" + how + ")";
  return how;
}

std::string CommandOutput::Describe() const {
  ExitStatus st;
  st.exit_code = exit_code;
  st.signal = signal;
  st.timed_out = timed_out;
  return st.Describe();
}

std::string CommandOutput::OneLineMessage() const {
  std::string text(Trim(stderr_text.empty() ? stdout_text : stderr_text));
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

struct Subprocess::Impl {
  SubprocessOptions options;
  std::string name;  // argv[0], for messages
  std::string exe;
  std::vector<std::string> env_strings;
  std::vector<char*> argv_ptrs;
  std::vector<char*> env_ptrs;
  pid_t parent_pid = -1;

  int devnull = -1;
  std::array<int, 2> out{-1, -1};
  std::array<int, 2> err{-1, -1};
  std::array<int, 2> wake{-1, -1};
  std::array<int, 2> report{-1, -1};
  int pidfd = -1;

  std::thread thread;

  mutable std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  bool started = false;
  std::optional<Error> start_error;
  pid_t pid = -1;
  bool reaped = false;
  bool finished = false;
  ExitStatus status;
  bool stop_requested = false;
  std::chrono::nanoseconds stop_grace{0};

  ~Impl() {
    CloseFd(devnull);
    for (auto* p : {&out, &err, &wake, &report}) {
      CloseFd((*p)[0]);
      CloseFd((*p)[1]);
    }
    CloseFd(pidfd);
  }

  // Runs in the child between fork and exec: async-signal-safe calls only,
  // on data prepared before the fork.
  [[noreturn]] void ChildMain() {
    auto fail = [this](int stage) {
      ChildReport r{stage, errno};
      ssize_t ignored = ::write(report[1], &r, sizeof(r));
      (void)ignored;
      _exit(127);
    };
    if (::setpgid(0, 0) != 0) fail(kStageSetup);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(kStageSetup);
    // The parent may have died before prctl took effect.
    if (::getppid() != parent_pid) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
    }
    if (::dup2(devnull, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) {
      fail(kStageSetup);
    }
    // Nothing else of the parent's leaks into the program.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) fail(kStageChdir);
    ::execve(exe.c_str(), argv_ptrs.data(), env_ptrs.data());
    fail(kStageExec);
    _exit(127);
  }

  // The I/O thread: forks, then serves the pipes, timers and the exit.
  void Run() {
    pid_t child = ::fork();
    if (child == 0) ChildMain();
    if (child < 0) {
      std::lock_guard lock(mu);
      start_error = ErrnoError(errno, "start '" + name + "': fork");
      started = true;
      finished = true;
      cv.notify_all();
      return;
    }
    ::setpgid(child, child);  // also done by the child; whichever runs first
    CloseFd(out[1]);
    CloseFd(err[1]);
    CloseFd(report[1]);
    CloseFd(devnull);
    ChildReport r;
    ssize_t n;
    do {
      n = ::read(report[0], &r, sizeof(r));
    } while (n < 0 && errno == EINTR);
    CloseFd(report[0]);
    if (n == static_cast<ssize_t>(sizeof(r))) {
      int ignored_status;
      ::waitpid(child, &ignored_status, 0);
      std::string what = "start '" + name + "'";
      if (r.stage == kStageChdir) what += ": change directory to " + options.cwd;
      if (r.stage == kStageExec) what += ": exec " + exe;
      if (r.stage == kStageSetup) what += ": set up the child";
      std::lock_guard lock(mu);
      start_error = ErrnoError(r.error, what);
      started = true;
      finished = true;
      cv.notify_all();
      return;
    }
    // -1 on kernels before 5.3: then waitid is polled instead. (glibc's
    // pidfd_open wrapper is not declared for C++ in Debian 12.)
    pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
    {
      std::lock_guard lock(mu);
      pid = child;
      started = true;
    }
    cv.notify_all();
    Serve(child);
  }

  struct StreamState {
    int* fd;
    OutputLine::Stream which;
    const std::function<void(const OutputLine&)>* callback;
    std::string buffer;
    bool open() const { return *fd >= 0; }
  };

  void Deliver(StreamState& s, std::string text, bool newline) {
    if (!*s.callback) return;
    OutputLine line;
    line.stream = s.which;
    line.text = std::move(text);
    line.time = std::chrono::system_clock::now();
    line.newline = newline;
    (*s.callback)(line);
  }

  void SplitLines(StreamState& s) {
    size_t start = 0;
    while (true) {
      size_t nl = s.buffer.find('\n', start);
      if (nl == std::string::npos) break;
      Deliver(s, s.buffer.substr(start, nl - start), true);
      start = nl + 1;
    }
    s.buffer.erase(0, start);
    size_t max = std::max<size_t>(options.max_line_bytes, 1);
    // Only cut when more than max bytes wait without a newline, so that where
    // the pieces fall does not depend on how the reads were split.
    while (s.buffer.size() > max) {
      Deliver(s, s.buffer.substr(0, max), false);
      s.buffer.erase(0, max);
    }
  }

  void CloseStream(StreamState& s) {
    if (!s.buffer.empty()) Deliver(s, std::exchange(s.buffer, std::string()), false);
    CloseFd(*s.fd);
  }

  // Reads what is available now; closes the stream at EOF.
  void ReadStream(StreamState& s) {
    char buf[65536];
    while (s.open()) {
      ssize_t n = ::read(*s.fd, buf, sizeof(buf));
      if (n > 0) {
        s.buffer.append(buf, static_cast<size_t>(n));
        SplitLines(s);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      CloseStream(s);  // EOF or a read error: nothing more will come
    }
  }

  // The I/O thread's state while it serves one child.
  struct Serving {
    enum class Phase { kRunning, kTerminating, kKilled };
    Serving(pid_t pid, int* out_fd, const std::function<void(const OutputLine&)>* on_out,
            int* err_fd, const std::function<void(const OutputLine&)>* on_err)
        : child(pid),
          streams{{out_fd, OutputLine::Stream::kStdout, on_out, {}},
                  {err_fd, OutputLine::Stream::kStderr, on_err, {}}} {}
    pid_t child;
    StreamState streams[2];
    Phase phase = Phase::kRunning;
    std::optional<SteadyClock::time_point> timeout_at;
    SteadyClock::time_point kill_at{};
    SteadyClock::time_point linger_until{};
    bool leader_exited = false;
    bool timed_out = false;
    bool is_reaped = false;
    bool any_open() const { return streams[0].open() || streams[1].open(); }
  };

  // Forwards the child's output line by line, enforces the timeout and stop
  // requests (TERM, the grace period, KILL to the whole process group), and
  // reaps the child once its group is gone and its output read.
  void Serve(pid_t child) {
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    Serving sv(child, &out[0], &options.on_stdout, &err[0], &options.on_stderr);
    if (options.timeout) sv.timeout_at = SteadyClock::now() + *options.timeout;
    while (true) {
      const SteadyClock::time_point now = SteadyClock::now();
      AdvanceStop(sv, now);
      if (ReapWhenGone(sv)) break;
      WaitAndRead(sv, now);
    }
    std::lock_guard lock(mu);
    finished = true;
    cv.notify_all();
  }

  void KillGroup(const Serving& sv, int sig) {
    if (!sv.is_reaped) ::kill(-sv.child, sig);
  }

  void BeginStop(Serving& sv, std::chrono::nanoseconds grace) {
    if (grace <= std::chrono::nanoseconds::zero()) {
      KillGroup(sv, SIGKILL);
      sv.phase = Serving::Phase::kKilled;
      return;
    }
    KillGroup(sv, SIGTERM);
    KillGroup(sv, SIGCONT);  // a stopped process acts on TERM only once continued
    sv.phase = Serving::Phase::kTerminating;
    sv.kill_at = SteadyClock::now() + grace;
  }

  // Stop requests, the timeout and the end of the grace period.
  void AdvanceStop(Serving& sv, SteadyClock::time_point now) {
    bool stop_now = false;
    std::chrono::nanoseconds grace{0};
    {
      std::lock_guard lock(mu);
      if (stop_requested && sv.phase == Serving::Phase::kRunning) {
        stop_now = true;
        grace = stop_grace;
      } else if (stop_requested && sv.phase == Serving::Phase::kTerminating &&
                 stop_grace <= std::chrono::nanoseconds::zero()) {
        stop_now = true;  // the destructor wants it gone now
      }
    }
    if (stop_now) BeginStop(sv, grace);
    if (sv.phase == Serving::Phase::kRunning && sv.timeout_at && now >= *sv.timeout_at) {
      sv.timed_out = true;
      BeginStop(sv, options.stop_grace);
    }
    if (sv.phase == Serving::Phase::kTerminating && now >= sv.kill_at) {
      KillGroup(sv, SIGKILL);
      sv.phase = Serving::Phase::kKilled;
    }
  }

  void Reap(Serving& sv) {
    siginfo_t info{};
    std::lock_guard lock(mu);
    while (::waitid(P_PID, static_cast<id_t>(sv.child), &info, WEXITED) != 0 && errno == EINTR) {
    }
    if (info.si_code == CLD_EXITED) {
      status.exit_code = info.si_status;
    } else {
      status.signal = info.si_status;
      status.core_dumped = info.si_code == CLD_DUMPED;
    }
    status.timed_out = sv.timed_out;
    reaped = true;
    sv.is_reaped = true;
  }

  // Reaps the child once its group is gone; true when serving is over (the
  // child reaped and its output read, or the linger time spent).
  bool ReapWhenGone(Serving& sv) {
    if (sv.leader_exited && !sv.is_reaped) {
      // While stopping, the rest of the group gets its grace period; its
      // closing the pipes is the sign that it is gone.
      const bool group_may_linger = sv.phase == Serving::Phase::kTerminating && sv.any_open();
      if (!group_may_linger) {
        if (options.kill_stragglers || sv.phase != Serving::Phase::kRunning) {
          KillGroup(sv, SIGKILL);
        }
        Reap(sv);
        sv.linger_until = SteadyClock::now() + options.output_linger;
      }
    }
    if (sv.is_reaped && !sv.any_open()) return true;
    if (sv.is_reaped && SteadyClock::now() >= sv.linger_until) {
      for (auto& st : sv.streams) {
        if (st.open()) ReadStream(st);
        if (st.open()) CloseStream(st);
      }
      return true;
    }
    return false;
  }

  // Waits for output, the child's exit, a wake-up or the next timer, and
  // handles what came.
  void WaitAndRead(Serving& sv, SteadyClock::time_point now) {
    std::array<pollfd, 4> fds{};
    size_t nfds = 0;
    fds[nfds++] = {wake[0], POLLIN, 0};
    int stream_slot[2] = {-1, -1};
    for (int i = 0; i < 2; ++i) {
      if (sv.streams[i].open()) {
        stream_slot[i] = static_cast<int>(nfds);
        fds[nfds++] = {*sv.streams[i].fd, POLLIN, 0};
      }
    }
    int pid_slot = -1;
    if (!sv.leader_exited && pidfd >= 0) {
      pid_slot = static_cast<int>(nfds);
      fds[nfds++] = {pidfd, POLLIN, 0};
    }
    int wait_ms = -1;
    auto wake_at = [&](SteadyClock::time_point t) {
      int ms = MillisUntil(now, t);
      wait_ms = wait_ms < 0 ? ms : std::min(wait_ms, ms);
    };
    if (sv.phase == Serving::Phase::kRunning && sv.timeout_at) wake_at(*sv.timeout_at);
    if (sv.phase == Serving::Phase::kTerminating) wake_at(sv.kill_at);
    if (sv.is_reaped) wake_at(sv.linger_until);
    if (!sv.leader_exited && pidfd < 0) wake_at(now + std::chrono::milliseconds(20));
    int rc = ::poll(fds.data(), nfds, wait_ms);
    if (rc < 0 && errno != EINTR) {
      // Not expected; avoid spinning and let the timers make progress.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      char drain[64];
      while (::read(wake[0], drain, sizeof(drain)) > 0) {
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (stream_slot[i] >= 0 && fds[static_cast<size_t>(stream_slot[i])].revents != 0) {
        ReadStream(sv.streams[i]);
      }
    }
    const bool check_exit =
        !sv.leader_exited &&
        (pidfd < 0 || (pid_slot >= 0 && fds[static_cast<size_t>(pid_slot)].revents != 0));
    if (check_exit) {
      // WNOWAIT: the zombie keeps the pid and group id reserved until the
      // rest of the group has been dealt with.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(sv.child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == sv.child) {
        sv.leader_exited = true;
      }
    }
  }
};

Subprocess::Subprocess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Subprocess>> Subprocess::Start(SubprocessOptions options) {
  if (options.argv.empty()) return InvalidArgument("cannot start a program: empty argv");
  auto impl = std::make_unique<Impl>();
  impl->name = options.argv[0];

  // The environment: inherited (unless cleared), then the overrides.
  if (!options.clear_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) impl->env_strings.push_back(*e);
  }
  for (const std::string& kv : options.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("environment entry '" + kv + "' is not NAME=VALUE");
    }
    std::string prefix = kv.substr(0, eq + 1);
    std::erase_if(impl->env_strings, [&](const std::string& s) { return s.starts_with(prefix); });
    impl->env_strings.push_back(kv);
  }
  std::string path_env = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& s : impl->env_strings) {
    if (s.starts_with("PATH=")) path_env = s.substr(5);
  }
  ANXIN_ASSIGN_OR_RETURN(impl->exe, ResolveExecutable(options.argv[0], path_env));
  impl->options = std::move(options);
  for (std::string& a : impl->options.argv) impl->argv_ptrs.push_back(a.data());
  impl->argv_ptrs.push_back(nullptr);
  for (std::string& e : impl->env_strings) impl->env_ptrs.push_back(e.data());
  impl->env_ptrs.push_back(nullptr);
  impl->parent_pid = ::getpid();

  const std::string& in = impl->options.stdin_path;
  impl->devnull = ::open(in.empty() ? "/dev/null" : in.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->devnull < 0) {
    return std::unexpected(
        ErrnoError(errno, "open " + (in.empty() ? std::string("/dev/null") : in)));
  }
  for (auto* p : {&impl->out, &impl->err, &impl->report}) {
    if (::pipe2(p->data(), O_CLOEXEC) != 0) return std::unexpected(ErrnoError(errno, "pipe"));
  }
  if (::pipe2(impl->wake.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
    return std::unexpected(ErrnoError(errno, "pipe"));
  }

  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  std::unique_lock lock(impl->mu);
  impl->cv.wait(lock, [raw] { return raw->started; });
  if (impl->start_error) {
    Error e = *impl->start_error;
    lock.unlock();
    impl->thread.join();
    return std::unexpected(std::move(e));
  }
  pid_t pid = impl->pid;
  lock.unlock();
  std::unique_ptr<Subprocess> sp(new Subprocess(std::move(impl)));
  sp->pid_ = pid;
  return sp;
}

Subprocess::~Subprocess() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->finished) {
      impl_->stop_requested = true;
      impl_->stop_grace = std::chrono::nanoseconds::zero();
    }
  }
  ssize_t ignored = ::write(impl_->wake[1], "x", 1);
  (void)ignored;
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<ExitStatus> Subprocess::Wait(std::optional<SteadyClock::time_point> deadline) {
  std::unique_lock lock(impl_->mu);
  auto done = [this] { return impl_->finished; };
  if (deadline) {
    if (!impl_->cv.wait_until(lock, *deadline, done)) {
      return DeadlineExceeded("'" + impl_->name + "' (pid " + std::to_string(pid_) +
                              ") is still running");
    }
  } else {
    impl_->cv.wait(lock, done);
  }
  return impl_->status;
}

Result<ExitStatus> Subprocess::Stop(std::chrono::nanoseconds grace) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->finished) return impl_->status;
    if (!impl_->stop_requested) {
      impl_->stop_requested = true;
      impl_->stop_grace = grace;
    }
  }
  ssize_t ignored = ::write(impl_->wake[1], "x", 1);
  (void)ignored;
  return Wait();
}

Status Subprocess::Signal(int sig) {
  std::lock_guard lock(impl_->mu);
  if (impl_->reaped) {
    return FailedPrecondition("'" + impl_->name + "' (pid " + std::to_string(pid_) +
                              ") has already exited");
  }
  if (::kill(-pid_, sig) != 0) {
    return std::unexpected(ErrnoError(errno, "signal process group " + std::to_string(pid_)));
  }
  return Ok();
}

bool Subprocess::Running() const {
  std::lock_guard lock(impl_->mu);
  return !impl_->finished;
}

Status BecomeSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return std::unexpected(ErrnoError(errno, "prctl(PR_SET_CHILD_SUBREAPER)"));
  }
  return Ok();
}

Result<CommandOutput> RunCommand(std::vector<std::string> argv, RunOptions options) {
  // Filled on the I/O thread; read after Wait, which synchronises with it.
  struct Capture {
    std::string text;
    size_t dropped = 0;
  };
  auto out = std::make_shared<Capture>();
  auto err = std::make_shared<Capture>();
  size_t cap = options.max_output_bytes;
  auto append = [cap](Capture& c, const OutputLine& line) {
    size_t need = line.text.size() + (line.newline ? 1 : 0);
    if (c.text.size() + need > cap) {
      c.dropped += need;
      return;
    }
    c.text += line.text;
    if (line.newline) c.text += '\n';
  };
  SubprocessOptions so;
  so.argv = std::move(argv);
  so.env = std::move(options.env);
  so.clear_env = options.clear_env;
  so.cwd = std::move(options.cwd);
  so.stdin_path = std::move(options.stdin_path);
  so.timeout = options.timeout;
  so.stop_grace = std::chrono::seconds(1);
  so.on_stdout = [out, append](const OutputLine& l) { append(*out, l); };
  so.on_stderr = [err, append](const OutputLine& l) { append(*err, l); };
  ANXIN_ASSIGN_OR_RETURN(auto child, Subprocess::Start(std::move(so)));
  ANXIN_ASSIGN_OR_RETURN(ExitStatus st, child->Wait());
  CommandOutput result;
  result.exit_code = st.exit_code;
  result.signal = st.signal;
  result.timed_out = st.timed_out;
  for (auto [capture, text] :
       {std::pair{out.get(), &result.stdout_text}, std::pair{err.get(), &result.stderr_text}}) {
    *text = std::move(capture->text);
    if (capture->dropped > 0) {
      *text += "\n[... " + std::to_string(capture->dropped) + " bytes dropped]";
    }
  }
  return result;
}

}  // namespace anxin
