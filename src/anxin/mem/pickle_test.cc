#include "anxin/mem/pickle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "anxin/base/testing.h"
#include "anxin/mem/trace.h"

namespace anxin::mem {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using Kind = PickleNode::Kind;

std::string Corpus(const std::string& name) {
  return std::string(ANXIN_SOURCE_DIR) + "/tests/mem/pickle_corpus/" + name;
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(PickleTest, ReadsPlainData) {
  // pickle.dumps({'a': [1, 'x']}, protocol=2)
  static constexpr char kBytes[] =
      "\x80\x02}q\x00X\x01\x00\x00\x00"
      "aq\x01]q\x02(K\x01X\x01\x00\x00\x00"
      "xq\x03"
      "es.";
  std::string bytes(kBytes, sizeof(kBytes) - 1);
  auto doc = ParsePickle(bytes);
  ASSERT_THAT(doc, IsOk());
  const PickleNode* a = doc->Find(doc->root(), "a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->kind, Kind::kList);
  ASSERT_EQ(a->items.size(), 2u);
  EXPECT_EQ(doc->node(a->items[0]).i, 1);
  EXPECT_EQ(doc->node(a->items[1]).s, "x");
}

TEST(PickleTest, ReadsEveryIntegerWidthAndFloats) {
  auto doc = ReadPickleFile(Corpus("ints_p4.pickle"));
  ASSERT_THAT(doc, IsOk());
  std::vector<int64_t> want = {0,    255,        256,           65535,     65536,        -1,
                               -129, 2147483647, -2147483648LL, 1LL << 40, -(1LL << 62), INT64_MAX};
  const PickleNode& root = doc->root();
  ASSERT_EQ(root.items.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(doc->node(root.items[k]).i, want[k]) << k;
  auto floats = ReadPickleFile(Corpus("floats_p2.pickle"));
  ASSERT_THAT(floats, IsOk());
  EXPECT_DOUBLE_EQ(floats->node(floats->root().items[1]).f, -1.5);
  EXPECT_DOUBLE_EQ(floats->node(floats->root().items[2]).f, 1e300);
}

TEST(PickleTest, SharedObjectsAreStoredOnce) {
  auto doc = ReadPickleFile(Corpus("shared_p4.pickle"));
  ASSERT_THAT(doc, IsOk());
  const PickleNode* frames = doc->Find(doc->root(), "frames");
  ASSERT_NE(frames, nullptr);
  ASSERT_EQ(frames->items.size(), 3u);
  EXPECT_EQ(frames->items[0], frames->items[1]);
  EXPECT_EQ(doc->GetString(doc->node(frames->items[2]), "name"), "f");
  EXPECT_EQ(doc->GetInt(doc->node(frames->items[2]), "line"), 3);
}

TEST(PickleTest, EveryCorpusFileButTheEvilOneParses) {
  for (const char* name :
       {"plain_p2.pickle", "strings_p3.pickle", "nested_p5.pickle", "snapshot_p4.pickle"}) {
    EXPECT_THAT(ReadPickleFile(Corpus(name)), IsOk()) << name;
  }
}

TEST(PickleTest, RefusesCodeNamingOpcodeAndOffset) {
  EXPECT_THAT(
      ReadPickleFile(Corpus("evil_reduce.pickle")),
      HasCode(ErrorCode::kInvalidArgument, AllOf(HasSubstr("STACK_GLOBAL"), HasSubstr("offset 39"),
                                                 HasSubstr("not plain data"))));
  EXPECT_THAT(ParsePickle("\x80\x02"
                          "cos\nsystem\n."),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("GLOBAL (0x63) at offset 2")));
}

TEST(PickleTest, TruncatedAndCorruptInputIsDataLoss) {
  std::string good = Bytes(Corpus("snapshot_p4.pickle"));
  for (size_t cut : {size_t{0}, size_t{1}, size_t{5}, good.size() / 2, good.size() - 1}) {
    EXPECT_THAT(ParsePickle(good.substr(0, cut)), HasCode(ErrorCode::kDataLoss)) << cut;
  }
  EXPECT_THAT(ParsePickle("\x80\x04h\x09."),
              HasCode(ErrorCode::kDataLoss, HasSubstr("unknown memo 9")));
  EXPECT_THAT(ParsePickle("\x80\x04K\x01K\x02u."), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(ParsePickle("\x80\x09."),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("protocol 9")));
  EXPECT_THAT(ReadPickleFile("/nonexistent/x.pickle"), HasCode(ErrorCode::kNotFound));
}

TEST(PickleTest, ReadsTheRealSnapshots) {
  auto doc = ReadPickleFile(std::string(ANXIN_SOURCE_DIR) +
                            "/tests/fixtures/mem-traces/cs336-memory_ctx128_fullstep.pickle");
  ASSERT_THAT(doc, IsOk());
  const PickleNode* segments = doc->Find(doc->root(), "segments");
  ASSERT_NE(segments, nullptr);
  EXPECT_EQ(segments->items.size(), 1010u);
  const PickleNode* traces = doc->Find(doc->root(), "device_traces");
  ASSERT_NE(traces, nullptr);
  EXPECT_EQ(doc->node(traces->items[0]).items.size(), 19342u);
}

TEST(TraceTest, SnapshotStateIsReconstructedAtTheFirstEntry) {
  auto t = ReadTrace(Corpus("snapshot_p4.pickle"));
  ASSERT_THAT(t, IsOk());
  // The segment and the 1 MB block were created during the trace; the 4 KiB
  // block came and went.
  EXPECT_TRUE(t->initial_segments.empty());
  EXPECT_TRUE(t->initial_live.empty());
  ASSERT_EQ(t->events.size(), 4u);
  EXPECT_EQ(t->events[0].action, TraceEvent::Action::kSegmentAlloc);
  EXPECT_EQ(t->events[3].action, TraceEvent::Action::kFree);
  EXPECT_EQ(t->events[3].size, 4096u);
}

TEST(TraceTest, RealSnapshotBeginsWithLiveMemory) {
  auto t = ReadTrace(std::string(ANXIN_SOURCE_DIR) +
                     "/tests/fixtures/mem-traces/cs336-memory_ctx128_fullstep.pickle");
  ASSERT_THAT(t, IsOk());
  // About 12.9 GB were live when recording started.
  EXPECT_EQ(t->initial_live.size(), 324u);
  EXPECT_NEAR(static_cast<double>(t->InitialLive()) / (1 << 30), 12.69, 0.01);
  EXPECT_EQ(t->initial_segments.size(), 227u);
  EXPECT_TRUE(t->has_segment_events);
}

TEST(TraceTest, EmptyCacheCallsAreRecognised) {
  auto t = ReadTrace(std::string(ANXIN_SOURCE_DIR) +
                     "/tests/fixtures/mem-traces/cs336-memory_ctx256_forward_.pickle");
  ASSERT_THAT(t, IsOk());
  ASSERT_FALSE(t->events.empty());
  EXPECT_EQ(t->events[0].action, TraceEvent::Action::kEmptyCache);
}

TEST(TraceTest, JsonlRoundTripAndErrors) {
  auto t = ReadTrace(Corpus("snapshot_p4.pickle"));
  ASSERT_THAT(t, IsOk());
  std::string path = ::testing::TempDir() + "/trace.jsonl";
  ASSERT_THAT(WriteJsonlTrace(*t, path), IsOk());
  auto back = ReadTrace(path);
  ASSERT_THAT(back, IsOk());
  ASSERT_EQ(back->events.size(), t->events.size());
  for (size_t k = 0; k < t->events.size(); ++k) {
    EXPECT_EQ(back->events[k].action, t->events[k].action);
    EXPECT_EQ(back->events[k].addr, t->events[k].addr);
    EXPECT_EQ(back->events[k].size, t->events[k].size);
  }
  std::string bad = ::testing::TempDir() + "/bad.jsonl";
  std::ofstream(bad) << "{\"action\":\"alloc\",\"addr\":1,\"size\":5}\n{\"action\":\"free\","
                        "\"addr\":2}\n";
  EXPECT_THAT(ReadTrace(bad), HasCode(ErrorCode::kInvalidArgument,
                                      AllOf(HasSubstr("bad.jsonl:2"), HasSubstr("not live"))));
  std::ofstream(bad) << "{\"action\":\"grow\"}\n";
  EXPECT_THAT(ReadTrace(bad), HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown action")));
}

// What is not a trace is an input error naming the file, never an empty
// replay: a directory, an empty file, a file in neither format (saying which
// formats were expected), and a trace without events. The format comes from
// the content, not the name.
TEST(TraceTest, InputThatIsNoTraceIsRefusedNamingTheFile) {
  anxin::testing::TempDir dir;
  using ::testing::Not;
  EXPECT_THAT(ReadTrace(dir.path()),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("is a directory, not a file")));
  std::string empty = dir.Write("empty.pickle", "");
  EXPECT_THAT(ReadTrace(empty), HasCode(ErrorCode::kInvalidArgument,
                                        AllOf(HasSubstr(empty), HasSubstr("the file is empty"))));
  std::string text = dir.Write("notes.pickle", "hello, world\n");
  EXPECT_THAT(ReadTrace(text),
              HasCode(ErrorCode::kInvalidArgument,
                      AllOf(HasSubstr(text), HasSubstr("is not a PyTorch memory snapshot"),
                            HasSubstr("0x80"), HasSubstr("\"hello, world\\x0a\""),
                            Not(HasSubstr("JSON object")))));
  std::string other = dir.Write("notes.txt", "alloc 1 5\n");
  EXPECT_THAT(ReadTrace(other), HasCode(ErrorCode::kInvalidArgument,
                                        AllOf(HasSubstr(other), HasSubstr("neither"),
                                              HasSubstr("snapshot"), HasSubstr("JSONL"))));
  std::string no_events =
      dir.Write("idle.jsonl", "# state only\n{\"action\":\"live\",\"addr\":4096,\"size\":512}\n\n");
  EXPECT_THAT(ReadTrace(no_events),
              HasCode(ErrorCode::kInvalidArgument,
                      AllOf(HasSubstr(no_events), HasSubstr("no allocation events"))));
  EXPECT_THAT(ReadTrace(dir.Write("blank.jsonl", "\n \n")),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no allocation events")));
  // JSONL under a snapshot's name is still JSONL.
  std::string jsonl_named_pickle = dir.Write("trace.pickle",
                                             "{\"action\":\"alloc\",\"addr\":4096,\"size\":5}\n"
                                             "{\"action\":\"free\",\"addr\":4096}\n");
  auto t = ReadTrace(jsonl_named_pickle);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->events.size(), 2u);
}

}  // namespace
}  // namespace anxin::mem
