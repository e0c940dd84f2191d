// One node's `anxin run` in a multi-node test: the supervisor as a
// Subprocess with a time limit, its stdout and stderr kept in order, so a
// test can wait for a line and print everything when it fails. The process
// is continued (it may have been SIGSTOPped) and killed with its group when
// the object goes, so a failing assertion leaves nothing running.
//
//   RunNode node({"run", "--nnodes", "2", "--node-id", "node-0", "--", "python3", "t.py"});
//   ASSERT_TRUE(node.Start());
//   ASSERT_TRUE(WaitFor([&] { return node.Saw("all 1 ranks exited 0"); }, 30s));
//   EXPECT_TRUE(node.Wait().ok()) << node.Output();
//
// Thread safety: one test thread; the output is added from the Subprocess's
// reader threads under a lock.
#ifndef ANXIN_TESTS_SUPPORT_RUN_NODE_H_
#define ANXIN_TESTS_SUPPORT_RUN_NODE_H_

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::testing {

class RunNode {
 public:
  // args follow the anxin binary; limit bounds the whole run.
  explicit RunNode(std::vector<std::string> args,
                   std::chrono::seconds limit = std::chrono::seconds(150))
      : args_(std::move(args)), limit_(limit) {}
  ~RunNode() {
    if (proc_) {
      (void)::kill(proc_->pid(), SIGCONT);
      (void)proc_->Stop(std::chrono::seconds(0));
    }
  }
  RunNode(const RunNode&) = delete;
  RunNode& operator=(const RunNode&) = delete;

  bool Start() {
    SubprocessOptions so;
    so.argv = args_;
    so.argv.insert(so.argv.begin(), AnxinBinary());
    so.timeout = limit_;
    so.on_stdout = [this](const OutputLine& l) { Add(l.text); };
    so.on_stderr = [this](const OutputLine& l) { Add(l.text); };
    auto p = Subprocess::Start(std::move(so));
    EXPECT_TRUE(p.has_value()) << p.error().ToString();
    if (!p) return false;
    proc_ = std::move(*p);
    return true;
  }
  // The supervisor only; its ranks follow it on SIGKILL (PR_SET_PDEATHSIG).
  void Signal(int sig) {
    if (proc_) (void)::kill(proc_->pid(), sig);
  }
  void Kill9() {
    Signal(SIGKILL);
    if (proc_) (void)proc_->Wait();
  }
  ExitStatus Wait(std::chrono::seconds limit = std::chrono::seconds(120)) {
    auto st = proc_->Wait(std::chrono::steady_clock::now() + limit);
    if (!st) {
      ADD_FAILURE() << "node still running after " << limit.count() << " s:\n" << Output();
      (void)proc_->Stop(std::chrono::seconds(0));
      return {};
    }
    return *st;
  }
  std::string Output() {
    std::lock_guard lock(mu_);
    return out_;
  }
  bool Saw(const std::string& text) { return Output().find(text) != std::string::npos; }

 private:
  void Add(const std::string& line) {
    std::lock_guard lock(mu_);
    out_ += line + "\n";
  }
  std::vector<std::string> args_;
  std::chrono::seconds limit_;
  std::unique_ptr<Subprocess> proc_;
  std::mutex mu_;
  std::string out_;
};

// The generation job's record in etcd holds now (`etcdctl get`), -1 when
// it cannot be read.
inline int StoredGeneration(const std::string& endpoints, const std::string& job) {
  auto out = RunCommand({"/usr/bin/etcdctl", "--endpoints", endpoints, "get",
                         "/anxin/run/" + job + "/generation", "--print-value-only"},
                        {.timeout = std::chrono::seconds(10), .env = {"ETCDCTL_API=3"}});
  if (!out || !out->ok()) return -1;
  std::smatch m;
  if (!std::regex_search(out->stdout_text, m, std::regex(R"("generation":(\d+))"))) return -1;
  return std::stoi(m[1]);
}

}  // namespace anxin::testing

#endif  // ANXIN_TESTS_SUPPORT_RUN_NODE_H_
