#include "anxin/notify/spool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "anxin/base/testing.h"

namespace anxin::notify {
namespace {

using ::anxin::testing::TempDir;

Status Put(Spool& s, const std::string& receiver, const std::string& body) {
  return s.Write([&](SpoolTx& tx) {
    return tx.Enqueue({.receiver = receiver, .group_key = "g", .body = body});
  });
}

TEST(Spool, KeepsMessagesInOrderAcrossReopen) {
  TempDir dir;
  {
    auto s = Spool::Open(dir.path());
    ASSERT_TRUE(s.has_value()) << s.error().message();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(Put(**s, "a", "m" + std::to_string(i)).has_value());
    ASSERT_TRUE(Put(**s, "b", "other").has_value());
    auto h = (*s)->Head("a");
    ASSERT_TRUE(h.has_value() && h->has_value());
    EXPECT_EQ((*h)->body, "m0");
    ASSERT_TRUE((*s)->Delete((*h)->id).has_value());
    ASSERT_TRUE((*s)->Reschedule((*(*s)->Head("a"))->id, 3, 12345).has_value());
    EXPECT_EQ((*s)->messages(), 5u);
  }
  auto s = Spool::Open(dir.path());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ((*s)->messages(), 5u);
  EXPECT_EQ((*s)->bytes(), 4u * 2 + 5);
  auto h = (*s)->Head("a");
  EXPECT_EQ((*h)->body, "m1");
  EXPECT_EQ((*h)->attempts, 3);
  EXPECT_EQ((*h)->next_attempt_ms, 12345);
  EXPECT_EQ((*(*s)->Head("b"))->body, "other");
  EXPECT_FALSE((*s)->Head("c")->has_value());
}

TEST(Spool, GroupCommitsConcurrentWriters) {
  TempDir dir;
  auto s = Spool::Open(dir.path());
  ASSERT_TRUE(s.has_value());
  constexpr int kThreads = 16, kEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        EXPECT_TRUE(Put(**s, "r" + std::to_string(t), std::to_string(i)).has_value());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ((*s)->messages(), uint64_t{kThreads * kEach});
  // Writers that arrive while a commit runs share the next one.
  EXPECT_LT((*s)->commits(), uint64_t{kThreads * kEach});
  // Each writer's own messages stay in its order.
  for (int i = 0; i < kEach; ++i) {
    auto h = (*s)->Head("r7");
    ASSERT_EQ((*h)->body, std::to_string(i));
    ASSERT_TRUE((*s)->Delete((*h)->id).has_value());
  }
}

TEST(Spool, AFailingWriterLeavesNoTraceAndOthersCommit) {
  TempDir dir;
  auto s = Spool::Open(dir.path());
  ASSERT_TRUE(s.has_value());
  Status bad = (*s)->Write([](SpoolTx& tx) -> Status {
    ANXIN_TRY(tx.SetState("a", "fp", {"firing", 1}));
    ANXIN_TRY(tx.Enqueue({.receiver = "a", .body = "half"}));
    return InvalidArgument("render failed");
  });
  EXPECT_FALSE(bad.has_value());
  EXPECT_TRUE(Put(**s, "a", "whole").has_value());
  EXPECT_EQ((*s)->messages(), 1u);
  EXPECT_EQ((*(*s)->Head("a"))->body, "whole");
  Status st = (*s)->Write([](SpoolTx& tx) -> Status {
    auto last = tx.LastState("a", "fp");
    EXPECT_TRUE(last.has_value());
    EXPECT_EQ(last->status, "");  // rolled back
    return Ok();
  });
  EXPECT_TRUE(st.has_value());
}

TEST(Spool, CapDropsOldestAndCounts) {
  TempDir dir;
  auto s = Spool::Open(dir.path(), {.max_bytes = 100});
  ASSERT_TRUE(s.has_value());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Put(**s, "a", std::string(30, 'a' + i)).has_value());
  EXPECT_EQ((*s)->messages(), 3u);
  EXPECT_EQ((*s)->dropped(), 7u);
  EXPECT_LE((*s)->bytes(), 100u);
  EXPECT_EQ((*(*s)->Head("a"))->body, std::string(30, 'h'));
}

TEST(Spool, NotADatabaseIsDataLoss) {
  TempDir dir;
  dir.Write("spool.db", std::string(8192, 'x'));
  auto s = Spool::Open(dir.path());
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), ErrorCode::kDataLoss) << s.error().message();
}

}  // namespace
}  // namespace anxin::notify
