// Matching, thresholds, verdicts, msprobe dumps end to end, and the reports.
#include "anxin/compare/dump_compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "anxin/base/global_config.h"
#include "anxin/base/testing.h"
#include "anxin/compare/compare_report.h"
#include "anxin/compare/testing_util.h"

namespace anxin::compare {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Tensor Named(std::string name) {
  Tensor t;
  t.name = std::move(name);
  return t;
}

TEST(Matcher, FuzzyKeyDropsTheCallIndex) {
  EXPECT_EQ(FuzzyKey("Functional.conv2d.3.forward.input.0"), "Functional.conv2d.forward.input.0");
  EXPECT_EQ(FuzzyKey("Module.layer1.0.conv1.Conv2d.forward.2.output.0"),
            "Module.layer1.0.conv1.Conv2d.forward.output.0");
  EXPECT_EQ(FuzzyKey("Tensor.add_.12.backward.input.1"), "Tensor.add_.backward.input.1");
  EXPECT_EQ(FuzzyKey("Module.fc.Linear.parameters_grad.1.weight"),
            "Module.fc.Linear.parameters_grad.weight");
  EXPECT_EQ(FuzzyKey("plain_name"), "plain_name");
}

TEST(Matcher, ExactFuzzyAndRenamed) {
  std::vector<Tensor> out = {Named("Functional.relu.5.forward.output.0"),
                             Named("Functional.relu.6.forward.output.0"),
                             Named("Module.head.Linear.forward.0.output.0"), Named("only_out")};
  std::vector<Tensor> ref = {Named("Functional.relu.0.forward.output.0"),
                             Named("Functional.relu.1.forward.output.0"),
                             Named("Module.fc2.Linear.forward.0.output.0"), Named("only_ref")};
  MatchResult exact = MatchTensors(out, ref, {});
  EXPECT_TRUE(exact.pairs.empty());
  EXPECT_EQ(exact.unmatched_out.size(), 4u);

  MatchOptions fuzzy{.fuzzy = true, .renames = {{"Module.head.", "Module.fc2."}}};
  MatchResult m = MatchTensors(out, ref, fuzzy);
  using P = std::pair<size_t, size_t>;
  EXPECT_THAT(m.pairs, ElementsAre(P{0, 0}, P{1, 1}, P{2, 2}));
  EXPECT_THAT(m.unmatched_out, ElementsAre(3u));
  EXPECT_THAT(m.unmatched_ref, ElementsAre(3u));
}

TEST(Matcher, RenameFileErrorsNameTheLine) {
  EXPECT_THAT(ParseRenames("a: b\nc: [d]\n", "map.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("map.yaml:2:4: c: each entry must be 'out name: ref name'")));
  EXPECT_THAT(ParseRenames("a: b\na: c\n", "map.yaml"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("map.yaml:2:1")));
  auto r = ParseRenames("# comment\nModule.head: Module.fc2\n", "map.yaml");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->at(0).second, "Module.fc2");
}

TEST(Thresholds, PerDtypeAndPerOpOverridesApplyInOrder) {
  auto rules = ThresholdRules::ParseYaml(R"(
default: {pass_cosine: 0.995}
dtypes:
  bfloat16: {pass_max_abs_err: 0.01}
ops:
  - match: "*softmax*"
    pass_cosine: 0.999
statistics: {fail_rel_diff: 0.9}
)",
                                         "t.yaml");
  ASSERT_THAT(rules, IsOk());
  Thresholds plain = rules->For("Functional.relu.0.forward.output.0", DType::kFloat32);
  EXPECT_EQ(plain.pass_cosine, 0.995);
  EXPECT_EQ(plain.pass_max_abs_err, 0.001);
  EXPECT_EQ(plain.fail_stat_rel_diff, 0.9);
  Thresholds bf = rules->For("Functional.softmax.0.forward.output.0", DType::kBFloat16);
  EXPECT_EQ(bf.pass_cosine, 0.999);
  EXPECT_EQ(bf.pass_max_abs_err, 0.01);
  // In a dump tree the name starts with the rank directory; an anchored
  // pattern still matches the part after it.
  auto anchored = ThresholdRules::ParseYaml(
      "ops:\n  - {match: \"Functional.softmax.*\", "
      "pass_cosine: 0.9999}\n",
      "t.yaml");
  ASSERT_THAT(anchored, IsOk());
  EXPECT_EQ(anchored->For("rank3/Functional.softmax.0.forward.output.0", {}).pass_cosine, 0.9999);
  EXPECT_EQ(anchored->For("rank3/Functional.relu.0.forward.output.0", {}).pass_cosine, 0.99);
}

TEST(Thresholds, BadFilesSayWhereAndWhat) {
  EXPECT_THAT(ThresholdRules::ParseYaml("default:\n  pass_cosin: 0.9\n", "t.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("t.yaml:2:3: default: unknown key 'pass_cosin'")));
  EXPECT_THAT(ThresholdRules::ParseYaml("default: {pass_cosine: high}\n", "t.yaml"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("expected a number, got 'high'")));
  EXPECT_THAT(ThresholdRules::ParseYaml("dtypes: {float17: {}}\n", "t.yaml"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown dtype 'float17'")));
  EXPECT_THAT(ThresholdRules::ParseYaml("ops: [{pass_cosine: 1}]\n", "t.yaml"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("t.yaml:1:7: ops[0]: needs match")));
  EXPECT_THAT(ThresholdRules::ParseYaml("default:\n  fail_cosine: -2\n", "t.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("t.yaml:2:16: default.fail_cosine: -2 is out of range: "
                                "fail_cosine must be in [-1, 1)")));
}

// Every kind of threshold has its range, checked wherever it is set (the
// defaults, a dtype, an op rule, the statistics section); an error names
// the file position, the key and the allowed range.
TEST(Thresholds, ValuesOutsideTheirRangeAreErrors) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      // Cosine: [-1, 1). 1.5 made every identical pair a warning.
      {"default: {pass_cosine: 1.5}\n",
       "t.yaml:1:24: default.pass_cosine: 1.5 is out of range: pass_cosine must be in [-1, 1)"},
      {"default: {pass_cosine: 1}\n", "pass_cosine: 1 is out of range"},
      {"dtypes:\n  float16: {fail_cosine: -1.01}\n",
       "t.yaml:2:26: dtypes.float16.fail_cosine: -1.01 is out of range: fail_cosine must be in "
       "[-1, 1)"},
      {"ops:\n  - {match: '*', fail_cosine: 1.2}\n",
       "ops[0].fail_cosine: 1.2 is out of range: fail_cosine must be in [-1, 1)"},
      // MaxAbsErr: finite and > 0.
      {"default: {pass_max_abs_err: 0}\n",
       "default.pass_max_abs_err: 0 is out of range: pass_max_abs_err must be a finite number > 0"},
      {"default: {fail_max_abs_err: -3}\n",
       "default.fail_max_abs_err: -3 is out of range: fail_max_abs_err must be a finite number > "
       "0"},
      {"ops:\n  - {match: '*', fail_max_abs_err: 0}\n",
       "ops[0].fail_max_abs_err: 0 is out of range"},
      // Statistics differences: [0, 2].
      {"statistics: {pass_rel_diff: -0.1}\n",
       "statistics.pass_rel_diff: -0.1 is out of range: pass_rel_diff must be in [0, 2]"},
      {"statistics: {fail_rel_diff: 2.5}\n",
       "statistics.fail_rel_diff: 2.5 is out of range: fail_rel_diff must be in [0, 2]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(ThresholdRules::ParseYaml(c.yaml, "t.yaml"),
                HasCode(ErrorCode::kInvalidArgument, HasSubstr(c.want)));
  }
  // The ends of each range are allowed.
  EXPECT_THAT(ThresholdRules::ParseYaml("default: {pass_cosine: 0.999999, fail_cosine: -1}\n"
                                        "statistics: {pass_rel_diff: 0, fail_rel_diff: 2}\n",
                                        "t.yaml"),
              IsOk());
}

// A pass bound on the fail side of its fail bound is refused, for each pair
// of bounds, also when the two come from different rules (a rule over the
// built-in defaults, an op rule over a dtype rule). The error points at the
// key of the most specific rule involved.
TEST(Thresholds, PassAndFailBoundsMustNotCross) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"default: {pass_cosine: 0.5, fail_cosine: 0.9}\n",
       "t.yaml:1:24: default.pass_cosine: 0.5 is below fail_cosine 0.9: pass needs cosine > "
       "pass_cosine and fail is cosine <= fail_cosine, so pass_cosine must be >= fail_cosine"},
      // fail_cosine 0.9 is the built-in default.
      {"default: {pass_cosine: 0.5}\n", "default.pass_cosine: 0.5 is below fail_cosine 0.9"},
      {"default: {pass_max_abs_err: 2, fail_max_abs_err: 0.5}\n",
       "default.pass_max_abs_err: 2 is above fail_max_abs_err 0.5: pass needs MaxAbsErr < "
       "pass_max_abs_err and fail is MaxAbsErr >= fail_max_abs_err, so pass_max_abs_err must "
       "be <= fail_max_abs_err"},
      {"dtypes:\n  bfloat16: {fail_max_abs_err: 0.0005}\n",
       "t.yaml:2:32: dtypes.bfloat16.fail_max_abs_err: 0.0005 is below pass_max_abs_err 0.001"},
      {"statistics: {pass_rel_diff: 0.6}\n",
       "statistics.pass_rel_diff: 0.6 is above fail_rel_diff 0.5: pass needs every statistics "
       "difference <= pass_rel_diff and fail is one > fail_rel_diff, so pass_rel_diff must be "
       "<= fail_rel_diff"},
      {"ops:\n  - {match: '*softmax*', fail_cosine: 0.995}\n",
       "t.yaml:2:39: ops[0].fail_cosine: 0.995 is above pass_cosine 0.99"},
      {"dtypes:\n  bfloat16: {pass_cosine: 0.95, fail_cosine: 0.8}\n"
       "ops:\n  - {match: '*softmax*', fail_cosine: 0.97}\n",
       "ops[0].fail_cosine: 0.97 is above pass_cosine 0.95 (with dtypes.bfloat16)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(ThresholdRules::ParseYaml(c.yaml, "t.yaml"),
                HasCode(ErrorCode::kInvalidArgument, HasSubstr(c.want)));
  }
  // Equal bounds leave no warning band, which is allowed; so is a rule that
  // moves both bounds of a pair together.
  EXPECT_THAT(ThresholdRules::ParseYaml("default: {pass_cosine: 0.9, fail_cosine: 0.9}\n"
                                        "ops:\n  - {match: '*', pass_cosine: 0.5, "
                                        "fail_cosine: 0.4}\n",
                                        "t.yaml"),
              IsOk());
}

// The `compare:` section of the global configuration file, as the program
// reads it (--config and ANXIN_CONFIG), sets the thresholds; its errors
// point into that file.
TEST(Thresholds, GlobalConfigCompareSectionSetsThemInTheProgram) {
  testing::ScratchDir dir;
  ASSERT_EQ(testing::RunPython({"-c",
                                "import numpy as np, sys; d = sys.argv[1]; "
                                "r = np.linspace(-1, 1, 1001).astype(np.float32); "
                                "np.save(d + '/ref.npy', r); np.save(d + '/out.npy', r + 0.01)",
                                dir.path()}),
            0);
  {
    std::ofstream(dir / "loose.yaml") << "log: {level: warn}\ncompare:\n  default:\n"
                                         "    pass_max_abs_err: 0.05\n";
    std::ofstream(dir / "strict.yaml") << "compare:\n  default: {fail_max_abs_err: 0.005}\n";
    std::ofstream(dir / "typo.yaml") << "compare:\n  default:\n    pass_max_abs_er: 0.05\n";
  }
  auto verdict = [&](std::vector<std::string> args, std::vector<std::string> env = {},
                     std::vector<std::string> more = {}) {
    args.insert(args.begin(), std::string(ANXIN_BINARY_DIR) + "/anxin");
    for (const char* a : {"compare", "ref"}) args.push_back(a);
    args.push_back(dir / "out.npy");
    args.push_back(dir / "ref.npy");
    args.insert(args.end(), more.begin(), more.end());
    auto r = RunCommand(args, {.timeout = std::chrono::seconds(60), .env = std::move(env)});
    EXPECT_TRUE(r.has_value());
    if (!r || r->exit_code > 1)
      return "exit " + std::to_string(r ? r->exit_code : -1) + ": " +
             (r ? r->stderr_text : std::string());
    return nlohmann::json::parse(r->stdout_text)["verdict"].get<std::string>();
  };
  // MaxAbsErr 0.01: a warning by default (>= 0.001), a pass under the loose
  // file, a failure under the strict one.
  EXPECT_EQ(verdict({"--json"}), "warn");
  EXPECT_EQ(verdict({"--json", "--config", dir / "loose.yaml"}), "pass");
  EXPECT_EQ(verdict({"--json"}, {"ANXIN_CONFIG=" + (dir / "loose.yaml")}), "pass");
  EXPECT_EQ(verdict({"--json", "--config", dir / "strict.yaml"}), "fail");
  // --thresholds wins over the configuration file.
  { std::ofstream(dir / "thr.yaml") << "default: {pass_max_abs_err: 0.05}\n"; }
  EXPECT_EQ(
      verdict({"--json", "--config", dir / "strict.yaml"}, {}, {"--thresholds", dir / "thr.yaml"}),
      "pass");
  EXPECT_THAT(verdict({"--json", "--config", dir / "typo.yaml"}),
              AllOf(HasSubstr("typo.yaml:3:5: compare.default: unknown key 'pass_max_abs_er'"),
                    HasSubstr("exit 2")));
  // The same section through the API.
  auto config = LoadGlobalConfig(dir / "loose.yaml");
  ASSERT_THAT(config, IsOk());
  auto section = FindSection(*config, "compare");
  ASSERT_TRUE(section.has_value());
  auto rules = ThresholdRules::FromConfig(*section);
  ASSERT_THAT(rules, IsOk());
  EXPECT_EQ(rules->For("x", DType::kFloat32).pass_max_abs_err, 0.05);
}

TEST(Verdict, DefaultsFollowTheReference) {
  Thresholds t;
  Metrics m;
  m.cosine = 0.995;
  m.max_abs_err = 0.0005;
  EXPECT_EQ(Decide(m, t).verdict, Verdict::kPass);
  m.max_abs_err = 0.002;
  EXPECT_EQ(Decide(m, t).verdict, Verdict::kWarn);
  m.cosine = 0.85;
  auto v = Decide(m, t);
  EXPECT_EQ(v.verdict, Verdict::kFail);
  EXPECT_THAT(v.reasons, ElementsAre("cosine 0.85 <= 0.9", "MaxAbsErr 0.002 >= 0.001"));
  m = Metrics{};
  m.cosine = 1;
  m.nan_mismatch = 2;
  EXPECT_EQ(Decide(m, t).verdict, Verdict::kFail);
  m.nan_mismatch = 0;
  m.cosine = NAN;  // one side all zeros: MaxAbsErr decides
  m.max_abs_err = 1e-9;
  EXPECT_EQ(Decide(m, t).verdict, Verdict::kPass);
}

TEST(Statistics, DiffsAreRelativeToTheLargerMagnitude) {
  StatDiffs d = DiffStats({2, -1, 0, 10}, {1, -1, 0, 8});
  EXPECT_DOUBLE_EQ(d.max, 0.5);
  EXPECT_EQ(d.min, 0);
  EXPECT_EQ(d.mean, 0);
  EXPECT_DOUBLE_EQ(d.norm, 0.2);
  Thresholds t;
  EXPECT_EQ(DecideStats(d, t).verdict, Verdict::kWarn);
  EXPECT_EQ(DecideStats(DiffStats({3, 0, 0, 1}, {1, 0, 0, 1}), t).verdict, Verdict::kFail);
  EXPECT_TRUE(std::isinf(DiffStats({NAN, 0, 0, 0}, {1, 0, 0, 0}).max));
}

// The real statistics dump in tests/fixtures/msprobe: step 0 against step 1.
class MsprobeStatistics : public ::testing::Test {
 protected:
  std::string Step(int s) {
    return std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/msprobe/gpu_dump/step" +
           std::to_string(s) + "/proc2016";
  }
};

// Python's json writes non-finite statistics as bare NaN / Infinity tokens;
// msprobe sometimes as strings. Both are read; a "NaN" inside a name is not
// touched; broken text names the file and the offset.
TEST(MsprobeDumpJson, NonFiniteStatisticsAndBrokenText) {
  const std::string text =
      R"({"task": "statistics", "data": {"Functional.NaN_guard.0.forward": {"input_args": [)"
      R"({"type": "torch.Tensor", "dtype": "torch.float16", "shape": [4], "Max": NaN, )"
      R"("Min": -Infinity, "Mean": Infinity, "Norm": 2.5}], "input_kwargs": {}, "output": [)"
      R"({"type": "torch.Tensor", "dtype": "torch.float16", "shape": [4], "Max": "inf", )"
      R"("Min": "-inf", "Mean": "nan", "Norm": 1}]}}})";
  auto d = ParseMsprobeDump(text, "step0/dump.json", "", {});
  ASSERT_THAT(d, IsOk());
  ASSERT_EQ(d->tensors.size(), 2u);
  EXPECT_EQ(d->tensors[0].name, "Functional.NaN_guard.0.forward.input.0");
  ASSERT_TRUE(d->tensors[0].stats.has_value());
  EXPECT_TRUE(std::isnan(d->tensors[0].stats->max));
  EXPECT_EQ(d->tensors[0].stats->min, -HUGE_VAL);
  EXPECT_EQ(d->tensors[0].stats->mean, HUGE_VAL);
  EXPECT_EQ(d->tensors[0].stats->norm, 2.5);
  ASSERT_TRUE(d->tensors[1].stats.has_value());
  EXPECT_EQ(d->tensors[1].stats->max, HUGE_VAL);
  EXPECT_TRUE(std::isnan(d->tensors[1].stats->mean));
  // Cut anywhere: the offset is where the text ends (the cut point, plus two
  // bytes per quoted NaN or Infinity token before it).
  for (size_t cut = 1; cut < text.size(); cut += 7) {
    auto bad = ParseMsprobeDump(text.substr(0, cut), "step0/dump.json", "", {});
    EXPECT_THAT(bad, HasCode(ErrorCode::kDataLoss, HasSubstr("step0/dump.json: offset "))) << cut;
  }
  EXPECT_THAT(ParseMsprobeDump(text.substr(0, 40), "step0/dump.json", "", {}),
              HasCode(ErrorCode::kDataLoss, HasSubstr("step0/dump.json: offset 40:")));
  EXPECT_THAT(ParseMsprobeDump(R"({"data": {"a": [1, 2}})", "d.json", "", {}),
              HasCode(ErrorCode::kDataLoss, HasSubstr("d.json: offset 20:")));
}

TEST(MsprobeDumpJson, DeepNestingIsAnErrorNotAStackOverflow) {
  // Nested argument lists are walked recursively: a corrupt dump.json with a
  // million levels once overflowed the stack. 64 levels still load.
  auto nested = [](int levels) {
    return std::string(R"({"data": {"op": {"output": )") + std::string(levels, '[') +
           R"({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1, )"
           R"("Min": 1, "Mean": 1, "Norm": 1})" +
           std::string(levels, ']') + "}}}";
  };
  auto ok = ParseMsprobeDump(nested(64), "d.json", "", {});
  ASSERT_THAT(ok, IsOk());
  ASSERT_EQ(ok->tensors.size(), 1u);
  EXPECT_EQ(ok->tensors[0].name.size(), std::string("op.output").size() + 2 * 64);
  EXPECT_THAT(ParseMsprobeDump(nested(65), "d.json", "", {}),
              HasCode(ErrorCode::kDataLoss, HasSubstr("nested more than 64 levels")));
  EXPECT_THAT(ParseMsprobeDump(nested(1'000'000), "d.json", "", {}),
              HasCode(ErrorCode::kDataLoss, HasSubstr("d.json: op.output.0.0.0")));
}

TEST(Construct, ParentsAndTheModulesAroundAnOp) {
  auto parents = ParseMsprobeConstruct(
      R"({"Functional.conv2d.0.forward": "Module.conv1.Conv2d.forward.0",
          "Module.conv1.Conv2d.forward.0": "Module.layer1.Sequential.forward.0",
          "Module.layer1.Sequential.forward.0": null, "odd": 3,
          "Functional.a.0.forward": "Module.x.forward.0", "Module.x.forward.0": "Module.y.forward.0",
          "Module.y.forward.0": "Module.x.forward.0"})",
      "construct.json");
  ASSERT_THAT(parents, IsOk());
  EXPECT_EQ(parents->count("odd"), 0u);
  Dump d;
  d.parents = *parents;
  EXPECT_THAT(EnclosingModules(d, "Functional.conv2d.0.forward"),
              ElementsAre("Module.conv1.Conv2d.forward.0", "Module.layer1.Sequential.forward.0"));
  EXPECT_TRUE(EnclosingModules(d, "Module.layer1.Sequential.forward.0").empty());
  EXPECT_TRUE(EnclosingModules(d, "not there").empty());
  // A cycle ends the walk instead of looping.
  EXPECT_THAT(EnclosingModules(d, "Functional.a.0.forward"),
              ElementsAre("Module.x.forward.0", "Module.y.forward.0"));
  EXPECT_THAT(ParseMsprobeConstruct("{\"a\": ", "c.json"), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(ParseMsprobeConstruct("[]", "c.json"), HasCode(ErrorCode::kDataLoss));
}

// A step directory holding rank dumps below it: each rank's tensors carry
// its directory, and two steps match rank by rank.
TEST_F(MsprobeStatistics, StepDirectoriesLoadEveryRank) {
  const std::string root = std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/msprobe/gpu_dump";
  auto s1 = LoadDump(root + "/step1", {});
  auto s0 = LoadDump(root + "/step0", {});
  auto r0 = LoadDump(root + "/step0/proc2016", {});
  ASSERT_THAT(s1, IsOk());
  ASSERT_THAT(s0, IsOk());
  ASSERT_THAT(r0, IsOk());
  EXPECT_EQ(s0->kind, "msprobe");
  EXPECT_EQ(s0->task, "statistics");
  ASSERT_EQ(s0->tensors.size(), r0->tensors.size());
  EXPECT_EQ(s0->tensors[0].name, "proc2016/" + r0->tensors[0].name);
  EXPECT_EQ(s0->tensors[0].op, "proc2016/" + r0->tensors[0].op);
  CompareOptions fuzzy;
  fuzzy.match.fuzzy = true;
  CompareReport r = CompareDumps(*s1, *s0, fuzzy);
  EXPECT_TRUE(r.unmatched_out.empty());
  EXPECT_EQ(r.pairs.size(), s1->tensors.size());
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_EQ(r.pairs[*r.first_divergence].name, "proc2016/Functional.conv2d.0.forward.input.1");
  EXPECT_THAT(r.first_divergence_modules, ElementsAre("proc2016/Module.conv1.Conv2d.forward.0"));
  EXPECT_FALSE(r.first_divergence_stack.empty());
}

TEST_F(MsprobeStatistics, StepZeroAgainstStepOne) {
  auto s0 = LoadDump(Step(0), {});
  auto s1 = LoadDump(Step(1), {});
  ASSERT_THAT(s0, IsOk());
  ASSERT_THAT(s1, IsOk());
  EXPECT_EQ(s0->kind, "msprobe");
  EXPECT_EQ(s0->task, "statistics");
  ASSERT_GT(s0->tensors.size(), 1000u);
  EXPECT_EQ(s0->tensors[0].name, "Functional.conv2d.0.forward.input.0");
  EXPECT_EQ(s0->tensors[1].name, "Functional.conv2d.0.forward.input.1");
  EXPECT_EQ(s0->tensors[2].name, "Functional.conv2d.0.forward.output.0");  // null, ints skipped
  EXPECT_FALSE(s0->stacks.empty());

  CompareReport same = CompareDumps(*s0, *s0, {});
  EXPECT_EQ(same.pairs.size(), s0->tensors.size());
  EXPECT_EQ(same.pass, same.pairs.size());
  EXPECT_FALSE(same.first_divergence.has_value());

  // Parameter gradients carry the step as call index: exact names differ...
  CompareReport exact = CompareDumps(*s1, *s0, {});
  ASSERT_FALSE(exact.unmatched_out.empty());
  EXPECT_THAT(exact.unmatched_out[0], HasSubstr(".parameters_grad.1."));
  EXPECT_EQ(exact.unmatched_out.size(), exact.unmatched_ref.size());
  // ...and fuzzy mode pairs them.
  CompareOptions fuzzy;
  fuzzy.match.fuzzy = true;
  CompareReport r = CompareDumps(*s1, *s0, fuzzy);
  EXPECT_EQ(r.pass + r.warn + r.fail, r.pairs.size());
  EXPECT_TRUE(r.unmatched_out.empty());
  EXPECT_TRUE(r.unmatched_ref.empty());
  EXPECT_EQ(r.pairs.size(), s1->tensors.size());
  for (const PairResult& p : r.pairs) ASSERT_EQ(p.mode, PairMode::kStatistics) << p.name;
  // The input images are the same batch in both steps...
  EXPECT_EQ(r.pairs[0].verdict, Verdict::kPass);
  // ...the weights moved after one optimizer step.
  EXPECT_GT(r.warn + r.fail, 0u);
  ASSERT_TRUE(r.first_divergence.has_value());
  const PairResult& first = r.pairs[*r.first_divergence];
  for (size_t i = 0; i < *r.first_divergence; ++i)
    EXPECT_NE(r.pairs[i].verdict, first.verdict) << r.pairs[i].name;
  EXPECT_FALSE(r.first_divergence_stack.empty()) << first.op;
  // construct.json of the real dump: the first weight read is conv1's.
  EXPECT_EQ(first.op, "Functional.conv2d.0.forward");
  EXPECT_THAT(r.first_divergence_modules, ElementsAre("Module.conv1.Conv2d.forward.0"));
  // Check one difference by hand from the two dump.json files.
  const Tensor& a = s1->tensors[1];
  const Tensor& b = s0->tensors[1];
  double want = std::fabs(a.stats->norm - b.stats->norm) /
                std::fmax(std::fabs(a.stats->norm), std::fabs(b.stats->norm));
  EXPECT_DOUBLE_EQ(r.pairs[1].stat_diffs->norm, want);
}

class MsprobeTensors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    ASSERT_EQ(testing::RunPython({testing::FixturePath("msprobe_cases.py"), dir_->path()}), 0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static testing::ScratchDir* dir_;
};
testing::ScratchDir* MsprobeTensors::dir_ = nullptr;

TEST_F(MsprobeTensors, FindsTheFirstDivergingOpWithItsStack) {
  auto npu = LoadDump(*dir_ / "npu", {});
  auto gpu = LoadDump(*dir_ / "gpu", {});
  ASSERT_THAT(npu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  CompareOptions opts;
  ASSERT_THAT(LoadRenames(*dir_ / "map.yaml"), IsOk());
  opts.match.renames = *LoadRenames(*dir_ / "map.yaml");
  CompareReport r = CompareDumps(*npu, *gpu, opts);
  EXPECT_TRUE(r.unmatched_out.empty());
  EXPECT_TRUE(r.unmatched_ref.empty());
  ASSERT_TRUE(r.first_divergence.has_value());
  const PairResult& p = r.pairs[*r.first_divergence];
  EXPECT_EQ(p.name, "Functional.softmax.0.forward.output.0");
  EXPECT_EQ(p.out_dtype, "bfloat16");  // raw <V2 read as dump.json says
  EXPECT_EQ(p.verdict, Verdict::kFail);
  EXPECT_THAT(r.first_divergence_stack,
              ElementsAre(HasSubstr("model.py, line 13"), HasSubstr("train.py, line 42")));
  // construct.json: the module calls it ran in, innermost first.
  EXPECT_THAT(r.first_divergence_modules,
              ElementsAre("Module.act.Softmax.forward.0", "Module.net.Net.forward.0"));
  // Tensors before it pass; nested list arguments got their own names.
  EXPECT_EQ(r.pairs[0].verdict, Verdict::kPass);
  bool nested = false;
  for (const auto& q : r.pairs) nested |= q.name == "Tensor.add.0.forward.input.0.1";
  EXPECT_TRUE(nested);

  // Without the rename file the renamed layer is listed on both sides.
  CompareReport plain = CompareDumps(*npu, *gpu, {});
  EXPECT_THAT(plain.unmatched_out, Contains(HasSubstr("Module.head.Linear")));
  EXPECT_THAT(plain.unmatched_ref, Contains(HasSubstr("Module.fc2.Linear")));
}

// Four ranks per side: pairs per rank, ranks in number order, the first
// divergence in rank order with its own stack and modules, renames applied.
TEST_F(MsprobeTensors, DumpTreesCompareRankByRank) {
  namespace fs = std::filesystem;
  testing::ScratchDir t;
  for (const char* side : {"npu", "gpu"})
    for (const char* rank : {"rank0", "rank1", "rank10", "rank2"}) {
      const fs::path step = fs::path(t.path()) / side / "step0";
      fs::create_directories(step);
      fs::copy(*dir_ / side, step / rank, fs::copy_options::recursive);
    }
  auto npu = LoadDump(t / "npu", {});
  auto gpu = LoadDump(t / "gpu", {});
  ASSERT_THAT(npu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  auto one = LoadDump(*dir_ / "npu", {});
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ(npu->tensors.size(), 4 * one->tensors.size());
  // Ranks in number order: 0, 1, 2, 10.
  EXPECT_EQ(npu->tensors[2 * one->tensors.size()].name.rfind("step0/rank2/", 0), 0u);
  EXPECT_EQ(npu->tensors.back().name.rfind("step0/rank10/", 0), 0u);
  CompareOptions opts;
  opts.match.renames = *LoadRenames(*dir_ / "map.yaml");
  CompareReport r = CompareDumps(*npu, *gpu, opts);
  EXPECT_TRUE(r.unmatched_out.empty());
  EXPECT_TRUE(r.unmatched_ref.empty());
  EXPECT_EQ(r.fail, 16u);  // four per rank
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_EQ(r.pairs[*r.first_divergence].name, "step0/rank0/Functional.softmax.0.forward.output.0");
  EXPECT_THAT(r.first_divergence_modules, ElementsAre("step0/rank0/Module.act.Softmax.forward.0",
                                                      "step0/rank0/Module.net.Net.forward.0"));
  EXPECT_THAT(r.first_divergence_stack, Contains(HasSubstr("model.py, line 13")));
  EXPECT_EQ(r.pairs.back().name.rfind("step0/rank10/", 0), 0u) << r.pairs.back().name;
}

// A dump copied in part: a tensor file dump.json names is missing. Its pair is
// compared on dump.json's statistics, never passes, and says why; a file that
// is there but broken still stops the comparison.
TEST_F(MsprobeTensors, AMissingTensorFileFallsBackToItsStatistics) {
  namespace fs = std::filesystem;
  testing::ScratchDir t;
  const fs::path npu = fs::path(t.path()) / "npu";
  fs::copy(*dir_ / "npu", npu, fs::copy_options::recursive);
  const std::string gone =
      (npu / "dump_tensor_data/Functional.relu.0.forward.output.0.npy").string();
  fs::remove(gone);
  auto out = LoadDump(npu.string(), {});
  auto ref = LoadDump(*dir_ / "gpu", {});
  ASSERT_THAT(out, IsOk());
  ASSERT_THAT(ref, IsOk());
  CompareReport r = CompareDumps(*out, *ref, {});
  const PairResult* p = nullptr;
  for (const auto& q : r.pairs)
    if (q.name == "Functional.relu.0.forward.output.0") p = &q;
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->mode, PairMode::kStatistics);
  EXPECT_EQ(p->verdict, Verdict::kWarn);  // the statistics agree, the data is missing
  EXPECT_THAT(p->reasons, Contains(AllOf(HasSubstr("output tensor file missing: " + gone),
                                         HasSubstr("compared on the dump.json statistics"))));
  std::ofstream(gone, std::ios::binary) << "\x93NUMPY";
  EXPECT_THAT(LoadDump(npu.string(), {}), HasCode(ErrorCode::kDataLoss, HasSubstr(gone)));
}

TEST_F(MsprobeTensors, ProgressCountsEveryByteAndTensorOnce) {
  auto npu = LoadDump(*dir_ / "npu", {});
  auto gpu = LoadDump(*dir_ / "gpu", {});
  ASSERT_THAT(npu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  std::vector<CompareProgress> seen;
  CompareOptions opts;
  opts.threads = 2;
  opts.progress_interval = std::chrono::milliseconds(0);  // every item
  opts.on_progress = [&](const CompareProgress& p) { seen.push_back(p); };
  CompareReport r = CompareDumps(*npu, *gpu, opts);
  ASSERT_GE(seen.size(), 2u);  // at least one update and the final state
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
    EXPECT_GE(seen[i].tensors_done, seen[i - 1].tensors_done);
    EXPECT_GE(seen[i].seconds, seen[i - 1].seconds);
  }
  const CompareProgress& last = seen.back();
  EXPECT_EQ(last.bytes_done, last.bytes_total);
  EXPECT_EQ(last.bytes_total, r.bytes_compared);
  EXPECT_EQ(last.tensors_done, last.tensors_total);
  EXPECT_EQ(last.tensors_total, r.pairs.size());

  // Work that ends within the interval reports its final state only.
  seen.clear();
  opts.progress_interval = std::chrono::hours(1);
  CompareDumps(*npu, *gpu, opts);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].bytes_done, r.bytes_compared);

  // The report gives the threads that ran: never more than pieces of work,
  // whatever was asked for.
  EXPECT_EQ(r.threads, 2u);
  opts.threads = 100'000;
  CompareReport many = CompareDumps(*npu, *gpu, opts);
  EXPECT_GT(many.threads, 2u);
  EXPECT_LE(many.threads, many.pairs.size());
}

TEST_F(MsprobeTensors, ReportsRenderEveryPair) {
  auto npu = LoadDump(*dir_ / "npu", {});
  auto gpu = LoadDump(*dir_ / "gpu", {});
  ASSERT_THAT(npu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  CompareReport r = CompareDumps(*npu, *gpu, {});
  std::string html = RenderHtml(r);
  EXPECT_THAT(html, HasSubstr("<svg"));
  EXPECT_THAT(html, HasSubstr("first divergence"));
  EXPECT_THAT(html, HasSubstr("Functional.softmax.0.forward.output.0"));
  EXPECT_THAT(html, HasSubstr("<br>in <code>Module.act.Softmax.forward.0</code> &lt; "
                              "<code>Module.net.Net.forward.0</code>"));
  EXPECT_THAT(html, HasSubstr("addEventListener('click'"));
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, Not(HasSubstr(" src=")));
  std::string csv = RenderCsv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), static_cast<long>(r.pairs.size() + 1));
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["summary"]["fail"].get<size_t>(), r.fail);
  EXPECT_EQ(j["pairs"].size(), r.pairs.size());
  EXPECT_EQ(j["first_divergence"]["name"], "Functional.softmax.0.forward.output.0");
  std::vector<size_t> worst = r.WorstFirst();
  EXPECT_EQ(r.pairs[worst[0]].verdict, Verdict::kFail);
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  PrintTable(r, f, 5);
  std::fclose(f);
  std::string table(buf, len);
  std::free(buf);
  EXPECT_THAT(table, HasSubstr("first divergence"));
  EXPECT_THAT(table, HasSubstr("more pairs"));
}

// The table's columns line up on every row whatever the width of a value:
// the drifting float32 pairs have ULP errors of 7.93317e+07, wider than the
// MAX_ULP heading, and the renamed layer's dtypes differ in no way from the
// rest. Each column starts where its heading starts, after a blank, and no
// line ends in blanks.
TEST_F(MsprobeTensors, TableColumnsLineUpWhateverTheirWidth) {
  auto npu = LoadDump(*dir_ / "npu", {});
  auto gpu = LoadDump(*dir_ / "gpu", {});
  ASSERT_THAT(npu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  CompareOptions opts;
  opts.match.renames = *LoadRenames(*dir_ / "map.yaml");
  CompareReport r = CompareDumps(*npu, *gpu, opts);
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  PrintTable(r, f, 0);
  std::fclose(f);
  std::string table(buf, len);
  std::free(buf);
  ASSERT_THAT(table, HasSubstr("7.93317e+07"));
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = table.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(table.substr(at, nl - at));
  ASSERT_GT(lines.size(), r.pairs.size());
  const std::string& head = lines[0];
  std::vector<size_t> starts;
  for (const char* col :
       {"NAME", "DTYPE", "COSINE", "MAX_ABS", "MAX_REL", "1/1000", "MAX_ULP", "WHY"}) {
    size_t at = head.find(std::string(" ") + col);
    ASSERT_NE(at, std::string::npos) << col;
    starts.push_back(at + 1);
  }
  for (size_t i = 0; i <= r.pairs.size(); ++i) {
    const std::string& line = lines[i];
    SCOPED_TRACE(line);
    EXPECT_NE(line.back(), ' ');
    for (size_t k = 0; k < starts.size(); ++k) {
      // WHY is empty for a passing pair.
      if (k + 1 == starts.size() && line.size() <= starts[k]) continue;
      ASSERT_GT(line.size(), starts[k]);
      EXPECT_EQ(line[starts[k] - 1], ' ') << "column " << k + 1;
      EXPECT_NE(line[starts[k]], ' ') << "column " << k + 1;
    }
  }
}

// Many pairs: the HTML page keeps the worst kHtmlRows in its table, in
// execution order, and draws at most 4000 chart points, so it stays a few MB.
TEST(Html, LargeReportsKeepTheWorstRowsAndABoundedChart) {
  CompareReport r;
  const size_t n = 20000;
  for (size_t i = 0; i < n; ++i) {
    PairResult p;
    p.name = "Functional.op." + std::to_string(i) + ".forward.output.0";
    p.out_dtype = p.ref_dtype = "float32";
    Metrics m;
    m.cosine = 1;
    m.max_abs_err = 1e-6 * static_cast<double>(i % 100 + 1);
    p.metrics = m;
    p.verdict = i % 7 == 3 ? Verdict::kFail : Verdict::kPass;
    if (p.verdict == Verdict::kFail)
      ++r.fail;
    else
      ++r.pass;
    r.pairs.push_back(std::move(p));
  }
  r.first_divergence = 3;
  auto count = [](const std::string& h, const std::string& what) {
    size_t c = 0;
    for (size_t at = h.find(what); at != std::string::npos; at = h.find(what, at + 1)) ++c;
    return c;
  };
  std::string h = RenderHtml(r);
  EXPECT_EQ(count(h, "<tr>"), kHtmlRows + 1);  // with the header row
  EXPECT_THAT(h, HasSubstr("The table holds the 5000 worst of the 20000 pairs"));
  EXPECT_THAT(h, HasSubstr("each point the worst of 5 pairs"));
  // One mark per run of 5 with a fail in it: 5 of every 7 runs.
  EXPECT_LE(count(h, "<circle"), 4000u);
  EXPECT_GT(count(h, "<circle"), 2800u);
  // The failing pairs made the table (every 25th checked), the first one leading it.
  for (size_t i = 3; i < n; i += 7 * 25)
    EXPECT_THAT(h, HasSubstr(">" + r.pairs[i].name + "<")) << i;
  EXPECT_LT(h.find(">Functional.op.3.forward"), h.find(">Functional.op.10.forward"));
  EXPECT_LT(h.size(), size_t{8} << 20);
  // 0 rows: no limit.
  EXPECT_EQ(count(RenderHtml(r, 0), "<tr>"), n + 1);
}

// WriteJson writes the pairs' text directly; it must be ToJson's dump(2) byte
// for byte (sorted keys, nlohmann's number and string forms): for tensor
// pairs, statistics-mode pairs (the real msprobe dump), an empty report, and
// pairs with renamed references, non-finite numbers, empty shapes, missing
// metrics and strings that need escaping; and the values must come through.
TEST_F(MsprobeTensors, StreamedJsonIsTheSameText) {
  auto npu = LoadDump(*dir_ / "npu", {});
  auto gpu = LoadDump(*dir_ / "gpu", {});
  ASSERT_THAT(npu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  const std::string stats_dir =
      std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/msprobe/gpu_dump/step";
  auto s0 = LoadDump(stats_dir + "0/proc2016", {});
  auto s1 = LoadDump(stats_dir + "1/proc2016", {});
  ASSERT_THAT(s0, IsOk());
  ASSERT_THAT(s1, IsOk());
  CompareReport odd = CompareDumps(*npu, *gpu, {});
  ASSERT_GE(odd.pairs.size(), 2u);
  odd.pairs[0].ref_name = "renamed \"layer\" \\ \u00e9\t";
  odd.pairs[0].reasons = {"a \"quoted\" reason", "\x01 control"};
  odd.pairs[0].out_shape.clear();
  odd.pairs[0].metrics->cosine = NAN;
  odd.pairs[0].metrics->max_rel_err = HUGE_VAL;
  odd.pairs[0].metrics->mean_abs_err = -HUGE_VAL;
  odd.pairs[0].metrics->max_ulp_err.reset();
  odd.pairs[0].metrics->ulp_above_one_ratio.reset();
  odd.pairs[0].metrics->rmse = 1e-300;
  odd.pairs[0].metrics->euclidean_distance = 123456789012345.0;
  odd.pairs[1].metrics.reset();
  odd.pairs[1].out_stats.reset();
  const std::vector<CompareReport> reports{CompareDumps(*npu, *gpu, {}), CompareDumps(*s0, *s1, {}),
                                           odd, CompareReport{}};
  for (const CompareReport& r : reports) {
    char* buf = nullptr;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    WriteJson(r, f);
    std::fclose(f);
    std::string streamed(buf, len);
    std::free(buf);
    EXPECT_EQ(streamed, ToJson(r).dump(2));
  }
  // ToJson reads the same text back: the values come through as written.
  const nlohmann::json j = ToJson(odd);
  const nlohmann::json& p0 = j["pairs"][0];
  EXPECT_EQ(p0["ref_name"], odd.pairs[0].ref_name);
  EXPECT_EQ(p0["reasons"][0], "a \"quoted\" reason");
  EXPECT_EQ(p0["out_shape"], nlohmann::json::array());
  EXPECT_EQ(p0["metrics"]["cosine"], "nan");
  EXPECT_EQ(p0["metrics"]["max_rel_err"], "inf");
  EXPECT_EQ(p0["metrics"]["mean_abs_err"], "-inf");
  EXPECT_TRUE(p0["metrics"]["max_ulp_err"].is_null());
  EXPECT_EQ(p0["metrics"]["rmse"].get<double>(), 1e-300);
  EXPECT_EQ(p0["metrics"]["euclidean_distance"].get<double>(), 123456789012345.0);
  EXPECT_EQ(p0["metrics"]["elements"].get<uint64_t>(), odd.pairs[0].metrics->elements);
  EXPECT_EQ(p0["metrics"]["allclose_rtol"].get<double>(), odd.pairs[0].metrics->allclose_rtol);
  EXPECT_EQ(p0["out_stats"]["max"].get<double>(), odd.pairs[0].out_stats->max);
  EXPECT_EQ(p0["verdict"], std::string(VerdictName(odd.pairs[0].verdict)));
  EXPECT_EQ(p0["order"].get<size_t>(), 0u);
  EXPECT_TRUE(j["pairs"][1]["metrics"].is_null());
  EXPECT_TRUE(j["pairs"][1]["out_stats"].is_null());
  EXPECT_EQ(MetricsToJson(*odd.pairs[0].metrics), p0["metrics"]);
}

}  // namespace
}  // namespace anxin::compare
