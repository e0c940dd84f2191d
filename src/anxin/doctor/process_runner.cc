#include "anxin/doctor/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "anxin/host/text.h"

namespace anxin::doctor {

namespace {
constexpr size_t kMaxCapture = 16u << 20;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}
}  // namespace

std::string FindExecutable(const std::string& name, const std::vector<std::string>& extra_dirs) {
  auto ok = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return ok(name) ? name : "";
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    for (std::string_view d : host::Split(path, ':')) {
      if (!d.empty()) dirs.emplace_back(d);
    }
  }
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const std::string& d : dirs) {
    std::string p = d + "/" + name;
    if (ok(p)) return p;
  }
  return "";
}

Result<ProcessOutput> RunProcess(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) return InvalidArgument("RunProcess: empty argv");
  std::string exe = FindExecutable(argv[0]);
  if (exe.empty()) return NotFound(argv[0] + " is not installed (not found on PATH)");
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return std::unexpected(ErrnoError(errno, "pipe"));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return std::unexpected(ErrnoError(errno, "pipe"));
  }
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return std::unexpected(ErrnoError(errno, "pipe"));
  }
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1]})
      ::close(fd);
    return std::unexpected(ErrnoError(e, "fork"));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execv(exe.c_str(), cargv.data());
    int e = errno;
    ssize_t ignored = ::write(exec_pipe[1], &e, sizeof(e));
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t n = ::read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  ::close(exec_pipe[0]);
  int fds[2] = {out_pipe[0], err_pipe[0]};
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    CloseFd(fds[0]);
    CloseFd(fds[1]);
    ::waitpid(pid, nullptr, 0);
    return std::unexpected(ErrnoError(exec_errno, "exec " + exe));
  }
  ProcessOutput result;
  std::string* bufs[2] = {&result.out, &result.err};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p[2];
    nfds_t np = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) {
        p[np] = {fds[i], POLLIN, 0};
        which[np++] = i;
      }
    }
    int r = ::poll(p, np, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) break;
    for (nfds_t k = 0; k < np && r > 0; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      ssize_t got = ::read(p[k].fd, buf, sizeof(buf));
      int i = which[k];
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        CloseFd(fds[i]);
      } else if (bufs[i]->size() < kMaxCapture) {
        bufs[i]->append(buf, static_cast<size_t>(got));
      }
    }
  }
  CloseFd(fds[0]);
  CloseFd(fds[1]);
  int status = 0;
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return DeadlineExceeded(argv[0] + " did not finish within " + std::to_string(timeout_s) + " s");
  }
  // Both pipes closed; the child may still be exiting. Wait, bounded by the deadline.
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return std::unexpected(ErrnoError(errno, "waitpid"));
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return DeadlineExceeded(argv[0] + " did not exit within " + std::to_string(timeout_s) + " s");
    }
    ::usleep(2000);
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace anxin::doctor
