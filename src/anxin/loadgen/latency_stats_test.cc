// Tests of the metrics, arrivals, datasets, tokenizer and reports, on
// scripted timings whose results are computed by hand in the comments.
#include "anxin/loadgen/latency_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "anxin/base/testing.h"
#include "anxin/loadgen/arrivals.h"
#include "anxin/loadgen/bench_report.h"
#include "anxin/loadgen/dataset.h"
#include "anxin/loadgen/tokenizer.h"

namespace anxin::loadgen {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1000000;

RequestRecord Ok(int64_t index, int64_t due, int64_t sent, std::vector<int64_t> chunks_ms,
                 int64_t end, int64_t out) {
  RequestRecord r;
  r.index = index;
  r.due_ns = due * kMs;
  r.sent_ns = sent * kMs;
  for (int64_t c : chunks_ms) r.chunk_ns.push_back(c * kMs);
  r.first_token_ns = r.chunk_ns.front();
  r.end_ns = end * kMs;
  r.input_tokens = 10;
  r.output_tokens = out;
  r.output_source = TokenSource::kUsage;
  r.input_source = TokenSource::kUsage;
  return r;
}

std::vector<RequestRecord> Scripted() {
  std::vector<RequestRecord> rs;
  // due 0: TTFT 100, E2E 200, TPOT (200-100)/3 = 33.33, ITL 20 30 40.
  rs.push_back(Ok(0, 0, 0, {100, 120, 150, 190}, 200, 4));
  // due 50, sent 60: TTFT 200, E2E 220, TPOT (270-250)/1 = 20, ITL 10.
  rs.push_back(Ok(1, 50, 60, {250, 260}, 270, 2));
  RequestRecord failed;
  failed.index = 2;
  failed.due_ns = 100 * kMs;
  failed.sent_ns = 100 * kMs;
  failed.end_ns = 150 * kMs;
  failed.error = "http_503";
  rs.push_back(failed);
  // due 120: TTFT 180, E2E 180, one token (no TPOT).
  rs.push_back(Ok(3, 120, 120, {300}, 300, 1));
  return rs;
}

TEST(Metrics, HandComputedFigures) {
  Summary s = Summarize(Scripted(), 0.5, Slo{});
  EXPECT_EQ(s.requests, 4);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.errors.at("http_503"), 1);
  EXPECT_EQ(s.output_tokens, 7);
  EXPECT_EQ(s.input_tokens, 30);
  EXPECT_DOUBLE_EQ(s.request_throughput, 6);
  EXPECT_DOUBLE_EQ(s.output_throughput, 14);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 74);
  // TTFT 100 200 180: mean 160, p50 180, p90 180 + 0.8*20, p99 180 + 0.98*20.
  EXPECT_NEAR(s.ttft.mean, 0.160, 1e-12);
  EXPECT_NEAR(s.ttft.p50, 0.180, 1e-12);
  EXPECT_NEAR(s.ttft.p90, 0.196, 1e-12);
  EXPECT_NEAR(s.ttft.p99, 0.1996, 1e-12);
  EXPECT_NEAR(s.ttft.max, 0.200, 1e-12);
  // TPOT 33.33 and 20.
  EXPECT_EQ(s.tpot.count, 2);
  EXPECT_NEAR(s.tpot.mean, (0.1 / 3 + 0.02) / 2, 1e-12);
  // ITL 10 20 30 40: mean 25, p50 25, p90 37, p99 39.7.
  EXPECT_EQ(s.itl.count, 4);
  EXPECT_NEAR(s.itl.mean, 0.025, 1e-12);
  EXPECT_NEAR(s.itl.p50, 0.025, 1e-12);
  EXPECT_NEAR(s.itl.p90, 0.037, 1e-12);
  EXPECT_NEAR(s.itl.p99, 0.0397, 1e-12);
  // E2E 200 220 180.
  EXPECT_NEAR(s.e2e.mean, 0.200, 1e-12);
  EXPECT_NEAR(s.e2e.p50, 0.200, 1e-12);
  // Waits 0 10 0 0.
  EXPECT_NEAR(s.send_delay.mean, 0.0025, 1e-12);
  EXPECT_EQ(s.output_token_source, "usage");
}

TEST(Metrics, GoodputUnderSlos) {
  auto slo = ParseSlo("ttft=190ms,tpot=30ms");
  ASSERT_THAT(slo, IsOk());
  Summary s = Summarize(Scripted(), 0.5, *slo);
  // Request 0 misses TPOT (33 ms), 1 misses TTFT (200 ms), 2 failed, 3 meets
  // both (one token: no TPOT to miss).
  EXPECT_EQ(s.good, 1);
  EXPECT_DOUBLE_EQ(s.goodput, 2);
  EXPECT_DOUBLE_EQ(s.attainment, 0.25);
  auto e2e = ParseSlo("e2e=210ms");
  ASSERT_THAT(e2e, IsOk());
  EXPECT_EQ(Summarize(Scripted(), 0.5, *e2e).good, 2);
}

TEST(Metrics, SloParsing) {
  auto slo = ParseSlo("ttft=0.5s,tpot=50ms,e2e=1m");
  ASSERT_THAT(slo, IsOk());
  EXPECT_DOUBLE_EQ(*slo->ttft, 0.5);
  EXPECT_DOUBLE_EQ(*slo->tpot, 0.05);
  EXPECT_DOUBLE_EQ(*slo->e2e, 60);
  EXPECT_EQ(slo->ToString(), "ttft=500ms,tpot=50ms,e2e=60000ms");
  EXPECT_THAT(ParseSlo("ttft"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("NAME=DURATION")));
  EXPECT_THAT(ParseSlo("itl=5ms"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown SLO")));
  EXPECT_THAT(ParseSlo("ttft=fast"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("ttft")));
  EXPECT_THAT(ParseSlo("ttft=0ms"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Metrics, EmptyRunIsAllZero) {
  Summary s = Summarize({}, 0, Slo{});
  EXPECT_EQ(s.requests, 0);
  EXPECT_EQ(s.ttft.count, 0);
  EXPECT_EQ(s.output_token_source, "none");
}

TEST(Arrivals, RatesAndBurstiness) {
  ArrivalSpec constant{.kind = ArrivalSpec::kConstant, .rate = 4};
  auto c = ArrivalOffsets(constant, 5, 1);
  ASSERT_EQ(c.size(), 5u);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], 0.25 * i, 1e-12);

  // Mean gap 1/rate for Poisson and gamma; gamma with burstiness b has a
  // coefficient of variation 1/sqrt(b).
  for (double b : {1.0, 0.25, 4.0}) {
    ArrivalSpec g{.kind = b == 1.0 ? ArrivalSpec::kPoisson : ArrivalSpec::kGamma,
                  .rate = 10,
                  .burstiness = b};
    auto t = ArrivalOffsets(g, 20001, 7);
    std::vector<double> gaps;
    for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
    double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
    double var = 0;
    for (double x : gaps) var += (x - mean) * (x - mean);
    double cv = std::sqrt(var / gaps.size()) / mean;
    EXPECT_NEAR(mean, 0.1, 0.005) << b;
    EXPECT_NEAR(cv, 1 / std::sqrt(b), 0.05) << b;
  }
  // Same seed, same schedule.
  ArrivalSpec p{.kind = ArrivalSpec::kPoisson, .rate = 3};
  EXPECT_EQ(ArrivalOffsets(p, 50, 9), ArrivalOffsets(p, 50, 9));
  EXPECT_NE(ArrivalOffsets(p, 50, 9), ArrivalOffsets(p, 50, 10));
  ArrivalSpec inf{.kind = ArrivalSpec::kPoisson, .rate = INFINITY};
  for (double x : ArrivalOffsets(inf, 10, 1)) EXPECT_EQ(x, 0);
  EXPECT_TRUE(ArrivalOffsets(ArrivalSpec{}, 10, 1).empty());
  EXPECT_THAT(ParseArrivalKind("weibull"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Dataset, LengthDistributions) {
  auto fixed = ParseLengthDist("128");
  ASSERT_THAT(fixed, IsOk());
  std::mt19937_64 rng(1);
  EXPECT_EQ(fixed->Sample(rng), 128);
  auto uni = ParseLengthDist("uniform:10:20");
  ASSERT_THAT(uni, IsOk());
  int64_t lo = 1000, hi = 0;
  for (int i = 0; i < 2000; ++i) {
    int64_t v = uni->Sample(rng);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 10);
  EXPECT_EQ(hi, 20);
  auto norm = ParseLengthDist("normal:100:10");
  ASSERT_THAT(norm, IsOk());
  double sum = 0;
  for (int i = 0; i < 4000; ++i) sum += static_cast<double>(norm->Sample(rng));
  EXPECT_NEAR(sum / 4000, 100, 1.5);
  EXPECT_THAT(ParseLengthDist("lognormal:128:0.5"), IsOk());
  EXPECT_THAT(ParseLengthDist("0"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseLengthDist("uniform:20:10"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseLengthDist("zipf:1:2"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseLengthDist("normal:5"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Dataset, ShareGptPlainAndChatRecords) {
  TempDir dir;
  std::string path = dir.Write(
      "d.jsonl",
      R"({"id":"a","conversations":[{"from":"human","value":"What is 2+2?"},{"from":"gpt","value":"It is four, of course."}]})"
      "\n"
      R"({"id":"b","conversations":[{"from":"gpt","value":"orphan reply"}]})"
      "\n\n"
      R"({"prompt":"Tell me a story","output_tokens":33})"
      "\n"
      R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Hi there"}]})"
      "\n");
  DatasetOptions opts{.count = 6, .seed = 3};
  auto prompts = LoadDataset(path, opts);
  ASSERT_THAT(prompts, IsOk());
  ASSERT_EQ(prompts->size(), 6u);
  std::map<std::string, int64_t> out;
  for (const Prompt& p : *prompts) out[p.text] = p.output_tokens;
  ASSERT_EQ(out.size(), 3u);          // the orphan reply makes no request; records repeat
  EXPECT_EQ(out["What is 2+2?"], 6);  // "It is four, of course." = 22 bytes -> 6 tokens
  EXPECT_EQ(out["Tell me a story"], 33);
  EXPECT_EQ(out["Hi there"], 128);
  for (const Prompt& p : *prompts) EXPECT_EQ(p.input_tokens, EstimateTokens(p.text));

  opts.output = *ParseLengthDist("7");
  auto fixed = LoadDataset(path, opts);
  ASSERT_THAT(fixed, IsOk());
  for (const Prompt& p : *fixed) EXPECT_EQ(p.output_tokens, 7);

  std::string array = dir.Write("a.json", R"([{"prompt":"x"},{"prompt":"y"}])");
  EXPECT_THAT(LoadDataset(array, {.count = 2}), IsOk());
}

TEST(Dataset, BadFilesNameTheLine) {
  TempDir dir;
  std::string bad = dir.Write("bad.jsonl", "{\"prompt\":\"ok\"}\n{oops\n");
  EXPECT_THAT(LoadDataset(bad, {.count = 1}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("bad.jsonl:2")));
  std::string odd = dir.Write("odd.jsonl", "{\"question\":\"?\"}\n");
  EXPECT_THAT(LoadDataset(odd, {.count = 1}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("odd.jsonl:1")));
  std::string neg = dir.Write("neg.jsonl", "{\"prompt\":\"a\",\"output_tokens\":0}\n");
  EXPECT_THAT(LoadDataset(neg, {.count = 1}), HasCode(ErrorCode::kInvalidArgument));
  std::string empty = dir.Write("empty.jsonl", "\n");
  EXPECT_THAT(LoadDataset(empty, {.count = 1}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no usable records")));
  EXPECT_THAT(LoadDataset(dir / "missing.jsonl", {.count = 1}), HasCode(ErrorCode::kNotFound));
}

TEST(Dataset, SyntheticPromptsHaveTheAskedLengths) {
  auto prompts = SyntheticPrompts(50, *ParseLengthDist("uniform:5:9"), *ParseLengthDist("17"), 4);
  ASSERT_EQ(prompts.size(), 50u);
  for (const Prompt& p : prompts) {
    int64_t words = std::count(p.text.begin(), p.text.end(), ' ') + 1;
    EXPECT_EQ(p.input_tokens, words);
    EXPECT_GE(words, 5);
    EXPECT_LE(words, 9);
    EXPECT_EQ(p.output_tokens, 17);
  }
  EXPECT_EQ(SyntheticPrompts(3, *ParseLengthDist("4"), *ParseLengthDist("4"), 4)[2].text,
            SyntheticPrompts(3, *ParseLengthDist("4"), *ParseLengthDist("4"), 4)[2].text);
}

// A byte-level BPE vocabulary small enough to merge by hand.
constexpr const char* kByteLevel = R"({
  "version": "1.0",
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
  "model": {
    "type": "BPE",
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7,
              "he": 8, "ll": 9, "hell": 10, "hello": 11, "Ġw": 12, "or": 13, "Ġwor": 14,
              "Ġworld": 15, "!": 16, "'": 17, "s": 18, "1": 19, "2": 20},
    "merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d"]
  }
})";

TEST(Tokenizer, ByteLevelBpeMergesByRank) {
  auto tok = Tokenizer::FromJson(kByteLevel, "t.json");
  ASSERT_THAT(tok, IsOk());
  EXPECT_EQ(tok->Count("hello"), 1);
  EXPECT_EQ(tok->Count("hello world"), 2);  // "hello" "Ġworld"
  EXPECT_EQ(tok->Count("hello world!"), 3);
  EXPECT_EQ(tok->Count("hello's"), 3);       // "hello", then "'s" -> "'" "s"
  EXPECT_EQ(tok->Count("hello  world"), 3);  // "hello" "Ġ" "Ġworld"
  EXPECT_EQ(tok->Count("12"), 2);            // digits without merges stay apart
  EXPECT_EQ(tok->Count(""), 0);
}

TEST(Tokenizer, MetaspaceWithByteFallback) {
  constexpr const char* kMeta = R"({
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "model": {"type": "BPE", "byte_fallback": true,
              "vocab": {"▁": 0, "a": 1, "b": 2, "▁a": 3, "▁ab": 4},
              "merges": [["▁", "a"], ["▁a", "b"]]}
  })";
  auto tok = Tokenizer::FromJson(kMeta, "m.json");
  ASSERT_THAT(tok, IsOk());
  EXPECT_EQ(tok->Count("ab"), 1);     // "▁ab"
  EXPECT_EQ(tok->Count("ab ab"), 2);  // "▁ab" "▁ab"
  EXPECT_EQ(tok->Count("abc"), 2);    // "▁ab" + byte token for "c"
  EXPECT_EQ(tok->Count("é"), 3);      // "▁" + two byte tokens
}

TEST(Tokenizer, RejectsWhatItCannotCount) {
  EXPECT_THAT(Tokenizer::FromJson("[]", "x"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(Tokenizer::FromJson(R"({"model":{"type":"WordPiece","vocab":{}}})", "x"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("WordPiece")));
  EXPECT_THAT(Tokenizer::FromJson(R"({"model":{"type":"BPE"}})", "x"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("vocab and merges")));
  EXPECT_THAT(Tokenizer::Load("/nonexistent/tokenizer.json"), HasCode(ErrorCode::kNotFound));
}

TEST(Report, SweepPicksTheBestSettingThatMeetsTheSlos) {
  auto sweep = ParseSweep("concurrency=1,2,4");
  ASSERT_THAT(sweep, IsOk());
  EXPECT_EQ(sweep->values, (std::vector<double>{1, 2, 4}));
  EXPECT_THAT(ParseSweep("concurrency=1,2.5"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseSweep("rate=0.5,x"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseSweep("batch=1,2"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseSweep("rate=0.5,1.5"), IsOk());

  Slo slo = *ParseSlo("ttft=500ms");
  std::vector<SweepPoint> points(3);
  double goodput[] = {5, 9, 12};
  bool meets[] = {true, true, false};
  for (int i = 0; i < 3; ++i) {
    points[i].value = sweep->values[i];
    points[i].summary.goodput = goodput[i];
    points[i].summary.output_throughput = 100 * goodput[i];
    points[i].summary.slo = slo;
    points[i].meets = meets[i];
  }
  EXPECT_EQ(BestPoint(points, slo), 1);  // 4 has more goodput but misses the SLO
  EXPECT_EQ(BestPoint(points, Slo{}), 2);
  std::string text = SweepText(points, *sweep, slo, 0.9);
  EXPECT_THAT(text, HasSubstr("best concurrency: 2"));
  points[0].meets = points[1].meets = false;
  EXPECT_EQ(BestPoint(points, slo), -1);
  EXPECT_THAT(SweepText(points, *sweep, slo, 0.9), HasSubstr("no concurrency meets"));
  auto j = SweepJson(points, *sweep, slo, 0.9);
  EXPECT_TRUE(j["best"].is_null());
  std::string svg = LatencySvg(points, *sweep, slo, "t <&>");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("t &lt;&amp;&gt;"));
  EXPECT_THAT(svg, HasSubstr("SLO"));
}

TEST(Report, CsvHasOneRowPerRequest) {
  std::vector<RequestRecord> rs = Scripted();
  rs[2].error_detail = "busy, \"retry\"";
  std::string csv = RecordsCsv(rs);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_THAT(csv, HasSubstr("0,0.000,0.000,100.000,200.000,33.333,4,10,4,0,usage,0,,\n"));
  EXPECT_THAT(csv, HasSubstr("http_503,\"busy, \"\"retry\"\"\""));
}

}  // namespace
}  // namespace anxin::loadgen
