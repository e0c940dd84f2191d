// Stopping on SIGINT / SIGTERM, one way for the whole program: a stop source
// that the signals request, owned by the scope that waits for them.
//
//   #include "anxin/base/clock.h"
//
//   StopOnSignals stop;                        // before starting any thread
//   std::jthread worker([t = stop.token()] {   // any std::stop_token user stops with it
//     while (RealClock().SleepFor(1s, t)) spdlog::info("working");
//   });
//   if (stop.WaitFor(30) == 0) spdlog::info("30 s passed");  // else the signal's number
//   stop.Trigger(SIGTERM);                     // what a signal does, for tests
//
// How: the constructor blocks SIGINT and SIGTERM in the calling thread, so
// that the threads it starts afterwards inherit the block and no blocking call
// anywhere sees EINTR; a watcher thread, owned by the object and joined by its
// destructor, reads them from a signalfd and requests the stop. Children
// started by Subprocess get the default signal mask back. With
// SecondSignal::kEnds (the default) a second signal ends the program as it
// would without any handler, so a stuck shutdown can still be interrupted;
// kRecorded keeps taking them (signal() reports the last one).
//
// For code that only waits (a server's main thread): BlockStopSignals()
// before starting threads, then WaitForStop(seconds) where it should block.
//
// Thread safety: token(), signal(), WaitFor() and Trigger() may be called
// from any thread. REQUIRES: at most one StopOnSignals at a time; construct
// and destroy it on the same thread.
#ifndef ANXIN_BASE_STOP_TOKEN_H_
#define ANXIN_BASE_STOP_TOKEN_H_

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

namespace anxin {

enum class SecondSignal { kEnds, kRecorded };

class StopOnSignals {
 public:
  explicit StopOnSignals(SecondSignal second = SecondSignal::kEnds);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

  std::stop_token token() const { return source_.get_token(); }
  bool stop_requested() const { return source_.stop_requested(); }
  // The signal that requested the stop (the last one with kRecorded); 0 before.
  int signal() const { return signal_.load(); }
  // Blocks until the stop is requested (returns signal()) or `seconds` pass
  // (returns 0); seconds <= 0 waits without a limit.
  int WaitFor(double seconds);
  // Does what the arrival of `sig` does.
  void Trigger(int sig);

 private:
  void Watch();

  SecondSignal second_;
  std::stop_source source_;
  std::atomic<int> signal_{0};
  std::mutex mu_;
  std::condition_variable_any cv_;
  sigset_t old_mask_{};
  int signal_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: the destructor ends the watcher with it
  std::thread watcher_;
};

// Blocks SIGINT and SIGTERM in this thread (and threads started later). Call
// before starting threads.
void BlockStopSignals();
// Returns the signal that arrived, or 0 when duration_seconds (> 0) passed;
// duration_seconds <= 0 waits for a signal without a limit. REQUIRES:
// BlockStopSignals() was called first.
int WaitForStop(double duration_seconds);

}  // namespace anxin

#endif  // ANXIN_BASE_STOP_TOKEN_H_
