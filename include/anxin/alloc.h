/* libanxin_alloc: anxin's device-memory allocator as the C functions that
 * PyTorch's CUDAPluggableAllocator and torch_npu's NPUPluggableAllocator load.
 *
 *   import torch
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "/usr/lib/anxin/libanxin_alloc.so", "anxin_alloc", "anxin_free")
 *   torch.cuda.memory.change_current_allocator(alloc)   # before the first tensor
 *
 * Configured by the environment variable ANXIN_ALLOC_CONF, read at the first
 * call, e.g. "provider:cuda,pool_size:0.85,block_size:2MiB,expand:true,
 * fragment_threshold:0.02" (docs/mem.md lists every key).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef ANXIN_ALLOC_H_
#define ANXIN_ALLOC_H_

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The pluggable-allocator ABI. anxin_alloc returns NULL when the memory
 * cannot be had (PyTorch then raises its out-of-memory error); the reason is
 * printed to stderr once and kept for anxin_alloc_last_error(). */
void* anxin_alloc(ssize_t size, int device, void* stream);
void anxin_free(void* ptr, ssize_t size, int device, void* stream);

/* Returns cached blocks and idle physical memory of `device` to the driver.
 * 0 on success, -1 on error (see anxin_alloc_last_error). */
int anxin_empty_cache(int device);

typedef struct anxin_alloc_stats {
  uint64_t reserved_bytes;     /* physical memory held */
  uint64_t allocated_bytes;    /* in blocks handed out */
  uint64_t requested_bytes;    /* as asked */
  uint64_t cached_bytes;       /* freed blocks kept for reuse */
  uint64_t largest_free_block; /* largest request servable without new memory */
  uint64_t pool_limit_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t peak_allocated_bytes;
  double fragmentation; /* 1 - largest_free_block / (reserved - allocated) */
  uint64_t allocs, frees;
  uint64_t device_allocs, device_frees;
  uint64_t maps, unmaps;
  uint64_t retries; /* allocations that succeeded after reclaiming */
  uint64_t ooms;
  uint64_t expansions; /* allocations that grew beyond the pool */
} anxin_alloc_stats;

/* Fills *out for `device`. 0 on success; -1 when the device has no allocator
 * yet or out is NULL. */
int anxin_alloc_get_stats(int device, anxin_alloc_stats* out);

/* The last error as text ("" when none). The pointer stays valid until the
 * next failing call on this thread. */
const char* anxin_alloc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* ANXIN_ALLOC_H_ */
