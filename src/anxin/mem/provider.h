// Memory providers: the one door between the allocator core and a device.
//
// A provider either supports virtual memory (reserve an address range, create
// physical chunks, map and unmap them anywhere in a reserved range) or only
// plain allocate/free. The allocator core (allocator.h) uses the first kind to
// keep free memory contiguous by remapping, and falls back to segments on the
// second kind.
//
//   // MakeProvider (alloc_config.h) picks one from ANXIN_ALLOC_CONF.
//   std::unique_ptr<Provider> provider = MakeSimProvider({});
//   if (provider->SupportsVirtualMemory()) {
//     ANXIN_ASSIGN_OR_RETURN(uint64_t va, provider->ReserveAddress(1 << 30));
//   }
//
// Providers: "sim" (host memory or pure accounting; for tests and replay),
// "cuda" (libcuda driver API through dlopen), "acl" (Ascend ACL through dlopen;
// unverified until it runs on an NPU).
//
// Thread safety: a provider is called with the allocator's lock held; it need
// not be thread-safe itself.
#ifndef ANXIN_MEM_PROVIDER_H_
#define ANXIN_MEM_PROVIDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin::mem {

// An opaque physical-memory handle (CUmemGenericAllocationHandle and the like).
using PhysicalHandle = uint64_t;

class Provider {
 public:
  virtual ~Provider() = default;

  virtual std::string_view name() const = 0;
  // Device memory in bytes (the base of `pool_size` fractions).
  virtual uint64_t TotalMemory() const = 0;
  // True when ReserveAddress/CreatePhysical/Map/Unmap work.
  virtual bool SupportsVirtualMemory() const = 0;
  // The smallest unit of physical memory and mapping (2 MiB on CUDA).
  virtual uint64_t Granularity() const = 0;

  // Virtual memory. REQUIRES SupportsVirtualMemory(). Sizes are multiples of
  // Granularity().
  virtual Result<uint64_t> ReserveAddress(uint64_t size) = 0;
  virtual Status ReleaseAddress(uint64_t va, uint64_t size) = 0;
  virtual Result<PhysicalHandle> CreatePhysical(uint64_t size) = 0;
  virtual Status ReleasePhysical(PhysicalHandle handle, uint64_t size) = 0;
  // Maps `handle` (of `size` bytes) at `va` with read/write access.
  virtual Status Map(uint64_t va, uint64_t size, PhysicalHandle handle) = 0;
  // Waits until no device work queued so far can touch memory. A block the
  // framework has freed may still be in use by kernels in flight on its
  // stream (reuse on the same stream is ordered; unmapping is not), so the
  // allocator calls this once before each batch of Unmap calls: a reclaim
  // pass, empty_cache, teardown. Providers with no asynchronous work keep the
  // default.
  virtual Status Synchronize() { return Ok(); }
  // Unmaps the range. REQUIRES Synchronize() since the range was last handed
  // out; the unmap itself does not wait for the device.
  virtual Status Unmap(uint64_t va, uint64_t size) = 0;

  // Plain device allocation (cudaMalloc-like); every provider supports it.
  virtual Result<uint64_t> Allocate(uint64_t size) = 0;
  virtual Status Free(uint64_t ptr, uint64_t size) = 0;
};

// The simulated device.
struct SimOptions {
  uint64_t capacity = uint64_t{16} << 30;
  uint64_t granularity = uint64_t{2} << 20;
  // true: virtual-memory provider; false: plain allocate/free only.
  bool virtual_memory = true;
  // true: real host memory (memfd chunks mapped with mmap, so remapped data
  // stays readable); false: addresses only, nothing is touched (replays of
  // 60 GiB traces on a laptop).
  bool backed = false;
  // Fault injection for tests: called before each operation ("create",
  // "map", "unmap", "synchronize", "release", "allocate", "reserve");
  // returning true makes that call fail (create, map, allocate and reserve as
  // if the device were out of memory; the others as a device error would).
  std::function<bool(std::string_view op)> fail;
  // For tests: told of each "synchronize" and "unmap", in order.
  std::function<void(std::string_view op)> observe;
};
std::unique_ptr<Provider> MakeSimProvider(SimOptions options);

// The CUDA driver (libcuda.so.1 through dlopen) on `device`. kUnavailable with
// advice when the library or the device is missing.
Result<std::unique_ptr<Provider>> MakeCudaProvider(int device);

// Ascend ACL (libascendcl.so through dlopen) on `device`. Written against
// CANN's documented prototypes; kUnavailable with advice when missing.
Result<std::unique_ptr<Provider>> MakeAclProvider(int device);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_PROVIDER_H_
