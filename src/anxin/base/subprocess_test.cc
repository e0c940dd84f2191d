#include "anxin/base/subprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Collects lines from the I/O thread and lets the test wait for one.
class LineSink {
 public:
  std::function<void(const OutputLine&)> Callback() {
    return [this](const OutputLine& l) {
      std::lock_guard lock(mu_);
      lines_.push_back(l);
      cv_.notify_all();
    };
  }
  bool WaitFor(const std::string& text, std::chrono::seconds limit = 20s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] {
      for (const auto& l : lines_) {
        if (l.text == text) return true;
      }
      return false;
    });
  }
  std::vector<OutputLine> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  std::vector<std::string> Texts() {
    std::vector<std::string> out;
    for (const auto& l : Lines()) out.push_back(l.text);
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<OutputLine> lines_;
};

// Orphaned grandchildren come to this process (not to a container's init,
// which may never reap them), so their exit can be observed.
class SubprocessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_THAT(BecomeSubreaper(), IsOk()); }

  // True once no process of the group is left (reaping the ones adopted).
  static bool GroupGone(pid_t pgid, std::chrono::seconds limit = 20s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      while (waitpid(-pgid, nullptr, WNOHANG) > 0) {
      }
      if (kill(-pgid, 0) != 0 && errno == ESRCH) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
};

TEST_F(SubprocessTest, ExitCodes) {
  auto ok = RunCommand({"true"});
  ASSERT_THAT(ok, IsOk());
  EXPECT_TRUE(ok->ok());
  EXPECT_EQ(ok->Describe(), "exited 0");
  auto three = RunCommand({"sh", "-c", "exit 3"});
  ASSERT_THAT(three, IsOk());
  EXPECT_EQ(three->exit_code, 3);
  EXPECT_EQ(three->signal, 0);
  EXPECT_FALSE(three->ok());
  EXPECT_EQ(three->Describe(), "exited 3");
}

TEST_F(SubprocessTest, Signals) {
  auto killed = RunCommand({"sh", "-c", "kill -KILL $$"});
  ASSERT_THAT(killed, IsOk());
  EXPECT_EQ(killed->exit_code, -1);
  EXPECT_EQ(killed->signal, SIGKILL);
  EXPECT_EQ(killed->Describe(), "killed by SIGKILL");
  auto segv = RunCommand({"sh", "-c", "kill -SEGV $$"});
  ASSERT_THAT(segv, IsOk());
  EXPECT_EQ(segv->signal, SIGSEGV);
  EXPECT_THAT(segv->Describe(), HasSubstr("killed by SIGSEGV"));
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
}

TEST_F(SubprocessTest, CapturesStdoutAndStderrSeparately) {
  auto r = RunCommand({"sh", "-c", "echo out1; echo err1 >&2; echo out2; printf tail"});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->stdout_text, "out1\nout2\ntail");
  EXPECT_EQ(r->stderr_text, "err1\n");
}

TEST_F(SubprocessTest, OneLineMessagePrefersStderrAndJoinsItsLines) {
  auto both =
      RunCommand({"sh", "-c", "echo ignored; printf 'no such card\\ntry -l\\n \\n' >&2; exit 2"});
  ASSERT_THAT(both, IsOk());
  EXPECT_EQ(both->OneLineMessage(), "no such card try -l");
  auto out_only = RunCommand({"sh", "-c", "printf 'Error 8255\\nbusy\\n'; exit 1"});
  ASSERT_THAT(out_only, IsOk());
  EXPECT_EQ(out_only->OneLineMessage(), "Error 8255 busy");
  auto silent = RunCommand({"false"});
  ASSERT_THAT(silent, IsOk());
  EXPECT_EQ(silent->OneLineMessage(), "");
}

TEST_F(SubprocessTest, StdinFromAFileOrNothing) {
  ::anxin::testing::TempDir dir;
  std::string in = dir.Write("in.txt", "line one\nline two\n");
  auto r = RunCommand({"cat"}, {.stdin_path = in});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->stdout_text, "line one\nline two\n");
  auto empty = RunCommand({"cat"});
  ASSERT_THAT(empty, IsOk());
  EXPECT_EQ(empty->stdout_text, "");
  EXPECT_THAT(RunCommand({"cat"}, {.stdin_path = dir / "missing.txt"}),
              HasCode(ErrorCode::kNotFound, HasSubstr("missing.txt")));
}

TEST_F(SubprocessTest, LinesWithTimestampsAndAFinalLineWithoutNewline) {
  LineSink out, err;
  SubprocessOptions o;
  o.argv = {"printf", "a\nb\n\nlast"};
  o.on_stdout = out.Callback();
  o.on_stderr = err.Callback();
  auto before = std::chrono::system_clock::now();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  ASSERT_THAT((*child)->Wait(), IsOk());
  auto lines = out.Lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(out.Texts(), ElementsAre("a", "b", "", "last"));
  EXPECT_TRUE(lines[0].newline);
  EXPECT_FALSE(lines[3].newline);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].stream, OutputLine::Stream::kStdout);
    EXPECT_GE(lines[i].time, before);
    if (i > 0) {
      EXPECT_GE(lines[i].time, lines[i - 1].time);
    }
  }
  EXPECT_TRUE(err.Lines().empty());
}

TEST_F(SubprocessTest, LongLinesWholeOrInPieces) {
  // 300000 'x' then a newline, then "end".
  std::vector<std::string> argv = {"sh", "-c",
                                   "head -c 300000 /dev/zero | tr '\\0' x; echo; echo end"};
  auto r = RunCommand(argv);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->stdout_text, std::string(300000, 'x') + "\nend\n");

  LineSink out;
  SubprocessOptions o;
  o.argv = argv;
  o.max_line_bytes = 100000;
  o.on_stdout = out.Callback();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  ASSERT_THAT((*child)->Wait(), IsOk());
  auto lines = out.Lines();
  // Pieces of exactly max_line_bytes; the last piece carries the newline.
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i].text, std::string(100000, 'x'));
    EXPECT_EQ(lines[i].newline, i == 2);
  }
  EXPECT_EQ(lines[3].text, "end");
}

TEST_F(SubprocessTest, ManyLinesInOrder) {
  LineSink out;
  SubprocessOptions o;
  o.argv = {"seq", "1", "20000"};
  o.on_stdout = out.Callback();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  ASSERT_THAT((*child)->Wait(), IsOk());
  auto texts = out.Texts();
  ASSERT_EQ(texts.size(), 20000u);
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(texts[i], std::to_string(i + 1));
}

TEST_F(SubprocessTest, EnvironmentAndWorkingDirectory) {
  auto r = RunCommand({"sh", "-c", "echo \"$ANXIN_T\"; pwd"},
                      {.env = {"ANXIN_T=hello world"}, .cwd = "/"});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->stdout_text, "hello world\n/\n");

  SubprocessOptions o;
  o.argv = {"/usr/bin/env"};
  o.clear_env = true;
  o.env = {"ONLY=1"};
  LineSink out;
  o.on_stdout = out.Callback();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  ASSERT_THAT((*child)->Wait(), IsOk());
  EXPECT_THAT(out.Texts(), ElementsAre("ONLY=1"));
  EXPECT_THAT(RunCommand({"true"}, {.env = {"NOEQUALS"}}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("NAME=VALUE")));
}

TEST_F(SubprocessTest, MissingExecutableIsNotFound) {
  EXPECT_THAT(
      RunCommand({"anxin-no-such-tool"}),
      HasCode(ErrorCode::kNotFound, HasSubstr("no executable named 'anxin-no-such-tool' in PATH")));
  EXPECT_THAT(RunCommand({"/nonexistent/tool"}),
              HasCode(ErrorCode::kNotFound, HasSubstr("/nonexistent/tool")));
  EXPECT_THAT(RunCommand({}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(RunCommand({"true"}, {.cwd = "/nonexistent-dir"}),
              HasCode(ErrorCode::kNotFound, HasSubstr("change directory to /nonexistent-dir")));
}

TEST_F(SubprocessTest, NeverAShell) {
  // Metacharacters reach the program as they are.
  auto r = RunCommand({"echo", "$(id)", ";", "|", "*"});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->stdout_text, "$(id) ; | *\n");
}

TEST_F(SubprocessTest, TimeoutStopsTheChild) {
  auto r = RunCommand({"sleep", "100"}, {.timeout = 100ms});
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_EQ(r->Describe(), "timed out (killed by SIGTERM)");
}

TEST_F(SubprocessTest, TimeoutEscalatesToKillWhenTermIsIgnored) {
  LineSink out;
  SubprocessOptions o;
  o.argv = {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"};
  o.timeout = 100ms;
  o.stop_grace = 200ms;
  o.on_stdout = out.Callback();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  pid_t pgid = (*child)->pgid();
  auto st = (*child)->Wait();
  ASSERT_THAT(st, IsOk());
  EXPECT_TRUE(st->timed_out);
  EXPECT_EQ(st->signal, SIGKILL);
  EXPECT_TRUE(GroupGone(pgid));
}

TEST_F(SubprocessTest, StopKillsTheWholeGroupWithGrandchildren) {
  LineSink out;
  SubprocessOptions o;
  o.argv = {"sh", "-c", "sleep 100 & sleep 100 & (trap '' TERM; sleep 100) & echo ready; wait"};
  o.on_stdout = out.Callback();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  ASSERT_TRUE(out.WaitFor("ready"));
  pid_t pgid = (*child)->pgid();
  EXPECT_EQ(getpgid((*child)->pid()), pgid);
  EXPECT_NE(pgid, getpgrp());
  EXPECT_TRUE((*child)->Running());
  auto st = (*child)->Stop(300ms);
  ASSERT_THAT(st, IsOk());
  EXPECT_FALSE(st->timed_out);
  EXPECT_NE(st->signal, 0);
  EXPECT_FALSE((*child)->Running());
  // Including the one that ignores SIGTERM: it gets SIGKILL after the grace.
  EXPECT_TRUE(GroupGone(pgid));
  EXPECT_THAT((*child)->Signal(SIGTERM), HasCode(ErrorCode::kFailedPrecondition));
  // Stopping again returns the same status.
  auto again = (*child)->Stop();
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->signal, st->signal);
}

TEST_F(SubprocessTest, StragglersAreKilledWhenTheLeaderExits) {
  LineSink out;
  SubprocessOptions o;
  // The background sleep keeps stdout open; without the group kill Wait
  // would have to give up on the pipe.
  o.argv = {"sh", "-c", "sleep 100 & echo started"};
  o.output_linger = 60s;
  o.on_stdout = out.Callback();
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  pid_t pgid = (*child)->pgid();
  auto st = (*child)->Wait(std::chrono::steady_clock::now() + 30s);
  ASSERT_THAT(st, IsOk());
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_THAT(out.Texts(), ElementsAre("started"));
  EXPECT_TRUE(GroupGone(pgid));
}

TEST_F(SubprocessTest, WaitWithDeadlineAndSignal) {
  auto child = Subprocess::Start({.argv = {"sleep", "100"}});
  ASSERT_THAT(child, IsOk());
  EXPECT_THAT((*child)->Wait(std::chrono::steady_clock::now() + 50ms),
              HasCode(ErrorCode::kDeadlineExceeded, HasSubstr("still running")));
  ASSERT_THAT((*child)->Signal(SIGUSR1), IsOk());
  auto st = (*child)->Wait();
  ASSERT_THAT(st, IsOk());
  EXPECT_EQ(st->signal, SIGUSR1);
  EXPECT_EQ(st->Describe(), "killed by SIGUSR1");
}

TEST_F(SubprocessTest, DestructorKillsTheGroup) {
  pid_t pgid;
  {
    LineSink out;
    SubprocessOptions o;
    o.argv = {"sh", "-c", "sleep 100 & echo ready; wait"};
    o.on_stdout = out.Callback();
    auto child = Subprocess::Start(std::move(o));
    ASSERT_THAT(child, IsOk());
    ASSERT_TRUE(out.WaitFor("ready"));
    pgid = (*child)->pgid();
  }
  EXPECT_TRUE(GroupGone(pgid));
}

TEST_F(SubprocessTest, StopFromAnotherThreadWhileWaiting) {
  auto child = Subprocess::Start({.argv = {"sleep", "100"}});
  ASSERT_THAT(child, IsOk());
  Subprocess* sp = child->get();
  std::thread waiter([sp] {
    auto st = sp->Wait();
    EXPECT_THAT(st, IsOk());
    if (st) {
      EXPECT_EQ(st->signal, SIGTERM);
    }
  });
  auto st = sp->Stop(5s);
  waiter.join();
  ASSERT_THAT(st, IsOk());
  EXPECT_EQ(st->signal, SIGTERM);
}

// A middle process starts a child through Subprocess and is then SIGKILLed:
// the child must die with it (PR_SET_PDEATHSIG) instead of living on.
TEST_F(SubprocessTest, ChildDiesWhenItsParentDies) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    close(fds[0]);
    auto child = Subprocess::Start({.argv = {"sleep", "100"}});
    pid_t pid = child ? (*child)->pid() : -1;
    if (write(fds[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(2);
    while (true) pause();
  }
  close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(read(fds[0], &grandchild, sizeof(grandchild)),
            static_cast<ssize_t>(sizeof(grandchild)));
  close(fds[0]);
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(kill(grandchild, 0), 0);  // running
  ASSERT_EQ(kill(middle, SIGKILL), 0);
  ASSERT_EQ(waitpid(middle, nullptr, 0), middle);
  // The grandchild is re-parented to this process (a subreaper) when it
  // dies, so its status can be read here.
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  pid_t got = 0;
  while (got == 0 && std::chrono::steady_clock::now() < deadline) {
    got = waitpid(grandchild, &status, WNOHANG);
    if (got == 0) std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(got, grandchild) << "the child outlived its parent";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

}  // namespace
}  // namespace anxin
