#include "anxin/notify/spool.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

namespace anxin::notify {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::unexpected<Error> SqlError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = "spool: " + std::string(what) + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_errmsg(db) != nullptr &&
      std::string_view(sqlite3_errmsg(db)) != sqlite3_errstr(rc)) {
    msg += std::string(" (") + sqlite3_errmsg(db) + ")";
  }
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return ResourceExhausted(msg + ": the disk is full; free space on the spool's file system");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLoss(msg + ": move the spool directory aside to start a new one");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return PermissionDenied(msg);
    default:
      return Unavailable(msg);
  }
}

// A prepared statement, reset after each use.
class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { Close(); }
  void Close() {
    sqlite3_finalize(s_);
    s_ = nullptr;
  }
  Status Prepare(sqlite3* db, const char* sql) {
    db_ = db;
    const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr);
    if (rc != SQLITE_OK) return SqlError(db, rc, "prepare");
    return Ok();
  }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  // SQLITE_ROW or SQLITE_DONE; anything else is an error.
  Result<bool> Step(std::string_view what) {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqlError(db_, rc, what);
  }
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
};

struct ResetOnExit {
  Stmt& s;
  ~ResetOnExit() { s.Reset(); }
};

}  // namespace

struct Spool::Impl : SpoolTx {
  sqlite3* db = nullptr;
  SpoolOptions options;
  mutable std::mutex mu;  // the connection
  Stmt get_state, set_state, insert, head, del, resched, oldest, prune, delete_sized;
  uint64_t messages = 0, bytes = 0;
  std::atomic<uint64_t> messages_pub{0}, bytes_pub{0}, dropped{0}, commits{0};
  // Changes made by the transaction in progress, applied on commit.
  int64_t tx_messages = 0, tx_bytes = 0;

  struct Pending {
    std::function<Status(SpoolTx&)> fn;
    std::promise<Status> done;
  };
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<Pending> queue;
  bool stopping = false;
  std::thread committer;

  ~Impl() override {
    {
      std::lock_guard lock(queue_mu);
      stopping = true;
    }
    queue_cv.notify_all();
    if (committer.joinable()) committer.join();
    if (db != nullptr) {
      for (Stmt* st : {&get_state, &set_state, &insert, &head, &del, &resched, &oldest, &prune,
                       &delete_sized}) {
        st->Close();
      }
      sqlite3_close_v2(db);
    }
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) return SqlError(db, rc, sql);
    return Ok();
  }

  Result<AlertState> LastState(const std::string& receiver, const std::string& fp) override {
    ResetOnExit r{get_state};
    get_state.Bind(1, receiver).Bind(2, fp);
    ANXIN_ASSIGN_OR_RETURN(bool row, get_state.Step("read alert state"));
    if (!row) return AlertState{};
    return AlertState{get_state.Text(0), get_state.Int(1)};
  }
  Status SetState(const std::string& receiver, const std::string& fp,
                  const AlertState& s) override {
    ResetOnExit r{set_state};
    set_state.Bind(1, receiver).Bind(2, fp).Bind(3, s.status).Bind(4, s.starts_at).Bind(5, NowMs());
    ANXIN_TRY(set_state.Step("write alert state"));
    return Ok();
  }
  Status Enqueue(const SpoolMessage& m) override {
    ResetOnExit r{insert};
    insert.Bind(1, m.receiver)
        .Bind(2, m.group_key)
        .Bind(3, m.body)
        .Bind(4, m.fallback)
        .Bind(5, NowMs());
    ANXIN_TRY(insert.Step("store message"));
    tx_messages += 1;
    tx_bytes += static_cast<int64_t>(m.body.size() + m.fallback.size());
    return Ok();
  }

  // Drops the oldest messages while over the cap (inside the transaction).
  Status EnforceCap() {
    while (bytes + tx_bytes > options.max_bytes && messages + tx_messages > 0) {
      ResetOnExit r{oldest};
      ANXIN_ASSIGN_OR_RETURN(bool row, oldest.Step("find oldest message"));
      if (!row) break;
      const int64_t id = oldest.Int(0);
      const int64_t size = oldest.Int(3);
      spdlog::warn(
          "notify spool over its cap of {} bytes: dropped the oldest message (id {}, "
          "receiver '{}', group {}, {} attempts)",
          options.max_bytes, id, oldest.Text(1), oldest.Text(2), oldest.Int(4));
      {
        ResetOnExit rd{del};
        del.Bind(1, id);
        ANXIN_TRY(del.Step("drop oldest message"));
      }
      tx_messages -= 1;
      tx_bytes -= size;
      dropped.fetch_add(1, std::memory_order_relaxed);
    }
    return Ok();
  }

  void Publish() {
    messages_pub.store(messages, std::memory_order_relaxed);
    bytes_pub.store(bytes, std::memory_order_relaxed);
  }

  void CommitLoop() {
    uint64_t batches = 0;
    for (;;) {
      std::deque<Pending> batch;
      {
        std::unique_lock lock(queue_mu);
        queue_cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        batch.swap(queue);
      }
      std::vector<Status> results(batch.size());
      Status commit = Ok();
      {
        std::lock_guard lock(mu);
        tx_messages = tx_bytes = 0;
        const uint64_t dropped_before = dropped.load();
        commit = Exec("BEGIN IMMEDIATE");
        if (commit) {
          for (size_t i = 0; i < batch.size(); ++i) {
            const int64_t m0 = tx_messages, b0 = tx_bytes;
            Status s = Exec("SAVEPOINT w");
            if (s) s = batch[i].fn(*this);
            if (s) {
              s = Exec("RELEASE w");
            } else {
              (void)Exec("ROLLBACK TO w");
              (void)Exec("RELEASE w");
              tx_messages = m0;
              tx_bytes = b0;
            }
            results[i] = std::move(s);
          }
          commit = EnforceCap();
          if (commit && ++batches % 1000 == 0) {
            // Forget alert states not touched for a week.
            ResetOnExit r{prune};
            prune.Bind(1, NowMs() - 7 * 86400 * 1000LL);
            if (auto pruned = prune.Step("prune alert states"); !pruned) {
              commit = std::unexpected(pruned.error());
            }
          }
          if (commit) commit = Exec("COMMIT");
          if (!commit) {
            (void)Exec("ROLLBACK");
            dropped.store(dropped_before);
          }
        }
        if (commit) {
          messages = static_cast<uint64_t>(static_cast<int64_t>(messages) + tx_messages);
          bytes = static_cast<uint64_t>(static_cast<int64_t>(bytes) + tx_bytes);
          commits.fetch_add(1, std::memory_order_relaxed);
          Publish();
        }
      }
      for (size_t i = 0; i < batch.size(); ++i) {
        batch[i].done.set_value(commit ? std::move(results[i]) : commit);
      }
    }
  }
};

Spool::Spool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Spool::~Spool() = default;

Result<std::unique_ptr<Spool>> Spool::Open(const std::string& dir, SpoolOptions options) {
  std::error_code ec;
  // A path the user gave that is not a directory is bad input (exit 2), not
  // an unusable machine.
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return InvalidArgument("spool: '" + dir +
                           "' is a file, not a directory: give --spool a directory");
  }
  std::filesystem::create_directories(dir, ec);
  if (ec == std::errc::not_a_directory) {
    return InvalidArgument("spool: cannot create directory " + dir +
                           ": a part of the path is a file, not a directory");
  }
  if (ec) {
    return std::unexpected(Error(
        ec == std::errc::permission_denied ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable,
        "spool: cannot create directory " + dir + ": " + ec.message()));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const std::string path = dir + "/spool.db";
  int rc =
      sqlite3_open_v2(path.c_str(), &impl->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return SqlError(impl->db, rc, "open " + path);
  sqlite3_busy_timeout(impl->db, 5000);
  ANXIN_TRY(impl->Exec("PRAGMA journal_mode=WAL"));
  ANXIN_TRY(impl->Exec("PRAGMA synchronous=FULL"));
  ANXIN_TRY(impl->Exec(
      "CREATE TABLE IF NOT EXISTS messages("
      "  id INTEGER PRIMARY KEY AUTOINCREMENT, receiver TEXT NOT NULL, group_key TEXT NOT NULL,"
      "  body TEXT NOT NULL, fallback TEXT NOT NULL, accepted_ms INTEGER NOT NULL,"
      "  attempts INTEGER NOT NULL DEFAULT 0, next_attempt_ms INTEGER NOT NULL DEFAULT 0);"
      "CREATE INDEX IF NOT EXISTS messages_by_receiver ON messages(receiver, id);"
      "CREATE TABLE IF NOT EXISTS alert_state("
      "  receiver TEXT NOT NULL, fingerprint TEXT NOT NULL, status TEXT NOT NULL,"
      "  starts_at INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"
      "  PRIMARY KEY(receiver, fingerprint)) WITHOUT ROWID;"));
  auto& i = *impl;
  ANXIN_TRY(i.get_state.Prepare(
      i.db, "SELECT status, starts_at FROM alert_state WHERE receiver=?1 AND fingerprint=?2"));
  ANXIN_TRY(
      i.set_state.Prepare(i.db, "INSERT OR REPLACE INTO alert_state VALUES(?1, ?2, ?3, ?4, ?5)"));
  ANXIN_TRY(
      i.insert.Prepare(i.db,
                       "INSERT INTO messages(receiver, group_key, body, fallback, accepted_ms)"
                       " VALUES(?1, ?2, ?3, ?4, ?5)"));
  ANXIN_TRY(i.head.Prepare(i.db,
                           "SELECT id, receiver, group_key, body, fallback, attempts, "
                           "next_attempt_ms FROM messages WHERE receiver=?1 ORDER BY id LIMIT 1"));
  ANXIN_TRY(i.del.Prepare(i.db, "DELETE FROM messages WHERE id=?1"));
  ANXIN_TRY(
      i.resched.Prepare(i.db, "UPDATE messages SET attempts=?2, next_attempt_ms=?3 WHERE id=?1"));
  ANXIN_TRY(i.oldest.Prepare(i.db,
                             "SELECT id, receiver, group_key, length(body) + length(fallback), "
                             "attempts FROM messages ORDER BY id LIMIT 1"));
  ANXIN_TRY(i.delete_sized.Prepare(
      i.db, "DELETE FROM messages WHERE id=?1 RETURNING length(body) + length(fallback)"));
  ANXIN_TRY(i.prune.Prepare(i.db, "DELETE FROM alert_state WHERE updated_ms < ?1"));
  {
    Stmt count;
    ANXIN_TRY(count.Prepare(
        i.db, "SELECT count(*), coalesce(sum(length(body) + length(fallback)), 0) FROM messages"));
    ANXIN_ASSIGN_OR_RETURN(bool row, count.Step("count messages"));
    if (row) {
      i.messages = static_cast<uint64_t>(count.Int(0));
      i.bytes = static_cast<uint64_t>(count.Int(1));
    }
  }
  i.Publish();
  Impl* raw = impl.get();
  impl->committer = std::thread([raw] { raw->CommitLoop(); });
  return std::unique_ptr<Spool>(new Spool(std::move(impl)));
}

Status Spool::Write(std::function<Status(SpoolTx&)> fn) {
  std::future<Status> done;
  {
    std::lock_guard lock(impl_->queue_mu);
    if (impl_->stopping) return Cancelled("spool: closing");
    impl_->queue.push_back(Impl::Pending{std::move(fn), {}});
    done = impl_->queue.back().done.get_future();
  }
  impl_->queue_cv.notify_one();
  return done.get();
}

Result<std::optional<SpoolMessage>> Spool::Head(const std::string& receiver) {
  std::lock_guard lock(impl_->mu);
  Stmt& h = impl_->head;
  ResetOnExit r{h};
  h.Bind(1, receiver);
  ANXIN_ASSIGN_OR_RETURN(bool row, h.Step("read next message"));
  if (!row) return std::optional<SpoolMessage>();
  SpoolMessage m;
  m.id = h.Int(0);
  m.receiver = h.Text(1);
  m.group_key = h.Text(2);
  m.body = h.Text(3);
  m.fallback = h.Text(4);
  m.attempts = static_cast<int>(h.Int(5));
  m.next_attempt_ms = h.Int(6);
  return std::optional<SpoolMessage>(std::move(m));
}

Status Spool::Delete(int64_t id) {
  std::lock_guard lock(impl_->mu);
  Stmt& q = impl_->delete_sized;
  ResetOnExit r{q};
  q.Bind(1, id);
  ANXIN_ASSIGN_OR_RETURN(bool row, q.Step("delete delivered message"));
  if (row) {
    const int64_t n = q.Int(0);
    ANXIN_ASSIGN_OR_RETURN(bool more, q.Step("delete delivered message"));
    (void)more;
    impl_->messages -= 1;
    impl_->bytes -= static_cast<uint64_t>(n);
    impl_->Publish();
  }
  return Ok();
}

Status Spool::Reschedule(int64_t id, int attempts, int64_t next_attempt_ms) {
  std::lock_guard lock(impl_->mu);
  Stmt& s = impl_->resched;
  ResetOnExit r{s};
  s.Bind(1, id).Bind(2, static_cast<int64_t>(attempts)).Bind(3, next_attempt_ms);
  ANXIN_TRY(s.Step("reschedule message"));
  return Ok();
}

uint64_t Spool::messages() const { return impl_->messages_pub.load(std::memory_order_relaxed); }
uint64_t Spool::bytes() const { return impl_->bytes_pub.load(std::memory_order_relaxed); }
uint64_t Spool::dropped() const { return impl_->dropped.load(std::memory_order_relaxed); }
uint64_t Spool::commits() const { return impl_->commits.load(std::memory_order_relaxed); }

}  // namespace anxin::notify
