/* A C program that reports through libanxin_sdk.so the way a training loop
 * does, with values chosen so that tests can check the metrics they become:
 *
 *   sdk_c_client STEPS [RATE_HZ] [KERNELS_PER_STEP]
 *
 * Each step: step_begin, KERNELS_PER_STEP (default 1) runs of kernel
 * "gemm_bf16" of 1 ms (the very last one of the run takes 4 ms), one
 * all_reduce of 256 MiB in 10 ms with algorithm "ring", step_end. Then a
 * heartbeat, a checkpoint of the last step at /ckpt/iter_<STEPS>, and allocator
 * statistics for device 0. RATE_HZ > 0 paces the steps (for soak tests).
 * Identity and socket come from the environment (ANXIN_AGENT_SOCKET,
 * ANXIN_JOB_ID, RANK, WORLD_SIZE). Prints the SDK's counters as one line of
 * JSON and exits 0 when every event reached the socket, 1 otherwise. */
#include <anxin/sdk.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s STEPS [RATE_HZ] [KERNELS_PER_STEP]\n", argv[0]);
    return 2;
  }
  uint64_t steps = strtoull(argv[1], NULL, 10);
  double rate = argc > 2 ? atof(argv[2]) : 0;
  int kernels = argc > 3 ? atoi(argv[3]) : 1;
  uint64_t period = rate > 0 ? (uint64_t)(1e9 / rate) : 0;
  uint64_t start = now_ns();
  for (uint64_t step = 0; step < steps; ++step) {
    anxin_step_begin(step);
    for (int k = 0; k < kernels; ++k) {
      int last = step + 1 == steps && k + 1 == kernels;
      anxin_kernel("gemm_bf16", last ? 4000000 : 1000000);
    }
    anxin_collective(ANXIN_OP_ALL_REDUCE, 256ull << 20, 10000000, "ring", 0);
    anxin_step_end(step);
    if (period) {
      uint64_t next = start + (step + 1) * period;
      uint64_t t = now_ns();
      if (next > t) {
        struct timespec d = {(time_t)((next - t) / 1000000000ull),
                             (long)((next - t) % 1000000000ull)};
        nanosleep(&d, NULL);
      }
    }
  }
  anxin_heartbeat();
  char path[64];
  snprintf(path, sizeof path, "/ckpt/iter_%llu", (unsigned long long)steps);
  anxin_checkpoint_saved(steps, path);
  anxin_sdk_alloc_stats a = {8ull << 30, 6ull << 30, 9ull << 30, 0.125, 0, 2};
  anxin_report_alloc_stats(0, &a);
  int flushed = anxin_sdk_flush(10000);
  anxin_sdk_stats s;
  anxin_sdk_get_stats(&s);
  printf(
      "{\"events\": %llu, \"sent\": %llu, \"dropped\": %llu, \"unsent\": %llu, "
      "\"datagrams\": %llu, \"connected\": %d}\n",
      (unsigned long long)s.events, (unsigned long long)s.sent, (unsigned long long)s.dropped,
      (unsigned long long)s.unsent, (unsigned long long)s.datagrams, s.connected);
  return flushed == 0 ? 0 : 1;
}
