// What the notify tests run against: `anxin notify` as a child process
// (NotifyProcess), and a Feishu/Lark custom bot on 127.0.0.1 (FakeBot) that
// checks each request's token and signature the way the real bot does,
// records the cards it accepts, and can answer from a script (rate limits,
// server errors).
//
//   FakeBot bot;                       // any free port
//   // config: {type: feishu, url: bot.url(), secret_file: <a file holding kBotSecret>}
//   NotifyProcess notify(dir, config_path);
//   ASSERT_GT(notify.port(), 0) << notify.Stderr();
//   ASSERT_TRUE(bot.WaitFor(1));
//   nlohmann::json card = bot.messages()[0];
//
// The child is killed (SIGKILL to its group) when its object goes, and after
// four minutes in any case.
//
// Thread safety: every method may be called from any thread.
#ifndef ANXIN_TESTS_NOTIFY_NOTIFY_HARNESS_H_
#define ANXIN_TESTS_NOTIFY_NOTIFY_HARNESS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/notify/delivery.h"

namespace anxin::testing {

inline constexpr char kBotSecret[] = "test-signing-secret-42";
inline constexpr char kBotToken[] = "hook-token-0123456789";

// A Feishu/Lark custom bot: checks the signature, records cards, and answers
// from a script (then code 0).
class FakeBot {
 public:
  struct Answer {
    int http = 200;
    int code = 0;
  };
  explicit FakeBot(int port = 0) : server_({.port = port, .threads = 2}) {
    server_.Post(R"(/open-apis/bot/v2/hook/(.+))", [this](const HttpRequest& req) {
      std::lock_guard lock(mu_);
      ++calls_;
      nlohmann::json j = nlohmann::json::parse(req.body, nullptr, false);
      if (req.path_groups[0] != kBotToken || j.is_discarded()) {
        return HttpResponse::Json(200, R"({"code":9499,"msg":"bad request"})");
      }
      const std::string ts = j.value("timestamp", "");
      const int64_t now = std::time(nullptr);
      if (ts.empty() || std::llabs(std::stoll(ts) - now) > 3600 ||
          j.value("sign", "") != notify::FeishuSign(std::stoll(ts), kBotSecret)) {
        ++bad_signatures_;
        return HttpResponse::Json(200, R"({"code":19021,"msg":"sign match fail"})");
      }
      if (!script_.empty()) {
        Answer a = script_.front();
        script_.erase(script_.begin());
        if (a.http != 200) return HttpResponse::Text(a.http, "upstream trouble");
        return HttpResponse::Json(200, R"({"code":)" + std::to_string(a.code) + R"(,"msg":"x"})");
      }
      messages_.push_back(j);
      return HttpResponse::Json(200, R"({"code":0,"msg":"success","data":{}})");
    });
    EXPECT_TRUE(server_.Start().has_value());
  }
  int port() const { return server_.port(); }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port()) + "/open-apis/bot/v2/hook/" + kBotToken;
  }
  void Script(std::vector<Answer> a) {
    std::lock_guard lock(mu_);
    script_ = std::move(a);
  }
  std::vector<nlohmann::json> messages() {
    std::lock_guard lock(mu_);
    return messages_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int bad_signatures() {
    std::lock_guard lock(mu_);
    return bad_signatures_;
  }
  bool WaitFor(size_t n, std::chrono::seconds limit = std::chrono::seconds(20)) {
    return ::anxin::testing::WaitFor([&] { return messages().size() >= n; }, limit);
  }

 private:
  HttpServer server_;
  std::mutex mu_;
  std::vector<Answer> script_;
  std::vector<nlohmann::json> messages_;
  int calls_ = 0, bad_signatures_ = 0;
};

// `anxin --config CONFIG notify` as a child process on a free port (read from
// its --port-file), spool in dir/spool unless given, prefix (a wrapper such
// as `env` or `unshare`) before the program; ANXIN_TEST_BOT_SECRET holds
// kBotSecret in its environment.
class NotifyProcess {
 public:
  // config "": no --config (then extra gives the sinks).
  NotifyProcess(const TempDir& dir, const std::string& config, std::vector<std::string> prefix = {},
                std::string spool = "", std::vector<std::string> extra = {})
      : dir_(dir) {
    port_file_ = dir / "port";
    std::filesystem::remove(port_file_);
    SubprocessOptions o;
    o.argv = std::move(prefix);
    o.argv.push_back(AnxinBinary());
    if (!config.empty()) o.argv.insert(o.argv.end(), {"--config", config});
    for (const std::string& a : {std::string("notify"), std::string("--port"), std::string("0"),
                                 std::string("--port-file"), port_file_, std::string("--spool"),
                                 spool.empty() ? dir / "spool" : spool}) {
      o.argv.push_back(a);
    }
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = {"ANXIN_TEST_BOT_SECRET=" + std::string(kBotSecret)};
    o.timeout = std::chrono::minutes(4);
    o.on_stderr = [this](const OutputLine& l) {
      std::lock_guard lock(mu_);
      stderr_ += l.text + "\n";
    };
    auto child = Subprocess::Start(std::move(o));
    EXPECT_TRUE(child.has_value());
    if (child) child_ = std::move(*child);
    // The port once notify has written it; 0 when it exits or 30 s pass first.
    WaitFor(
        [&] {
          if (!child_ || !child_->Running()) return true;
          std::ifstream in(port_file_);
          return in >> port_ && port_ > 0;
        },
        std::chrono::seconds(30));
  }
  int port() const { return port_; }
  HttpClient Client() const {
    return HttpClient("127.0.0.1", port_, {.timeout = std::chrono::milliseconds(10000)});
  }
  Result<HttpResponse> Post(const std::string& body) { return Client().Post("/webhook", body); }
  std::string Metrics() {
    auto r = Client().Get("/metrics");
    return r ? r->body : "";
  }
  void Kill() { (void)child_->Signal(SIGKILL), (void)child_->Wait(); }
  int Term() {
    auto st = child_->Stop(std::chrono::seconds(20));
    return st ? st->exit_code : -1;
  }
  std::string Stderr() {
    std::lock_guard lock(mu_);
    return stderr_;
  }

 private:
  const TempDir& dir_;
  std::string port_file_;
  int port_ = 0;
  std::unique_ptr<Subprocess> child_;
  std::mutex mu_;
  std::string stderr_;
};

}  // namespace anxin::testing

#endif  // ANXIN_TESTS_NOTIFY_NOTIFY_HARNESS_H_
