// The durable spool of `anxin notify`: every message accepted for delivery is
// on disk, fsynced, before the webhook that brought it is answered, and stays
// there until its receiver took it.
//
//   ANXIN_ASSIGN_OR_RETURN(auto spool, notify::Spool::Open("/var/lib/anxin/notify"));
//   Status stored = spool->Write([&](notify::SpoolTx& tx) -> Status {
//     ANXIN_ASSIGN_OR_RETURN(notify::AlertState last, tx.LastState("oncall", "c0ffee"));
//     if (last.status == "firing") return Ok();            // seen: deduplicated
//     ANXIN_TRY(tx.SetState("oncall", "c0ffee", {"firing", 1764682130}));
//     return tx.Enqueue({.receiver = "oncall", .group_key = "{}:{}", .body = "{...}"});
//   });                                                     // durable when ok
//   ANXIN_ASSIGN_OR_RETURN(auto head, spool->Head("oncall"));  // oldest first
//   if (head) ANXIN_TRY(spool->Delete(head->id));             // after it was sent
//
// Storage: SQLite (Debian's libsqlite3) in write-ahead-log mode with
// synchronous=FULL, one file spool.db in the directory. Writes from many
// threads are group-committed: Write queues its function, one thread runs
// every function queued so far in one transaction (each in a savepoint of its
// own, so one failing leaves the others) and commits once, which is one
// fsync for the whole batch. docs/notify.md says why SQLite.
//
// Size cap: when the messages held pass max_bytes, the oldest are dropped
// in the same transaction, logged and counted (dropped()).
//
// Errors: a full disk (SQLITE_FULL) -> kResourceExhausted; any other write
// failure -> kUnavailable; a file that is not a spool -> kDataLoss.
//
// Thread safety: every method may be called from any thread.
#ifndef ANXIN_NOTIFY_SPOOL_H_
#define ANXIN_NOTIFY_SPOOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "anxin/base/error.h"

namespace anxin::notify {

struct SpoolMessage {
  int64_t id = 0;  // ascending in acceptance order
  std::string receiver{};
  std::string group_key{};
  std::string body{};
  std::string fallback{};
  int attempts = 0;
  int64_t next_attempt_ms = 0;  // unix milliseconds; 0 = now
};

struct AlertState {
  std::string status{};  // "" = never delivered to this receiver
  int64_t starts_at = 0;
};

class SpoolTx {
 public:
  virtual ~SpoolTx() = default;
  // The last state queued for this receiver and alert fingerprint.
  virtual Result<AlertState> LastState(const std::string& receiver,
                                       const std::string& fingerprint) = 0;
  virtual Status SetState(const std::string& receiver, const std::string& fingerprint,
                          const AlertState& state) = 0;
  virtual Status Enqueue(const SpoolMessage& message) = 0;
};

struct SpoolOptions {
  uint64_t max_bytes = 256ull << 20;  // bodies held; over it the oldest go
};

class Spool {
 public:
  // Creates the directory and the database as needed. A directory that
  // cannot be made or written -> the errno's code naming it.
  static Result<std::unique_ptr<Spool>> Open(const std::string& dir, SpoolOptions options = {});
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Runs fn inside the next group commit and returns once that commit is on
  // disk (or fn's error, or the commit's error: then nothing of fn stayed).
  Status Write(std::function<Status(SpoolTx&)> fn);

  // The oldest message for this receiver; nullopt when none.
  Result<std::optional<SpoolMessage>> Head(const std::string& receiver);
  Status Delete(int64_t id);
  Status Reschedule(int64_t id, int attempts, int64_t next_attempt_ms);

  uint64_t messages() const;
  uint64_t bytes() const;
  uint64_t dropped() const;
  uint64_t commits() const;

 private:
  struct Impl;
  explicit Spool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_{};
};

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_SPOOL_H_
