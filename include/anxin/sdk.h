/* libanxin_sdk: job telemetry for training processes. A rank reports its
 * steps, collective and kernel timings, heartbeats, checkpoints and
 * allocator statistics to the node's anxin agent (or to `anxin run`), which
 * turns them into metrics: step time, collective bus bandwidth, kernel
 * jitter, heartbeat age. docs/sdk.md has the whole story.
 *
 *   #include <anxin/sdk.h>          // link with -lanxin_sdk
 *
 *   for (uint64_t step = first; step < last; ++step) {
 *     anxin_step_begin(step);
 *     forward_backward();
 *     anxin_collective(ANXIN_OP_ALL_REDUCE, grad_bytes, allreduce_ns, "ring", 0);
 *     anxin_step_end(step);
 *     if (step % 1000 == 0) anxin_checkpoint_saved(step, "/ckpt/iter_0001000");
 *   }
 *
 * Delivery: the calls write into a bounded in-process buffer that a
 * background thread sends in batches over the AF_UNIX datagram socket named
 * by ANXIN_AGENT_SOCKET. Nothing here ever blocks, fails or allocates on
 * the caller's thread:
 *   - without ANXIN_AGENT_SOCKET the SDK is off: a call costs one atomic
 *     load and a counter increment, and no thread is started;
 *   - with it set but no agent listening, calls are counted as "unsent" and
 *     dropped at the same cost; the background thread looks for the agent
 *     again every second (ANXIN_SDK_RETRY_MS) and resumes when it is back;
 *   - when the buffer is full (the agent is slower than the job), events are
 *     dropped and counted; memory never grows.
 *
 * Identity, read at the first call unless set with anxin_sdk_set_identity:
 * job id from ANXIN_JOB_ID (else SLURM_JOB_ID, else "unknown"); rank from
 * RANK (else OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID; else 0); world
 * size from WORLD_SIZE (else OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS;
 * else 1).
 *
 * Other variables: ANXIN_SDK_FLUSH_MS (send interval, default 10),
 * ANXIN_SDK_RETRY_MS (how often an absent agent is looked for, default
 * 1000), ANXIN_SDK_BUFFER_EVENTS (buffer size in events, a power of two,
 * default 4096: about 136 bytes each).
 *
 * Strings are copied; kernel names longer than 96 bytes, algorithm names
 * longer than 32 and paths longer than 4096 are cut, and bytes that are not
 * printable UTF-8 become '?'.
 *
 * Thread safety: every function may be called from any thread, also from
 * a child after fork() (the child starts its own background thread).
 */
#ifndef ANXIN_SDK_H_
#define ANXIN_SDK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a function's meaning changes; anxin_sdk_abi_version() returns it. */
#define ANXIN_SDK_ABI_VERSION 1

typedef enum anxin_collective_op {
  ANXIN_OP_ALL_REDUCE = 1,
  ANXIN_OP_ALL_GATHER = 2,
  ANXIN_OP_REDUCE_SCATTER = 3,
  ANXIN_OP_ALL_TO_ALL = 4,
  ANXIN_OP_BROADCAST = 5,
  ANXIN_OP_REDUCE = 6,
  ANXIN_OP_SEND_RECV = 7,
  ANXIN_OP_BARRIER = 8,
  ANXIN_OP_OTHER = 9
} anxin_collective_op;

/* A step: begin and end on the same process. The duration reported with
 * anxin_step_end is the time since anxin_step_begin(step) for the same step;
 * without one, the time since the previous anxin_step_end; for the very
 * first step without either, the step is counted but has no duration. */
void anxin_step_begin(uint64_t step);
void anxin_step_end(uint64_t step);
/* A step the caller timed itself. */
void anxin_step_time(uint64_t step, uint64_t duration_ns);

/* One collective operation. bytes follows nccl-tests' "size": the bytes of
 * the whole buffer (for all_gather the gathered output, for reduce_scatter
 * the input, for all_reduce and broadcast the one buffer). group_size is
 * the number of ranks taking part (0: the world size). algorithm may be
 * NULL (e.g. "ring", "tree", "NHR"). The agent derives algorithm bandwidth
 * bytes / duration and bus bandwidth with nccl-tests' factors. */
void anxin_collective(anxin_collective_op op, uint64_t bytes, uint64_t duration_ns,
                      const char* algorithm, int group_size);

/* One kernel run (name required; NULL or "" is ignored). */
void anxin_kernel(const char* name, uint64_t duration_ns);

/* "This rank is alive and making progress." Steps count as heartbeats too;
 * call this from long phases without steps (data loading, evaluation). */
void anxin_heartbeat(void);

/* A checkpoint of `step` was written completely to `path`. */
void anxin_checkpoint_saved(uint64_t step, const char* path);

/* Device-memory allocator statistics for one device (libanxin_alloc.so
 * reports its own through this when an agent is there). */
typedef struct anxin_sdk_alloc_stats {
  uint64_t reserved_bytes;  /* held from the device */
  uint64_t allocated_bytes; /* handed out to the program */
  uint64_t peak_reserved_bytes;
  double fragmentation; /* 0..1; values outside are clamped */
  uint64_t ooms;        /* cumulative */
  uint64_t remaps;      /* cumulative chunk (re)mappings */
} anxin_sdk_alloc_stats;
void anxin_report_alloc_stats(int device, const anxin_sdk_alloc_stats* stats);

/* For supervisors (`anxin run` sends the same itself): the job's recovery
 * counts, cumulative since the job began. fault_class: 1..32 characters of
 * [a-z0-9_] (else the call is ignored); incidents_total: faults of that
 * class that started a recovery; restarts_total: relaunches of the job;
 * recovery_ns: the recovery this call reports (fault to first progress), 0
 * for none. The agent turns them into anxin_job_restarts_total,
 * anxin_job_incidents_total{fault_class} and anxin_job_last_recovery_seconds. */
void anxin_report_recovery(const char* fault_class, uint64_t incidents_total,
                           uint64_t restarts_total, uint64_t recovery_ns);

/* Registers fn(arg) to be called about once a second from the SDK's
 * background thread while an agent is connected, to report gauges such as
 * allocator statistics. fn must not block. At most 8 samplers; returns 0, or
 * -1 when fn is NULL or the table is full. */
int anxin_sdk_add_sampler(void (*fn)(void* arg), void* arg);

/* Sets the identity explicitly (overrides the environment). job_id: 1..64
 * printable ASCII characters other than '"' and '\' (NULL keeps the current
 * one); 0 <= rank < world_size. Returns 0, or -1 (nothing changed) when a
 * value is invalid. */
int anxin_sdk_set_identity(const char* job_id, int rank, int world_size);

/* Sends to the socket at `path` from now on instead of ANXIN_AGENT_SOCKET;
 * NULL or "" turns the SDK off. Returns 0, or -1 when the path is longer
 * than a socket address can hold. */
int anxin_sdk_set_socket(const char* path);

/* Waits up to timeout_ms until every event made before the call has been
 * handed to the agent's socket. Returns 0 when they all were, -1 when some
 * were not (no agent, dropped, or out of time). Runs at exit by itself with
 * a short timeout, so a job's last events are not lost. */
int anxin_sdk_flush(int timeout_ms);

typedef struct anxin_sdk_stats {
  uint64_t events;    /* calls that made an event */
  uint64_t sent;      /* events handed to the agent's socket */
  uint64_t dropped;   /* lost while an agent was connected: buffer full or send failed */
  uint64_t unsent;    /* made while the SDK was off or no agent was connected */
  uint64_t datagrams; /* datagrams sent */
  int connected;      /* 1 while an agent is connected */
  int enabled;        /* 1 when a socket is configured */
} anxin_sdk_stats;
void anxin_sdk_get_stats(anxin_sdk_stats* out);

int anxin_sdk_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* ANXIN_SDK_H_ */
