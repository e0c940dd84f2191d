#include <signal.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/net/http_testing.h"

namespace anxin {
namespace {

using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace std::chrono_literals;

TEST(KvPlanCli, SideBySideFormatsAndJson) {
  auto out = RunAnxin(
      {"kv", "plan", "--model", "llama-3-8b", "--device-memory", "80GiB", "--seq-len", "4096"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("fp16"));
  EXPECT_THAT(out.stdout_text, HasSubstr("int4"));
  auto j = RunAnxin({"--json", "kv", "plan", "--model", "llama-3-8b", "--device-memory", "80GiB",
                     "--format", "fp16,int4"});
  ASSERT_EQ(j.exit_code, 0) << j.stderr_text;
  json plan = json::parse(j.stdout_text);
  const auto& f = plan["formats"];
  EXPECT_EQ(f[0]["bytes_per_token"], 131072.0);  // 2 x 32 x 8 x 128 x 2
  EXPECT_EQ(f[1]["bits_per_value"], 4.5);
  EXPECT_NEAR(f[1]["tokens_vs_first"].get<double>(), 16 / 4.5, 0.01);
  // budget: 80 GiB x 0.9 - 16.06 GB weights - 1 GiB
  const double budget = 80.0 * (1 << 30) * 0.9 - 8.03e9 * 2 - (1 << 30);
  EXPECT_NEAR(plan["kv_budget_bytes"].get<double>(), budget, 2);
  EXPECT_EQ(f[0]["tokens"].get<int64_t>(), static_cast<int64_t>(budget / (131072.0 * 16)) * 16);
}

TEST(KvPlanCli, NothingFitsIsACheckFailureBadInputIsUsage) {
  auto none = RunAnxin({"kv", "plan", "--model", "llama-2-70b", "--device-memory", "80GiB"});
  EXPECT_EQ(none.exit_code, 1) << none.stdout_text;
  EXPECT_THAT(none.stdout_text, HasSubstr("no memory for the KV cache"));
  auto bad = RunAnxin({"kv", "plan", "--model", "llama-9", "--device-memory", "80GiB"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, HasSubstr("error: --model: unknown model 'llama-9'"));
  auto fmt = RunAnxin(
      {"kv", "plan", "--model", "llama-3-8b", "--device-memory", "80GiB", "--format", "int3"});
  EXPECT_EQ(fmt.exit_code, 2);
  EXPECT_THAT(fmt.stderr_text, HasSubstr("--format: unknown KV format 'int3'"));
  auto mem = RunAnxin({"kv", "plan", "--model", "llama-3-8b", "--device-memory", "lots"});
  EXPECT_EQ(mem.exit_code, 2);
  EXPECT_THAT(mem.stderr_text, HasSubstr("--device-memory"));
}

// A float32 .npy file: magic, version 1.0, header padded to 64 bytes.
std::string Npy(const std::vector<int64_t>& shape, const std::vector<float>& data) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * 4);
  return out;
}

TEST(KvAccuracyCli, MeasuresDumpedTensors) {
  TempDir dir;
  const int heads = 2, tokens = 96, d = 64;
  std::vector<float> k(heads * tokens * d), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::sin(0.37f * i) * ((i % d) == 3 ? 4.0f : 1.0f);  // a larger channel
    v[i] = std::cos(0.11f * i);
  }
  // Hugging Face layout [1, heads, tokens, dim].
  const std::string kp = dir.Write("k.npy", Npy({1, heads, tokens, d}, k));
  const std::string vp = dir.Write("v.npy", Npy({1, heads, tokens, d}, v));
  auto out = RunAnxin({"--json", "kv", "accuracy", "--keys", kp, "--values", vp, "--format",
                       "fp16,int8,int4,int4-asym:kivi", "--min-cosine", "0.9"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  json j = json::parse(out.stdout_text);
  EXPECT_EQ(j["tokens"], tokens);
  EXPECT_EQ(j["kv_heads"], heads);
  EXPECT_EQ(j["head_dim"], d);
  ASSERT_EQ(j["formats"].size(), 4u);
  EXPECT_GT(j["formats"][0]["attention_cosine"].get<double>(), 0.99999);
  EXPECT_GT(j["formats"][0]["attention_cosine"], j["formats"][2]["attention_cosine"]);
  EXPECT_TRUE(j["pass"].get<bool>());
  // A bar no format can reach is a failed check (exit 1).
  auto strict = RunAnxin({"kv", "accuracy", "--keys", kp, "--values", vp, "--format", "int4",
                          "--min-cosine", "0.9999999"});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_THAT(strict.stdout_text, HasSubstr("fail"));
  // Mismatched K and V, a missing file, NaN.
  const std::string small =
      dir.Write("s.npy", Npy({1, heads, 8, d}, std::vector<float>(heads * 8 * d)));
  auto mism = RunAnxin({"kv", "accuracy", "--keys", kp, "--values", small});
  EXPECT_EQ(mism.exit_code, 2);
  EXPECT_THAT(mism.stderr_text, HasSubstr("must match"));
  auto missing = RunAnxin({"kv", "accuracy", "--keys", dir / "nope.npy", "--values", vp});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.stderr_text, HasSubstr("nope.npy"));
  std::vector<float> nan(heads * tokens * d, 1.0f);
  nan[77] = std::nanf("");
  const std::string np = dir.Write("nan.npy", Npy({1, heads, tokens, d}, nan));
  auto bad = RunAnxin({"kv", "accuracy", "--keys", np, "--values", vp});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, HasSubstr("element 77 is nan"));
}

// A safetensors file holding float32 tensors k and v.
std::string Safetensors(const std::vector<int64_t>& shape, const std::vector<float>& k,
                        const std::vector<float>& v) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? "," : "") + std::to_string(shape[i]);
  const size_t n = k.size() * 4;
  std::string header = "{\"layer0.k\":{\"dtype\":\"F32\",\"shape\":[" + dims +
                       "],\"data_offsets\":[0," + std::to_string(n) +
                       "]},\"layer0.v\":{\"dtype\":"
                       "\"F32\",\"shape\":[" +
                       dims + "],\"data_offsets\":[" + std::to_string(n) + "," +
                       std::to_string(2 * n) + "]}}";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(k.data()), n);
  out.append(reinterpret_cast<const char*>(v.data()), n);
  return out;
}

TEST(KvAccuracyCli, ReadsSafetensorsByName) {
  TempDir dir;
  const int tokens = 64, heads = 2, d = 32;
  std::vector<float> k(tokens * heads * d), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::sin(0.5f * i);
    v[i] = std::cos(0.3f * i);
  }
  const std::string f = dir.Write("kv.safetensors", Safetensors({tokens, heads, d}, k, v));
  auto out = RunAnxin({"--json", "kv", "accuracy", "--safetensors", f, "--keys", "layer0.k",
                       "--values", "layer0.v", "--format", "int8"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  json j = json::parse(out.stdout_text);
  EXPECT_EQ(j["tokens"], tokens);
  EXPECT_EQ(j["kv_heads"], heads);
  EXPECT_GT(j["formats"][0]["attention_cosine"].get<double>(), 0.999);
  auto missing = RunAnxin(
      {"kv", "accuracy", "--safetensors", f, "--keys", "layer1.k", "--values", "layer0.v"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.stderr_text, HasSubstr("no tensor named 'layer1.k' (it has: layer0.k"));
}

TEST(KvAccuracyCli, SyntheticOutliersByDefault) {
  auto out = RunAnxin({"kv", "accuracy", "--tokens", "256", "--format", "fp16,int4"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("synthetic"));
}

// Starts `anxin serve ...` with --port 0 and waits for its port file.
struct Server {
  std::unique_ptr<Subprocess> proc;
  int port = 0;
  std::string out, err;
  std::mutex mu;
};

std::unique_ptr<Server> StartServer(std::vector<std::string> args, const TempDir& dir,
                                    const std::string& name) {
  auto s = std::make_unique<Server>();
  const std::string port_file = dir / (name + ".port");
  args.insert(args.begin(), ::anxin::testing::AnxinBinary());
  args.insert(args.end(), {"--port", "0", "--port-file", port_file});
  SubprocessOptions o;
  o.argv = args;
  o.timeout = 120s;
  Server* raw = s.get();
  o.on_stdout = [raw](const OutputLine& l) {
    std::lock_guard g(raw->mu);
    raw->out += l.text + "\n";
  };
  o.on_stderr = [raw](const OutputLine& l) {
    std::lock_guard g(raw->mu);
    raw->err += l.text + "\n";
  };
  auto p = Subprocess::Start(std::move(o));
  if (!p) {
    ADD_FAILURE() << p.error().ToString();
    return s;
  }
  s->proc = std::move(*p);
  // The port file is written whole (atomically) once the server listens.
  ::anxin::testing::WaitFor(
      [&] {
        const std::string text = ::anxin::testing::ReadTextFile(port_file);
        if (!text.empty() && text.back() == '\n') s->port = std::stoi(text);
        return s->port > 0 || !s->proc->Running();
      },
      30s);
  EXPECT_GT(s->port, 0) << s->err;
  return s;
}

TEST(ServeCli, SimAndGateServeAndStopCleanly) {
  TempDir dir;
  auto sim = StartServer({"--json", "serve", "sim", "--num-blocks", "64", "--max-num-seqs", "4",
                          "--time-scale", "0.05", "--kv-format", "int4"},
                         dir, "sim");
  ASSERT_GT(sim->port, 0);
  auto gate =
      StartServer({"serve", "gate", "--upstream", "http://127.0.0.1:" + std::to_string(sim->port),
                   "--max-concurrency", "2"},
                  dir, "gate");
  ASSERT_GT(gate->port, 0);
  std::vector<std::string> reqs(
      6, net::testing::Post("/v1/completions",
                            R"({"prompt":"hello there","max_tokens":8,"stream":true,
                                  "stream_options":{"include_usage":true}})"));
  auto xs = net::testing::RunExchanges(gate->port, reqs, 60s);
  for (const auto& x : xs) {
    ASSERT_TRUE(x.complete) << x.raw;
    EXPECT_EQ(net::testing::SseData(x.body).back(), "[DONE]");
  }
  auto metrics = net::testing::RunOne(gate->port, net::testing::Get("/gate/metrics"));
  EXPECT_THAT(metrics.body, HasSubstr("anxin_gate_in_flight_max 2"));
  EXPECT_THAT(metrics.body,
              HasSubstr("anxin_gate_request_seconds_count{route=\"/v1/completions\"} 6"));
  auto sim_metrics = net::testing::RunOne(sim->port, net::testing::Get("/metrics"));
  EXPECT_THAT(sim_metrics.body, HasSubstr("anxin_sim_requests_total{route=\"/v1/completions\","
                                          "code=\"200\"} 6"));
  // Both expositions are the metric model's: promtool accepts them as they are.
  for (const std::string& body : {metrics.body, sim_metrics.body}) {
    const std::string file = dir.Write("metrics.prom", body);
    auto lint =
        RunCommand({"/usr/bin/promtool", "check", "metrics"}, {.timeout = 60s, .stdin_path = file});
    ASSERT_THAT(lint, ::anxin::testing::IsOk()) << "promtool: run scripts/install-deps";
    EXPECT_EQ(lint->exit_code, 0) << lint->stdout_text << lint->stderr_text << body;
    EXPECT_EQ(lint->stdout_text + lint->stderr_text, "") << body;
  }
  ASSERT_THAT(gate->proc->Signal(SIGTERM), ::anxin::testing::IsOk());
  auto gs = gate->proc->Wait(std::chrono::steady_clock::now() + 30s);
  ASSERT_TRUE(gs.has_value());
  EXPECT_EQ(gs->exit_code, 0);
  EXPECT_THAT(gate->out, HasSubstr("admitted 6 (peak 2 in flight of 2"));
  ASSERT_THAT(sim->proc->Signal(SIGINT), ::anxin::testing::IsOk());
  auto ss = sim->proc->Wait(std::chrono::steady_clock::now() + 30s);
  ASSERT_TRUE(ss.has_value());
  EXPECT_EQ(ss->exit_code, 0) << sim->err;
  json summary = json::parse(sim->out);
  EXPECT_EQ(summary["completed"], 6);
  EXPECT_LE(summary["max_running"].get<int>(), 2);
}

// The load tester against the simulator, as docs/serve.md's sizing exercise
// runs them: 12 streams in flight against a cap of 6 and a cache too small for
// six whole sequences. The cap holds, blocks run out so sequences are
// preempted, and no request is lost: every one completes with all its tokens,
// on both sides' counts.
TEST(ServeCli, LoadTesterAgainstSimulatorCapHoldsNothingLost) {
  TempDir dir;
  // 24 blocks of 16 tokens; six sequences of 32 + 64 tokens would need 36.
  auto sim = StartServer({"--json", "serve", "sim", "--num-blocks", "24", "--block-size", "16",
                          "--max-num-seqs", "6", "--time-scale", "0", "--always-usage"},
                         dir, "sim");
  ASSERT_GT(sim->port, 0);
  auto bench = RunAnxin({"--json", "bench", "serve", "--url",
                         "http://127.0.0.1:" + std::to_string(sim->port), "-n", "30", "-c", "12",
                         "--input-tokens", "32", "--output-tokens", "64", "--no-progress"});
  ASSERT_EQ(bench.exit_code, 0) << bench.stderr_text;
  json b = json::parse(bench.stdout_text);
  EXPECT_EQ(b["completed"], 30);
  EXPECT_EQ(b["failed"], 0);
  EXPECT_EQ(b["output_tokens"], 30 * 64);
  EXPECT_EQ(b["output_token_source"], "usage");
  EXPECT_LE(b["load_tester"]["peak_open_streams"].get<int>(), 12);

  ASSERT_THAT(sim->proc->Signal(SIGTERM), ::anxin::testing::IsOk());
  auto ss = sim->proc->Wait(std::chrono::steady_clock::now() + 30s);
  ASSERT_TRUE(ss.has_value());
  EXPECT_EQ(ss->exit_code, 0) << sim->err;
  std::lock_guard g(sim->mu);
  json summary = json::parse(sim->out);
  EXPECT_EQ(summary["submitted"], 30);
  EXPECT_EQ(summary["completed"], 30);
  EXPECT_EQ(summary["generated_tokens"], 30 * 64);
  EXPECT_EQ(summary["cancelled"], 0);
  EXPECT_EQ(summary["refused_queue_full"], 0);
  EXPECT_LE(summary["max_running"].get<int>(), 6);
  EXPECT_GE(summary["max_running"].get<int>(), 2);
  EXPECT_GT(summary["preemptions"].get<int>(), 0);
  EXPECT_GT(summary["recomputed_tokens"].get<int>(), 0);
}

TEST(ServeCli, BadSettingsAreUsageErrors) {
  auto a = RunAnxin({"serve", "gate", "--upstream", "https://x:1"});
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_THAT(a.stderr_text, HasSubstr("https"));
  auto b = RunAnxin({"serve", "gate", "--upstream", "127.0.0.1:8000", "--queue-timeout", "soon"});
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_THAT(b.stderr_text, HasSubstr("--queue-timeout"));
  auto c = RunAnxin({"serve", "sim", "--kv-format", "int5"});
  EXPECT_EQ(c.exit_code, 2);
  auto d = RunAnxin({"serve", "sim", "--model", "llama-2-70b", "--device-memory", "40GiB"});
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_THAT(d.stderr_text, HasSubstr("no KV blocks fit"));
  auto e = RunAnxin({"serve", "sim", "--time-model", "/nonexistent.yaml"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_THAT(e.stderr_text, HasSubstr("/nonexistent.yaml"));
}

}  // namespace
}  // namespace anxin
