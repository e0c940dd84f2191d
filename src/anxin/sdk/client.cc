// libanxin_sdk.so: the C functions of include/anxin/sdk.h.
//
// Calling threads write fixed-size events into a lock-free ring (ring.h);
// one background thread drains it every ANXIN_SDK_FLUSH_MS into datagrams of
// the wire format (monitor/sdk_wire_format.h) and sends them without
// blocking. The connection state lives in one atomic that every call reads:
// while no agent is connected a call only bumps a counter, and it is the
// background thread alone that looks for the agent again (one connect()
// every ANXIN_SDK_RETRY_MS), so an absent agent costs no system call per
// event.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "anxin/monitor/sdk_wire_format.h"
#include "anxin/sdk.h"
#include "anxin/sdk/ring.h"

#define ANXIN_SDK_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using anxin::monitor::SdkCollectiveOp;
using anxin::monitor::SdkDatagramWriter;
using anxin::monitor::SdkRecordType;

static_assert(ANXIN_OP_ALL_REDUCE == static_cast<int>(SdkCollectiveOp::kAllReduce));
static_assert(ANXIN_OP_ALL_TO_ALL == static_cast<int>(SdkCollectiveOp::kAllToAll));
static_assert(ANXIN_OP_OTHER == static_cast<int>(SdkCollectiveOp::kOther));

// One buffered event: 128 bytes.
struct Event {
  uint8_t type = 0;
  uint8_t op = 0;
  uint8_t text_len = 0;
  uint8_t pad = 0;
  int32_t small = 0;  // group size, device
  uint64_t time_ns = 0;
  uint64_t a = 0;  // step, bytes, reserved bytes, duration
  uint64_t b = 0;  // duration, allocated bytes
  union {
    char text[anxin::monitor::kSdkMaxKernelNameBytes];
    uint64_t more[4];  // alloc stats: peak reserved, fragmentation bits, ooms, remaps
  };
};
static_assert(sizeof(Event) == 128);

struct Checkpoint {
  uint64_t time_ns;
  uint64_t step;
  std::string path;
};

constexpr size_t kMaxCheckpointsQueued = 16;
constexpr size_t kMaxSamplers = 8;
constexpr auto kSampleInterval = std::chrono::seconds(1);
constexpr auto kExitFlushMs = 200;

enum Mode : int {
  kUninit = 0,
  kInitializing = 1,
  kOff = 2,        // no socket configured
  kAbsent = 3,     // socket configured, no agent connected
  kConnected = 4,  // events go to the ring
};

// What the sending thread and the setters share; guarded by mu.
struct Control {
  std::mutex mu;
  std::condition_variable cv;
  std::string socket_path;
  uint64_t config_generation = 0;
  std::string job = "unknown";
  int32_t rank = 0;
  int32_t world_size = 1;
  std::deque<Checkpoint> checkpoints;
  std::vector<std::pair<void (*)(void*), void*>> samplers;
  bool flush_requested = false;
  int flush_waiters = 0;
  bool thread_started = false;
  // The sending thread. Owned here and joined by StopSender at exit (after
  // the exit flush); in a forked child it is the parent's and is left alone
  // with the parent's Control.
  std::thread sender;
  bool stopping = false;     // StopSender asks the thread to end
  bool sender_done = false;  // the thread has left Run
  // A socket connected by the configuring call, for the sending thread to
  // take over: events made right after configuration are not lost.
  int handoff_fd = -1;
  std::chrono::milliseconds flush_interval{10};
  std::chrono::milliseconds retry_interval{1000};
  size_t ring_capacity = 4096;
};

struct State {
  std::atomic<int> mode{kUninit};
  std::atomic<anxin::sdk::EventRing<Event>*> ring{nullptr};
  std::atomic<Control*> control{nullptr};
  // Counters (relaxed: they are statistics). Events made = pushed into the
  // ring + full + unsent + checkpoints, so the connected path pays for no
  // counter at all.
  std::atomic<uint64_t> full{0};         // ring (or checkpoint queue) full
  std::atomic<uint64_t> lost{0};         // taken out of the ring, then not sent
  std::atomic<uint64_t> unsent{0};       // no agent connected
  std::atomic<uint64_t> checkpoints{0};  // queued to be sent
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> datagrams{0};
  // Events taken out of the ring and either sent or dropped (for flush).
  std::atomic<uint64_t> handled{0};
  // Step timing, monotonic ns.
  std::atomic<uint64_t> begin_step{UINT64_MAX};
  std::atomic<uint64_t> begin_mono{0};
  std::atomic<uint64_t> last_end_mono{0};
  std::atomic<pid_t> pid{0};
};

constinit State g;

uint64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- environment -------------------------------------------------------

const char* FirstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = getenv(n);
    if (v && *v) return v;
  }
  return nullptr;
}

bool ParseInt(const char* s, long long lo, long long hi, long long& out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

// A job id the wire format accepts: printable ASCII other than '"' and '\'
// (others become '_'), 1..64 bytes.
std::string CleanJobId(const char* s) {
  std::string out(s ? s : "");
  if (out.size() > anxin::monitor::kSdkMaxJobIdBytes) out.resize(anxin::monitor::kSdkMaxJobIdBytes);
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') c = '_';
  }
  if (out.empty()) out = "unknown";
  return out;
}

bool ValidJobId(const char* s) {
  size_t n = strlen(s);
  if (n < 1 || n > anxin::monitor::kSdkMaxJobIdBytes) return false;
  for (size_t i = 0; i < n; ++i) {
    auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u >= 0x7f || s[i] == '"' || s[i] == '\\') return false;
  }
  return true;
}

void ReadEnvironment(Control& c) {
  const char* sock = getenv("ANXIN_AGENT_SOCKET");
  c.socket_path = sock ? sock : "";
  c.job = CleanJobId(FirstEnv({"ANXIN_JOB_ID", "SLURM_JOB_ID"}));
  long long rank = 0, world = 1, v;
  if (ParseInt(FirstEnv({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}), 0,
               anxin::monitor::kSdkMaxWorldSize - 1, v))
    rank = v;
  if (ParseInt(FirstEnv({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}), 1,
               anxin::monitor::kSdkMaxWorldSize, v))
    world = v;
  if (world <= rank) world = rank + 1;  // never send what the agent must refuse
  c.rank = static_cast<int32_t>(rank);
  c.world_size = static_cast<int32_t>(world);
  if (ParseInt(getenv("ANXIN_SDK_FLUSH_MS"), 1, 60000, v))
    c.flush_interval = std::chrono::milliseconds(v);
  if (ParseInt(getenv("ANXIN_SDK_RETRY_MS"), 1, 3600000, v))
    c.retry_interval = std::chrono::milliseconds(v);
  if (ParseInt(getenv("ANXIN_SDK_BUFFER_EVENTS"), 64, 1 << 20, v) && (v & (v - 1)) == 0)
    c.ring_capacity = static_cast<size_t>(v);
}

// ---- the socket --------------------------------------------------------

// A connected, non-blocking datagram socket to path, or -1.
int Connect(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return -1;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  int sndbuf = 1 << 20;  // room for a few full datagrams while the agent catches up
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  return fd;
}

// ---- the sending thread ------------------------------------------------

class Sender {
 public:
  explicit Sender(Control& c) : c_(c), buf_(anxin::monitor::kSdkMaxDatagramBytes) {}

  void Run() {
    std::unique_lock lock(c_.mu);
    uint64_t generation = ~0ULL;
    auto next_try = std::chrono::steady_clock::now();
    auto next_sample = next_try;
    for (;;) {
      if (c_.stopping) {
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
        c_.sender_done = true;
        c_.cv.notify_all();
        return;
      }
      if (generation != c_.config_generation) {
        generation = c_.config_generation;
        path_ = c_.socket_path;
        if (fd_ >= 0) close(fd_);
        fd_ = c_.handoff_fd;
        c_.handoff_fd = -1;
        // The configuring call set the mode to match handoff_fd already.
        next_try = std::chrono::steady_clock::now();
      }
      auto now = std::chrono::steady_clock::now();
      if (fd_ < 0 && !path_.empty() && now >= next_try) {
        lock.unlock();
        int fd = Connect(path_);
        lock.lock();
        if (generation != c_.config_generation) {
          if (fd >= 0) close(fd);
          continue;
        }
        if (fd >= 0) {
          fd_ = fd;
          g.mode.store(kConnected, std::memory_order_release);
        } else {
          next_try = now + c_.retry_interval;
        }
      }
      if (fd_ >= 0 && now >= next_sample) {
        next_sample = now + kSampleInterval;
        auto samplers = c_.samplers;
        lock.unlock();
        for (auto& [fn, arg] : samplers) fn(arg);
        lock.lock();
      }
      c_.flush_requested = false;
      bool more = Drain(lock);
      if (c_.flush_waiters > 0) c_.cv.notify_all();
      if (more) continue;  // the agent is behind: retry soon
      auto wait = fd_ >= 0 ? c_.flush_interval
                           : (path_.empty() ? std::chrono::milliseconds(3600 * 1000)
                                            : std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  next_try - std::chrono::steady_clock::now()));
      if (wait < std::chrono::milliseconds(1)) wait = std::chrono::milliseconds(1);
      c_.cv.wait_for(lock, wait, [&] {
        return c_.flush_requested || c_.stopping || generation != c_.config_generation;
      });
    }
  }

 private:
  // Sends everything buffered. Returns true when the agent's queue was full
  // and something is left to send (then the caller retries after 1 ms).
  bool Drain(std::unique_lock<std::mutex>& lock) {
    auto* ring = g.ring.load(std::memory_order_acquire);
    if (fd_ < 0) {
      // Nobody to send to: what is buffered is lost.
      DropPending();
      Event e;
      while (ring->TryPop(e)) Lost(1);
      return false;
    }
    for (;;) {
      if (pending_records_ == 0) {
        Encode(lock, *ring);
        if (pending_records_ == 0) return false;
      }
      ssize_t n = send(fd_, buf_.data(), pending_size_, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) {
        g.sent.fetch_add(pending_records_, std::memory_order_relaxed);
        g.handled.fetch_add(pending_ring_records_, std::memory_order_release);
        g.datagrams.fetch_add(1, std::memory_order_relaxed);
        ++sequence_;
        pending_records_ = pending_ring_records_ = pending_size_ = 0;
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        lock.lock();
        return true;
      }
      if (errno == EINTR) continue;
      // The agent went away (ECONNREFUSED, ENOENT, ...): lose this datagram
      // and what is buffered, and look for the agent again later.
      Disconnect(kAbsent);
      DropPending();
      Event e;
      while (ring->TryPop(e)) Lost(1);
      return false;
    }
  }

  void Lost(uint64_t ring_records) {
    g.lost.fetch_add(ring_records, std::memory_order_relaxed);
    g.handled.fetch_add(ring_records, std::memory_order_release);
  }

  // Loses the datagram being sent and the event held back for the next one.
  void DropPending() {
    if (held_valid_) {
      Lost(1);
      held_valid_ = false;
    }
    if (pending_records_ == 0) return;
    g.lost.fetch_add(pending_records_ - pending_ring_records_, std::memory_order_relaxed);
    Lost(pending_ring_records_);
    pending_records_ = pending_ring_records_ = pending_size_ = 0;
  }

  void Disconnect(Mode to) {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    g.mode.store(to, std::memory_order_release);
  }

  // Fills the datagram buffer with queued checkpoints and ring events.
  void Encode(std::unique_lock<std::mutex>& lock, anxin::sdk::EventRing<Event>& ring) {
    (void)lock;  // held: identity and checkpoints are read under it
    SdkDatagramWriter w(buf_.data(), buf_.size());
    w.BeginHeader({.pid = static_cast<uint32_t>(g.pid.load(std::memory_order_relaxed)),
                   .rank = c_.rank,
                   .world_size = c_.world_size,
                   .job = c_.job,
                   .sequence = sequence_,
                   .dropped_total = g.full.load(std::memory_order_relaxed) +
                                    g.lost.load(std::memory_order_relaxed),
                   .unsent_total = g.unsent.load(std::memory_order_relaxed)});
    while (!c_.checkpoints.empty()) {
      Checkpoint& cp = c_.checkpoints.front();
      if (!w.AddCheckpoint(cp.time_ns, cp.step, cp.path)) break;
      c_.checkpoints.pop_front();
    }
    size_t from_ring = 0;
    while (true) {
      // Peek by popping into a held event: an event that does not fit waits
      // for the next datagram.
      if (!held_valid_) {
        if (!ring.TryPop(held_)) break;
        held_valid_ = true;
      }
      if (!Add(w, held_)) break;
      held_valid_ = false;
      ++from_ring;
    }
    pending_records_ = w.records();
    pending_ring_records_ = from_ring;
    pending_size_ = w.Finish();
  }

  static bool Add(SdkDatagramWriter& w, Event& e) {
    using anxin::monitor::SdkCleanText;
    switch (static_cast<SdkRecordType>(e.type)) {
      case SdkRecordType::kStepBegin:
        return w.AddStepBegin(e.time_ns, e.a);
      case SdkRecordType::kStepEnd:
        return w.AddStepEnd(e.time_ns, e.a, e.b);
      case SdkRecordType::kCollective:
        SdkCleanText(e.text, e.text_len);
        return w.AddCollective(e.time_ns, static_cast<SdkCollectiveOp>(e.op),
                               static_cast<uint32_t>(e.small), e.a, e.b, {e.text, e.text_len});
      case SdkRecordType::kKernel:
        SdkCleanText(e.text, e.text_len);
        return w.AddKernel(e.time_ns, e.b, {e.text, e.text_len});
      case SdkRecordType::kHeartbeat:
        return w.AddHeartbeat(e.time_ns);
      case SdkRecordType::kAllocStats: {
        anxin::monitor::SdkAllocStatsFields s;
        s.device = e.small;
        s.reserved_bytes = e.a;
        s.allocated_bytes = e.b;
        s.peak_reserved_bytes = e.more[0];
        memcpy(&s.fragmentation, &e.more[1], 8);
        s.ooms = e.more[2];
        s.remaps = e.more[3];
        return w.AddAllocStats(e.time_ns, s);
      }
      case SdkRecordType::kRecovery: {
        uint64_t ns;
        memcpy(&ns, e.text + anxin::monitor::kSdkMaxFaultClassBytes, 8);
        return w.AddRecovery(e.time_ns, e.a, e.b, ns, {e.text, e.text_len});
      }
      case SdkRecordType::kCheckpoint:
        break;
    }
    return true;  // cannot happen: skip it
  }

  Control& c_;
  std::vector<uint8_t> buf_;
  std::string path_;
  int fd_ = -1;
  uint64_t sequence_ = 0;
  size_t pending_records_ = 0;
  size_t pending_ring_records_ = 0;
  size_t pending_size_ = 0;
  Event held_;
  bool held_valid_ = false;
};

// ---- initialisation ----------------------------------------------------

void AtForkChild();

// Ends and joins the sending thread; the SDK is off from then on. A thread
// still inside a sampler after a second (samplers must not block, but a
// process that exits must not hang on one that does) is left to the exit.
void StopSender() {
  Control* c = g.control.load(std::memory_order_acquire);
  if (!c) return;
  std::unique_lock lock(c->mu);
  if (!c->sender.joinable()) return;
  g.mode.store(kOff, std::memory_order_release);
  c->stopping = true;
  c->cv.notify_all();
  std::thread sender = std::move(c->sender);
  if (sender.get_id() == std::this_thread::get_id()) {
    sender.detach();  // exit() called from a sampler: the thread is ending here
    return;
  }
  const bool done = c->cv.wait_for(lock, std::chrono::seconds(1), [&] { return c->sender_done; });
  lock.unlock();
  if (done) {
    sender.join();
  } else {
    sender.detach();
  }
}

void AtExit() {
  anxin_sdk_flush(kExitFlushMs);
  StopSender();
}

// Points the SDK at c.socket_path: connects at once when the agent is
// there, so that the caller's next event is not lost, and tells the
// sending thread. REQUIRES: c.mu held.
void ConfigureLocked(Control& c) {
  if (c.handoff_fd >= 0) close(c.handoff_fd);
  bool on = !c.socket_path.empty() && c.thread_started;  // no thread: stay off
  c.handoff_fd = on ? Connect(c.socket_path) : -1;
  ++c.config_generation;
  Mode mode = !on ? kOff : (c.handoff_fd >= 0 ? kConnected : kAbsent);
  g.mode.store(mode, std::memory_order_release);
  c.cv.notify_all();
}

// Starts the sending thread (once per process). REQUIRES: c.mu held.
void StartThreadLocked(Control& c) {
  if (c.thread_started) return;
  if (!g.ring.load(std::memory_order_relaxed))
    g.ring.store(new anxin::sdk::EventRing<Event>(c.ring_capacity), std::memory_order_release);
  try {
    c.sender = std::thread([&c] { Sender(c).Run(); });
    c.thread_started = true;
  } catch (...) {
    // No thread: stay off rather than fail the caller.
  }
}

// Runs once per process (and again in a forked child).
void Init() {
  int expected = kUninit;
  if (!g.mode.compare_exchange_strong(expected, kInitializing, std::memory_order_acq_rel)) return;
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(nullptr, nullptr, AtForkChild);
    atexit(AtExit);
  });
  Control* c = g.control.load(std::memory_order_acquire);
  if (!c) {
    try {
      c = new Control;  // never freed: the sending thread may outlive static destructors
    } catch (...) {
      g.mode.store(kOff, std::memory_order_release);
      return;
    }
    g.control.store(c, std::memory_order_release);
  }
  g.pid.store(getpid(), std::memory_order_relaxed);
  std::lock_guard lock(c->mu);
  ReadEnvironment(*c);
  if (c->socket_path.empty()) {
    g.mode.store(kOff, std::memory_order_release);
    return;
  }
  StartThreadLocked(*c);
  ConfigureLocked(*c);
}

// In a child after fork only the forking thread exists: the parent's
// sending thread is gone and its lock may be held. Start afresh, with the
// parent's memory left as it is.
void AtForkChild() {
  g.control.store(nullptr, std::memory_order_relaxed);
  if (auto* ring = g.ring.load(std::memory_order_relaxed)) ring->ResetUnsafe();
  for (auto* counter :
       {&g.handled, &g.full, &g.lost, &g.unsent, &g.checkpoints, &g.sent, &g.datagrams})
    counter->store(0, std::memory_order_relaxed);
  g.mode.store(kUninit, std::memory_order_release);
}

// The mode, after initialising on the first call.
int CurrentMode() {
  int mode = g.mode.load(std::memory_order_acquire);
  if (mode == kUninit) [[unlikely]] {
    Init();
    mode = g.mode.load(std::memory_order_acquire);
  }
  return mode;
}

// For the calls off the hot path: waits out another thread's first call.
Control* EnsureControl() {
  while (CurrentMode() == kInitializing) std::this_thread::yield();
  return g.control.load(std::memory_order_acquire);
}

// The hot path: one acquire load when connected, then a push into the ring.
template <typename Fill>
inline void Emit(Fill&& fill) {
  if (g.mode.load(std::memory_order_acquire) != kConnected) [[unlikely]] {
    if (CurrentMode() != kConnected) {
      g.unsent.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  auto* ring = g.ring.load(std::memory_order_acquire);
  uint64_t now = NowNs(CLOCK_REALTIME);
  if (!ring->TryPush([&](Event& e) {
        e.time_ns = now;
        fill(e);
      }))
    g.full.fetch_add(1, std::memory_order_relaxed);
}

uint8_t CopyText(char* dst, const char* src, size_t max) {
  if (src == nullptr) return 0;  // memcpy from a null pointer is undefined even for 0 bytes
  size_t n = strnlen(src, max);
  memcpy(dst, src, n);
  return static_cast<uint8_t>(n);
}

uint64_t ClampDuration(uint64_t ns) {
  return ns > anxin::monitor::kSdkMaxDurationNs ? anxin::monitor::kSdkMaxDurationNs : ns;
}

}  // namespace

ANXIN_SDK_EXPORT void anxin_step_begin(uint64_t step) {
  if (CurrentMode() == kConnected) {
    g.begin_mono.store(NowNs(CLOCK_MONOTONIC), std::memory_order_relaxed);
    g.begin_step.store(step, std::memory_order_release);
  }
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kStepBegin);
    e.a = step;
  });
}

ANXIN_SDK_EXPORT void anxin_step_end(uint64_t step) {
  uint64_t duration = 0;
  if (CurrentMode() == kConnected) {
    uint64_t now = NowNs(CLOCK_MONOTONIC);
    uint64_t since = 0;
    if (g.begin_step.load(std::memory_order_acquire) == step)
      since = g.begin_mono.load(std::memory_order_relaxed);
    else
      since = g.last_end_mono.load(std::memory_order_relaxed);
    if (since != 0 && now > since) duration = now - since;
    g.last_end_mono.store(now, std::memory_order_relaxed);
  }
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kStepEnd);
    e.a = step;
    e.b = ClampDuration(duration);
  });
}

ANXIN_SDK_EXPORT void anxin_step_time(uint64_t step, uint64_t duration_ns) {
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kStepEnd);
    e.a = step;
    e.b = ClampDuration(duration_ns);
  });
}

ANXIN_SDK_EXPORT void anxin_collective(anxin_collective_op op, uint64_t bytes, uint64_t duration_ns,
                                       const char* algorithm, int group_size) {
  int o = static_cast<int>(op);
  if (o < 1 || o > anxin::monitor::kSdkMaxCollectiveOp) o = ANXIN_OP_OTHER;
  if (group_size < 0 || group_size > anxin::monitor::kSdkMaxWorldSize) group_size = 0;
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kCollective);
    e.op = static_cast<uint8_t>(o);
    e.small = group_size;
    e.a = bytes;
    e.b = ClampDuration(duration_ns);
    e.text_len = CopyText(e.text, algorithm, anxin::monitor::kSdkMaxAlgorithmBytes);
  });
}

ANXIN_SDK_EXPORT void anxin_kernel(const char* name, uint64_t duration_ns) {
  if (!name || !*name) return;
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kKernel);
    e.b = ClampDuration(duration_ns);
    e.text_len = CopyText(e.text, name, anxin::monitor::kSdkMaxKernelNameBytes);
  });
}

ANXIN_SDK_EXPORT void anxin_heartbeat(void) {
  Emit([](Event& e) { e.type = static_cast<uint8_t>(SdkRecordType::kHeartbeat); });
}

ANXIN_SDK_EXPORT void anxin_checkpoint_saved(uint64_t step, const char* path) {
  if (!path || !*path) return;
  // Rare and long: a small locked queue instead of the ring.
  Control* c = EnsureControl();
  if (!c || g.mode.load(std::memory_order_acquire) != kConnected) {
    g.unsent.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::string p(path, strnlen(path, anxin::monitor::kSdkMaxPathBytes));
  anxin::monitor::SdkCleanText(p.data(), p.size());
  std::lock_guard lock(c->mu);
  if (c->checkpoints.size() >= kMaxCheckpointsQueued) {
    g.full.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  c->checkpoints.push_back({NowNs(CLOCK_REALTIME), step, std::move(p)});
  g.checkpoints.fetch_add(1, std::memory_order_relaxed);
}

ANXIN_SDK_EXPORT void anxin_report_alloc_stats(int device, const anxin_sdk_alloc_stats* s) {
  if (!s || device < 0) return;
  double frag = s->fragmentation;
  if (!(frag >= 0.0)) frag = 0.0;  // also NaN
  if (frag > 1.0) frag = 1.0;
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kAllocStats);
    e.small = device;
    e.a = s->reserved_bytes;
    e.b = s->allocated_bytes;
    e.more[0] = s->peak_reserved_bytes;
    memcpy(&e.more[1], &frag, 8);
    e.more[2] = s->ooms;
    e.more[3] = s->remaps;
  });
}

ANXIN_SDK_EXPORT void anxin_report_recovery(const char* fault_class, uint64_t incidents_total,
                                            uint64_t restarts_total, uint64_t recovery_ns) {
  if (!fault_class) return;
  const size_t n = strnlen(fault_class, anxin::monitor::kSdkMaxFaultClassBytes + 1);
  if (n < 1 || n > anxin::monitor::kSdkMaxFaultClassBytes) return;
  for (size_t i = 0; i < n; ++i) {
    const char c = fault_class[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return;
  }
  if (recovery_ns > anxin::monitor::kSdkMaxDurationNs)
    recovery_ns = anxin::monitor::kSdkMaxDurationNs;
  Emit([&](Event& e) {
    e.type = static_cast<uint8_t>(SdkRecordType::kRecovery);
    e.a = restarts_total;
    e.b = incidents_total;
    memcpy(e.text, fault_class, n);
    e.text_len = static_cast<uint8_t>(n);
    memcpy(e.text + anxin::monitor::kSdkMaxFaultClassBytes, &recovery_ns, 8);
  });
}

ANXIN_SDK_EXPORT int anxin_sdk_add_sampler(void (*fn)(void* arg), void* arg) {
  if (!fn) return -1;
  Control* c = EnsureControl();
  if (!c) return -1;
  std::lock_guard lock(c->mu);
  if (c->samplers.size() >= kMaxSamplers) return -1;
  c->samplers.emplace_back(fn, arg);
  return 0;
}

ANXIN_SDK_EXPORT int anxin_sdk_set_identity(const char* job_id, int rank, int world_size) {
  if (rank < 0 || world_size < 1 || world_size > anxin::monitor::kSdkMaxWorldSize ||
      rank >= world_size)
    return -1;
  if (job_id && !ValidJobId(job_id)) return -1;
  Control* c = EnsureControl();
  if (!c) return -1;
  std::lock_guard lock(c->mu);
  if (job_id) c->job = job_id;
  c->rank = rank;
  c->world_size = world_size;
  return 0;
}

ANXIN_SDK_EXPORT int anxin_sdk_set_socket(const char* path) {
  std::string p = path ? path : "";
  if (p.size() >= sizeof(sockaddr_un::sun_path)) return -1;
  Control* c = EnsureControl();
  if (!c) return -1;
  std::lock_guard lock(c->mu);
  c->socket_path = p;
  if (!p.empty()) StartThreadLocked(*c);
  ConfigureLocked(*c);
  return 0;
}

ANXIN_SDK_EXPORT int anxin_sdk_flush(int timeout_ms) {
  Control* c = EnsureControl();
  auto* ring = g.ring.load(std::memory_order_acquire);
  if (!c || !ring || g.mode.load(std::memory_order_acquire) != kConnected) return -1;
  uint64_t target = ring->pushed();
  auto dropped = [] {
    return g.full.load(std::memory_order_relaxed) + g.lost.load(std::memory_order_relaxed);
  };
  uint64_t dropped_before = dropped();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock lock(c->mu);
  ++c->flush_waiters;
  bool done = false;
  for (;;) {
    done = g.handled.load(std::memory_order_acquire) >= target && c->checkpoints.empty();
    if (done || g.mode.load(std::memory_order_acquire) != kConnected) break;
    c->flush_requested = true;
    c->cv.notify_all();
    c->cv.wait_until(lock, deadline);
    if (std::chrono::steady_clock::now() >= deadline) {
      done = g.handled.load(std::memory_order_acquire) >= target && c->checkpoints.empty();
      break;
    }
  }
  --c->flush_waiters;
  return done && dropped() == dropped_before ? 0 : -1;
}

ANXIN_SDK_EXPORT void anxin_sdk_get_stats(anxin_sdk_stats* out) {
  if (!out) return;
  int mode = CurrentMode();
  auto* ring = g.ring.load(std::memory_order_acquire);
  uint64_t full = g.full.load(std::memory_order_relaxed);
  out->events = (ring ? ring->pushed() : 0) + full + g.unsent.load(std::memory_order_relaxed) +
                g.checkpoints.load(std::memory_order_relaxed);
  out->sent = g.sent.load(std::memory_order_relaxed);
  out->dropped = full + g.lost.load(std::memory_order_relaxed);
  out->unsent = g.unsent.load(std::memory_order_relaxed);
  out->datagrams = g.datagrams.load(std::memory_order_relaxed);
  out->connected = mode == kConnected ? 1 : 0;
  out->enabled = (mode == kConnected || mode == kAbsent) ? 1 : 0;
}

ANXIN_SDK_EXPORT int anxin_sdk_abi_version(void) { return ANXIN_SDK_ABI_VERSION; }
