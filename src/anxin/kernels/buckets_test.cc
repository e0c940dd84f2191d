#include "anxin/kernels/buckets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin::kernels {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

TEST(ParseLengths, ReadsNumbersCsvAndJsonLines) {
  auto n = ParseLengths("700\n\n# comment\n1200\r\n700\n", "a.txt");
  ASSERT_THAT(n, IsOk());
  EXPECT_EQ(n->format, "numbers");
  EXPECT_EQ(n->lengths, (std::vector<int64_t>{700, 1200}));
  EXPECT_EQ(n->counts, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(n->tokens, 2600u);

  auto c = ParseLengths("length,count\n512,10\n128,3\n512,1\n", "h.csv");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->format, "csv");
  EXPECT_EQ(c->lengths, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(c->counts, (std::vector<uint64_t>{3, 11}));

  auto j = ParseLengths("{\"length\": 9}\n{\"input_ids\": [1, 2, 3]}\n{\"num_tokens\": 9.0}\n",
                        "d.jsonl");
  ASSERT_THAT(j, IsOk());
  EXPECT_EQ(j->format, "jsonl");
  EXPECT_EQ(j->lengths, (std::vector<int64_t>{3, 9}));
  EXPECT_EQ(j->counts, (std::vector<uint64_t>{1, 2}));
}

TEST(ParseLengths, BadInputNamesTheLine) {
  EXPECT_THAT(ParseLengths("", "e.txt"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("e.txt")));
  EXPECT_THAT(ParseLengths("\n# only a comment\n", "e.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no lengths")));
  EXPECT_THAT(ParseLengths("5\n-3\n", "n.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("n.txt:2: '-3' is negative")));
  EXPECT_THAT(ParseLengths("5\n6\nabc\n", "n.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("n.txt:3: 'abc' is not a number")));
  EXPECT_THAT(ParseLengths("5\n1.5\n", "n.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("n.txt:2")));
  EXPECT_THAT(ParseLengths("1,2\n3,x\n", "h.csv"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("h.csv:2: count")));
  EXPECT_THAT(ParseLengths("1,2,3\n", "h.csv"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("h.csv:1: 3 fields")));
  EXPECT_THAT(ParseLengths("{\"length\": 3}\n{\"text\": \"hi\"}\n", "d.jsonl"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("d.jsonl:2: no length field")));
  EXPECT_THAT(ParseLengths("{\"length\": -1}\n", "d.jsonl"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("d.jsonl:1")));
  EXPECT_THAT(ParseLengths("{\"length\": 3\n", "d.jsonl"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("d.jsonl:1: not valid JSON")));
}

// CRLF line ends and a last line without '\n', in each format; the fast path
// for plain records and the general one (white space, comments) agree.
TEST(ParseLengths, CrLfNoFinalNewlineAndWhiteSpaceInEveryFormat) {
  auto n = ParseLengths("5\r\n  6\t\r\n\r\n# c\r\n7", "n.txt");
  ASSERT_THAT(n, IsOk());
  EXPECT_EQ(n->lengths, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(n->counts, (std::vector<uint64_t>{1, 1, 1}));
  auto c = ParseLengths("length,count\r\n5,2\r\n 6 , 1 \r\n5,1", "h.csv");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->lengths, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(c->counts, (std::vector<uint64_t>{3, 1}));
  auto j =
      ParseLengths("{\"length\": 5}\r\n\r\n  {\"input_ids\": [1, 2]}  \r\n{\"len\":5}", "d.jsonl");
  ASSERT_THAT(j, IsOk());
  EXPECT_EQ(j->lengths, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(j->counts, (std::vector<uint64_t>{1, 2}));
  // Lengths past the dense table (2^24) join the others in order.
  auto big = ParseLengths("20000000\n5\n20000000\n16777216\n", "b.txt");
  ASSERT_THAT(big, IsOk());
  EXPECT_EQ(big->lengths, (std::vector<int64_t>{5, 16777216, 20000000}));
  EXPECT_EQ(big->counts, (std::vector<uint64_t>{1, 1, 2}));
  EXPECT_EQ(big->tokens, 5u + 16777216u + 40000000u);
}

// Thousands of plain records (the fast path) and then a bad one: the error
// names its line, counting blank lines, comments and CRLF lines.
TEST(ParseLengths, ErrorsAfterManyRecordsNameTheRightLine) {
  struct Case {
    std::string record, bad, want;
  };
  const Case cases[] = {
      {"1834", "-4", "'-4' is negative"},
      {"1834", "12x", "'12x' is not a number"},
      {"1834,3", "1834,-1", "count: '-1' is negative"},
      {"1834,3", "1834,3,4", "3 fields"},
      {"{\"length\": 1834}", "{\"length\": -1}", "\"length\" is -1"},
      {"{\"length\": 1834}", "{\"length\": 5", "not valid JSON"},
      {"{\"input_ids\": [1, 2]}", "{\"text\": \"no length\"}", "no length field"},
  };
  for (const Case& c : cases) {
    std::string text;
    size_t line = 0;
    for (int i = 0; i < 3000; ++i) {
      text += c.record + (i % 2 ? "\r\n" : "\n");
      ++line;
      if (i % 500 == 0) {
        text += "\n# comment\n";
        line += 2;
      }
    }
    text += c.bad + "\r\n" + c.record + "\n";
    ++line;
    std::string want = "f:" + std::to_string(line) + ": ";
    EXPECT_THAT(ParseLengths(text, "f"), HasCode(ErrorCode::kInvalidArgument, HasSubstr(want)))
        << c.bad;
    EXPECT_THAT(ParseLengths(text, "f"), HasCode(ErrorCode::kInvalidArgument, HasSubstr(c.want)))
        << c.bad;
    // Without a final newline the bad line is the last.
    EXPECT_THAT(ParseLengths(text.substr(0, text.size() - c.record.size() - 3), "f"),
                HasCode(ErrorCode::kInvalidArgument, HasSubstr(want)))
        << c.bad;
  }
}

// The file reader (blocks of 1 MiB) and the in-memory parser give the same
// histogram, and a bad line deep in the file is named by its number.
TEST(ReadLengths, FileInBlocksMatchesTextAndNamesTheLine) {
  testing::TempDir dir;
  std::mt19937_64 rng(3);
  std::string numbers, jsonl;
  for (int i = 0; i < 200000; ++i) {
    int64_t len = static_cast<int64_t>(rng() % 40000);
    numbers += std::to_string(len) + (i % 7 == 0 ? "\r\n" : "\n");
    jsonl += "{\"id\": " + std::to_string(i) +
             ", \"text\": \"a \\\"b\\\" c\", \"length\": " + std::to_string(len) + "}\n";
  }
  ASSERT_GT(jsonl.size(), 3 * (size_t{1} << 20));
  for (const std::string* text : {&numbers, &jsonl}) {
    std::string path = dir.Write("lengths", *text);
    auto from_file = ReadLengths(path);
    auto from_text = ParseLengths(*text, path);
    ASSERT_THAT(from_file, IsOk());
    ASSERT_THAT(from_text, IsOk());
    EXPECT_EQ(from_file->lengths, from_text->lengths);
    EXPECT_EQ(from_file->counts, from_text->counts);
    EXPECT_EQ(from_file->sequences, 200000u);
    EXPECT_EQ(from_file->tokens, from_text->tokens);
    EXPECT_EQ(from_file->format, from_text->format);
    std::string bad =
        *text + (text == &numbers ? "7\n-3\n" : "{\"length\": 7}\n{\"length\": -3}\n");
    path = dir.Write("bad", bad);
    EXPECT_THAT(ReadLengths(path),
                HasCode(ErrorCode::kInvalidArgument, HasSubstr(path + ":200002: ")));
  }
  EXPECT_THAT(ReadLengths(dir.Write("empty", "")),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("the file is empty")));
  EXPECT_THAT(ReadLengths(dir / "missing"), HasCode(ErrorCode::kNotFound, HasSubstr("--lengths")));
}

// Both readers of a JSON Lines record must give the same length or the same
// error: checks JsonLineLength (scan, else document) against the document alone.
void ExpectSameAsDocument(const std::string& line, int* scanned) {
  auto doc = internal::JsonLineLengthByDocument(line, "d.jsonl:1");
  auto fast = internal::JsonLineLength(line, "d.jsonl:1");
  std::optional<int64_t> scan = internal::ScanJsonLength(line);
  if (scan) {
    ++*scanned;
    ASSERT_TRUE(doc.has_value()) << line << "\nscan: " << *scan
                                 << ", document: " << doc.error().ToString();
    ASSERT_EQ(*scan, *doc) << line;
  }
  ASSERT_EQ(fast.has_value(), doc.has_value()) << line;
  if (doc) {
    ASSERT_EQ(*fast, *doc) << line;
  } else {
    ASSERT_EQ(fast.error().ToString(), doc.error().ToString()) << line;
  }
}

TEST(JsonLineLength, ScanAgreesWithTheDocumentOnTrickyLines) {
  struct Case {
    std::string line;
    std::optional<int64_t> scan;  // what the scan alone must find
  };
  const Case cases[] = {
      {R"({"length": 5})", 5},
      {R"({"length":0})", 0},
      {R"({ "length" :	5 , "a" : [ ] , "b" : { } })", 5},
      {R"({"meta": {"length": 99}, "length": 5})", 5},
      {R"({"meta": {"length": 99}})", std::nullopt},
      {R"({"text": "say \"length\": 7", "length": 5})", 5},
      {R"({"text": "\\", "length": 5})", 5},
      {R"({"text": "\u00e9\u4e2d\n\t\/\b\f\r", "length": 5})", 5},
      {"{\"text\": \"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\", \"length\": 5}", 5},
      {R"({"length": 5, "length": 7})", 7},
      {R"({"length": "x", "length": 7})", 7},
      {R"({"length": 7, "length": "x"})", std::nullopt},
      {R"({"length": -3})", std::nullopt},
      {R"({"length": -0})", std::nullopt},
      {R"({"length": 1e3})", std::nullopt},
      {R"({"length": 9.0})", std::nullopt},
      {R"({"length": 9.5})", std::nullopt},
      {R"({"length": 01})", std::nullopt},
      {R"({"length": 123456789012345678})", 123456789012345678},
      {R"({"length": 9223372036854775807})", std::nullopt},
      {R"({"length": 18446744073709551615})", std::nullopt},
      {R"({"length": 123456789012345678901234567890})", std::nullopt},
      {R"({"length": null, "input_ids": [1]})", std::nullopt},
      {R"({"length": 5, "input_ids": "x"})", 5},
      {R"({"input_ids": [1, 2, 3], "len": 2})", 2},
      {R"({"tokens": [1, 2], "input_ids": [1, 2, 3]})", 3},
      {R"({"input_ids": []})", 0},
      {R"({"input_ids": [[1, 2], [3], []]})", 3},
      {R"({"input_ids": [1, -2.5e3, "a,b]", null, true, false, {"ids": [1, 2, 3]}]})", 7},
      {R"({"input_ids": 5})", std::nullopt},
      {R"({"input_ids": [1, 2,]})", std::nullopt},
      {R"({"input_ids": [1 2]})", std::nullopt},
      {R"({"len\u0067th": 5})", std::nullopt},
      {R"({"x": 1e999, "length": 5})", std::nullopt},
      {R"({"x": -1e-5, "length": 5})", 5},
      {R"({"x": 1.5E+3, "y": -0.0, "z": 0e0, "length": 5})", 5},
      {R"({"x": "\ud83d\ude00", "length": 5})", std::nullopt},
      {R"({"x": "\ud800", "length": 5})", std::nullopt},
      {R"({"x": "\u12", "length": 5})", std::nullopt},
      {R"({"x": "\q", "length": 5})", std::nullopt},
      {"{\"x\": \"\xff\", \"length\": 5}", std::nullopt},
      {"{\"x\": \"\xc0\xaf\", \"length\": 5}", std::nullopt},
      {"{\"x\": \"\xed\xa0\x80\", \"length\": 5}", std::nullopt},
      {"{\"x\": \"tab\there\", \"length\": 5}", std::nullopt},
      {"{\"x\": \"del\x7f\", \"length\": 5}", 5},
      {R"({"x": tru, "length": 5})", std::nullopt},
      {R"({"x": nul, "length": 5})", std::nullopt},
      {R"({"x": 1., "length": 5})", std::nullopt},
      {R"({"x": .5, "length": 5})", std::nullopt},
      {R"({"x": +1, "length": 5})", std::nullopt},
      {R"({"x": 1e, "length": 5})", std::nullopt},
      {R"({"x": -, "length": 5})", std::nullopt},
      {R"({"x": [1, {"a": [}], "length": 5})", std::nullopt},
      {R"({"length": 5} x)", std::nullopt},
      {R"({"length": 5}{"length": 6})", std::nullopt},
      {R"({"length": 5,})", std::nullopt},
      {R"({"length" 5})", std::nullopt},
      {R"({'length': 5})", std::nullopt},
      {R"({length: 5})", std::nullopt},
      {R"({"length": 5)", std::nullopt},
      {R"({"length": 5} // note)", std::nullopt},
      {R"({})", std::nullopt},
      {R"({"Length": 5})", std::nullopt},
      {R"([{"length": 5}])", std::nullopt},
      {"\xef\xbb\xbf{\"length\": 5}", std::nullopt},
      {std::string("{\"length\": 5}\0", 14), std::nullopt},
      {"{\"x\": " + std::string(100, '[') + std::string(100, ']') + ", \"length\": 5}",
       std::nullopt},
      {"{\"x\": " + std::string(30, '[') + std::string(30, ']') + ", \"length\": 5}", 5},
  };
  int scanned = 0;
  for (const Case& c : cases) {
    EXPECT_EQ(internal::ScanJsonLength(c.line), c.scan) << c.line;
    ExpectSameAsDocument(c.line, &scanned);
  }
}

// Random records (nested objects with the length keys, duplicate keys,
// strings with escapes and UTF-8, numbers of every form, white space), half
// of them then damaged by a random edit: the scan finds most lengths of the
// valid ones, and scan-or-document gives exactly the document's answer.
class RandomJson {
 public:
  explicit RandomJson(uint64_t seed) : rng_(seed) {}
  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }

  std::string Space() {
    static const char* kSpace[] = {"", "", "", " ", "  ", "\t", " \r\n "};
    return kSpace[Pick(7)];
  }
  std::string Key() {
    static const char* kKeys[] = {"length",
                                  "len",
                                  "num_tokens",
                                  "n_tokens",
                                  "seq_len",
                                  "sequence_length",
                                  "input_ids",
                                  "token_ids",
                                  "tokens",
                                  "ids",
                                  "text",
                                  "id",
                                  "meta",
                                  "Length",
                                  "lengths",
                                  "len\\u0067th",
                                  "in\\\"put",
                                  "",
                                  "\xc3\xa9t\xc3\xa9"};
    return "\"" + std::string(kKeys[Pick(19)]) + "\"";
  }
  std::string Number() {
    switch (Pick(9)) {
      case 0:
        return std::to_string(rng_() % 50000);
      case 1:
        return "-" + std::to_string(rng_() % 100);
      case 2:
        return std::to_string(rng_() % 100) + "." + std::to_string(rng_() % 100);
      case 3:
        return std::to_string(rng_() % 10) + (Pick(2) ? "e" : "E") +
               (Pick(3) == 0 ? "-"
                : Pick(2)    ? "+"
                             : "") +
               std::to_string(rng_() % 400);
      case 4:
        return std::to_string(rng_());  // up to 20 digits
      case 5:
        return "0";
      case 6:
        return "-0.0";
      case 7:
        return std::to_string(rng_() % 1000) + ".0";
      default:
        return std::to_string(rng_() % 2000);
    }
  }
  std::string String() {
    static const char* kParts[] = {"a",
                                   "length",
                                   "\\\"",
                                   "\\\\",
                                   "\\n",
                                   "\\u00e9",
                                   "\\ud83d\\ude00",
                                   "\xc3\xa9",
                                   "\xe4\xb8\xad",
                                   " ",
                                   ",",
                                   ":",
                                   "{",
                                   "}",
                                   "[",
                                   "]",
                                   "\\/",
                                   "x y"};
    std::string s = "\"";
    for (size_t i = Pick(5); i > 0; --i) s += kParts[Pick(18)];
    return s + "\"";
  }
  std::string Value(int depth) {
    size_t kind = depth > 3 ? Pick(5) : Pick(8);
    switch (kind) {
      case 0:
      case 1:
        return Number();
      case 2:
        return String();
      case 3:
        return Pick(3) == 0 ? "null" : Pick(2) ? "true" : "false";
      case 4:
        return std::to_string(rng_() % 5000);
      case 5:
      case 6: {
        std::string a = "[" + Space();
        for (size_t i = Pick(6); i > 0; --i) a += Value(depth + 1) + Space() + (i > 1 ? "," : "");
        return a + "]";
      }
      default:
        return Object(depth + 1);
    }
  }
  std::string Object(int depth) {
    std::string o = "{" + Space();
    for (size_t i = Pick(depth == 0 ? 6 : 4) + (depth == 0); i > 0; --i)
      o += Key() + Space() + ":" + Space() + Value(depth) + Space() + (i > 1 ? "," + Space() : "");
    return o + "}";
  }
  // A top-level record, usually with a length in one of its forms.
  std::string Record() {
    std::string o = "{" + Space();
    std::vector<std::string> members;
    for (size_t i = Pick(4); i > 0; --i) members.push_back(Key() + ":" + Space() + Value(1));
    static const char* kLengthKeys[] = {"length",   "len",     "num_tokens",
                                        "n_tokens", "seq_len", "sequence_length"};
    static const char* kTokenKeys[] = {"input_ids", "token_ids", "tokens", "ids"};
    if (Pick(4) != 0) {
      if (Pick(2)) {
        members.push_back("\"" + std::string(kLengthKeys[Pick(6)]) + "\":" + Space() +
                          std::to_string(rng_() % 40000));
      } else {
        std::string ids = "[";
        for (size_t i = Pick(30); i > 0; --i)
          ids += std::to_string(rng_() % 50000) + (i > 1 ? "," + Space() : "");
        members.push_back("\"" + std::string(kTokenKeys[Pick(4)]) + "\":" + Space() + ids + "]");
      }
    }
    std::shuffle(members.begin(), members.end(), rng_);
    for (size_t i = 0; i < members.size(); ++i) o += (i ? "," + Space() : "") + members[i];
    return o + Space() + "}";
  }
  // One random edit: a character deleted, replaced or inserted.
  std::string Damage(std::string s) {
    static const char kChars[] = "{}[]\",:\\-+.eE0189 \tanutl\x01\x80\xff";
    size_t at = Pick(s.size() + 1);
    char c = kChars[Pick(sizeof(kChars) - 1)];
    switch (Pick(3)) {
      case 0:
        if (at < s.size()) s.erase(at, 1);
        break;
      case 1:
        if (at < s.size()) s[at] = c;
        break;
      default:
        s.insert(at, 1, c);
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

TEST(JsonLineLength, ScanAgreesWithTheDocumentOnRandomRecords) {
  RandomJson gen(11);
  int scanned_valid = 0, valid = 0, scanned = 0;
  for (int i = 0; i < 40000; ++i) {
    std::string line = gen.Record();
    if (i % 2 == 1) {
      for (size_t e = 1 + gen.Pick(2); e > 0; --e) line = gen.Damage(line);
    } else {
      ++valid;
      int before = scanned;
      ExpectSameAsDocument(line, &scanned);
      scanned_valid += scanned - before;
      if (::testing::Test::HasFatalFailure()) return;
      continue;
    }
    ExpectSameAsDocument(line, &scanned);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The scan must carry the load: most intact records have a plain length.
  EXPECT_GT(scanned_valid, valid / 3) << scanned_valid << " of " << valid;
  EXPECT_GT(scanned, scanned_valid);  // and some damaged ones are still valid JSON
}

TEST(PlanBuckets, SmallExampleByHand) {
  auto h = ParseLengths("700\n1200\n3900\n", "l.txt");
  ASSERT_THAT(h, IsOk());
  BucketPlanOptions opts;
  opts.max_buckets = 2;
  auto plan = PlanBuckets(*h, opts);
  ASSERT_THAT(plan, IsOk());
  const BucketScheme& best = plan->schemes.back();
  EXPECT_EQ(best.name, "optimum");
  // {700, 1200} -> 1280 (580 + 80), {3900} -> 3968 (68).
  EXPECT_EQ(best.boundaries, (std::vector<int64_t>{1280, 3968}));
  EXPECT_EQ(best.padded_tokens, 728u);
  EXPECT_EQ(best.compiles, 2u);
  EXPECT_EQ(plan->distinct_lengths, 3u);
  // Hand-picked 4K/8K/16K: everything in 4096, one compile.
  EXPECT_EQ(plan->schemes[0].boundaries, (std::vector<int64_t>{4096, 8192, 16384}));
  EXPECT_EQ(plan->schemes[0].padded_tokens, 3 * 4096u - 5800u);
  EXPECT_EQ(plan->schemes[0].compiles, 1u);
  // Powers of two from 128: 1024, 2048, 4096 hold one each.
  EXPECT_EQ(plan->schemes[1].boundaries, (std::vector<int64_t>{1024, 2048, 4096}));
  EXPECT_EQ(plan->padding_by_k, (std::vector<uint64_t>{3 * 3968u - 5800u, 728u}));
}

TEST(PlanBuckets, MatchesBruteForceOnRandomHistograms) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 40);
    std::vector<int64_t> lengths;
    for (int i = 0; i < n; ++i) {
      int reps = 1 + static_cast<int>(rng() % 5);
      int64_t len = static_cast<int64_t>(rng() % 5000);
      for (int r = 0; r < reps; ++r) lengths.push_back(len);
    }
    LengthHistogram h = HistogramOf(lengths);
    BucketPlanOptions opts;
    opts.max_buckets = 1 + static_cast<int>(rng() % 8);
    opts.align = trial % 3 == 0 ? 1 : 64;
    auto plan = PlanBuckets(h, opts);
    ASSERT_THAT(plan, IsOk());
    // The same aligned groups the planner uses.
    std::vector<int64_t> aligned;
    std::vector<uint64_t> counts, real;
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      int64_t a = std::max<int64_t>(h.lengths[i], 1);
      a = (a + opts.align - 1) / opts.align * opts.align;
      if (!aligned.empty() && aligned.back() == a) {
        counts.back() += h.counts[i];
        real.back() += h.counts[i] * h.lengths[i];
      } else {
        aligned.push_back(a);
        counts.push_back(h.counts[i]);
        real.push_back(h.counts[i] * h.lengths[i]);
      }
    }
    for (int k = 1; k <= static_cast<int>(plan->padding_by_k.size()); ++k) {
      EXPECT_EQ(plan->padding_by_k[k - 1], internal::BruteForcePadding(aligned, counts, real, k))
          << "trial " << trial << " k " << k;
    }
    // The boundaries it returns achieve the padding it claims, and cover all.
    const BucketScheme& best = plan->schemes.back();
    EXPECT_EQ(best.padded_tokens, plan->padding_by_k.back()) << "trial " << trial;
    EXPECT_EQ(best.over_limit, 0u);
    EXPECT_LE(best.boundaries.size(), static_cast<size_t>(opts.max_buckets));
  }
}

TEST(PlanBuckets, CostModelTradesCompilesForPadding) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < 1000; ++i) lengths.push_back(100 + (i % 50) * 100);
  LengthHistogram h = HistogramOf(lengths);
  BucketPlanOptions opts;
  opts.max_buckets = 50;
  opts.align = 1;
  auto free_compiles = PlanBuckets(h, opts);
  ASSERT_THAT(free_compiles, IsOk());
  EXPECT_EQ(free_compiles->schemes.back().compiles, 50u);
  EXPECT_EQ(free_compiles->schemes.back().padded_tokens, 0u);
  // Each compile costs as much as 10^6 padded tokens: far fewer buckets.
  opts.cost = CostModel{10, 100000};
  auto costly = PlanBuckets(h, opts);
  ASSERT_THAT(costly, IsOk());
  const BucketScheme& best = costly->schemes.back();
  EXPECT_LT(best.compiles, 10u);
  EXPECT_GT(best.compiles, 1u);
  double cost = best.cost_tokens;
  for (size_t k = 1; k <= costly->padding_by_k.size(); ++k)
    EXPECT_LE(cost, static_cast<double>(costly->padding_by_k[k - 1]) + 1e6 * k);
}

TEST(PlanBuckets, TruncateCutsLongSequencesFirst) {
  LengthHistogram h = HistogramOf(std::vector<int64_t>{100, 200, 5000, 9000, 9000});
  BucketPlanOptions opts;
  opts.max_buckets = 2;
  opts.align = 1;
  opts.truncate = 4096;
  auto plan = PlanBuckets(h, opts);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->truncated, 3u);
  EXPECT_EQ(plan->max_length, 4096);
  EXPECT_EQ(plan->tokens, 300u + 3 * 4096u);
  EXPECT_EQ(plan->schemes.back().boundaries, (std::vector<int64_t>{200, 4096}));
  EXPECT_EQ(plan->schemes.back().padded_tokens, 100u);
  opts.truncate = -1;
  EXPECT_THAT(PlanBuckets(h, opts), HasCode(ErrorCode::kInvalidArgument, HasSubstr("--truncate")));
}

TEST(PlanBuckets, RejectsBadOptions) {
  LengthHistogram h = HistogramOf(std::vector<int64_t>{5, 6});
  BucketPlanOptions opts;
  opts.max_buckets = 0;
  EXPECT_THAT(PlanBuckets(h, opts),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--max-buckets")));
  opts.max_buckets = 2;
  opts.align = 0;
  EXPECT_THAT(PlanBuckets(h, opts), HasCode(ErrorCode::kInvalidArgument, HasSubstr("--align")));
  EXPECT_THAT(ParseCostModel("compile=40"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseCostModel("compile=40,throughput=x"), HasCode(ErrorCode::kInvalidArgument));
  auto m = ParseCostModel("compile=40, throughput=50000");
  ASSERT_THAT(m, IsOk());
  EXPECT_DOUBLE_EQ(m->TokensPerCompile(), 2e6);
}

}  // namespace
}  // namespace anxin::kernels
