// The Ascend provider: ACL runtime virtual memory (aclrtReserveMemAddress,
// aclrtMallocPhysical, aclrtMapMem) through dlopen of libascendcl.so. The
// prototypes and enum values below are declared here from CANN's acl_rt.h
// documentation, so that anxin builds without CANN. Unverified until it runs
// on an NPU (docs/mem.md).
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>

#include "anxin/base/dynamic_library.h"
#include "anxin/mem/provider.h"

namespace anxin::mem {
namespace {

using aclError = int;
using aclrtDrvMemHandle = void*;

constexpr int kAclHbmMem = 1;              // aclrtMemAttr ACL_HBM_MEM
constexpr int kAclHbmMemHuge = 4;          // aclrtMemAttr ACL_HBM_MEM_HUGE
constexpr int kAclMemMallocHugeFirst = 0;  // aclrtMemMallocPolicy
constexpr int kAclMemLocationDevice = 1;   // aclrtMemLocationType
constexpr int kAclGranularityMinimum = 0;  // aclrtMemGranularityOptions
constexpr int kAclErrorRtMemoryAllocation = 207001;

struct AclMemLocation {
  uint32_t id;
  int type;
};
struct AclPhysicalMemProp {
  int handleType;      // ACL_MEM_HANDLE_TYPE_NONE
  int allocationType;  // ACL_MEM_ALLOCATION_TYPE_PINNED
  int memAttr;
  AclMemLocation location;
  uint64_t reserve;
};

struct AclApi {
  aclError (*aclrtSetDevice)(int32_t);
  aclError (*aclrtGetMemInfo)(int, size_t*, size_t*);
  aclError (*aclrtMalloc)(void**, size_t, int);
  aclError (*aclrtFree)(void*);
  aclError (*aclrtReserveMemAddress)(void**, size_t, size_t, void*, uint64_t);
  aclError (*aclrtReleaseMemAddress)(void*);
  aclError (*aclrtMallocPhysical)(aclrtDrvMemHandle*, size_t, const AclPhysicalMemProp*, uint64_t);
  aclError (*aclrtFreePhysical)(aclrtDrvMemHandle);
  aclError (*aclrtMapMem)(void*, size_t, size_t, aclrtDrvMemHandle, uint64_t);
  aclError (*aclrtUnmapMem)(void*);
  aclError (*aclrtSynchronizeDevice)();
  aclError (*aclrtMemGetAllocationGranularity)(AclPhysicalMemProp*, int, size_t*);
};

class AclProvider final : public Provider {
 public:
  AclProvider(AclApi api, int device, uint64_t total, uint64_t granularity, bool vmm)
      : api_(api), device_(device), total_(total), granularity_(granularity), vmm_(vmm) {}

  std::string_view name() const override { return "acl"; }
  uint64_t TotalMemory() const override { return total_; }
  bool SupportsVirtualMemory() const override { return vmm_; }
  uint64_t Granularity() const override { return granularity_; }

  Result<uint64_t> ReserveAddress(uint64_t size) override {
    void* va = nullptr;
    ANXIN_TRY(
        Check(api_.aclrtReserveMemAddress(&va, size, 0, nullptr, 0), "aclrtReserveMemAddress"));
    return reinterpret_cast<uint64_t>(va);
  }
  Status ReleaseAddress(uint64_t va, uint64_t) override {
    return Check(api_.aclrtReleaseMemAddress(reinterpret_cast<void*>(va)),
                 "aclrtReleaseMemAddress");
  }
  Result<PhysicalHandle> CreatePhysical(uint64_t size) override {
    AclPhysicalMemProp prop = Prop();
    aclrtDrvMemHandle h = nullptr;
    ANXIN_TRY(Check(api_.aclrtMallocPhysical(&h, size, &prop, 0), "aclrtMallocPhysical"));
    return reinterpret_cast<PhysicalHandle>(h);
  }
  Status ReleasePhysical(PhysicalHandle handle, uint64_t) override {
    return Check(api_.aclrtFreePhysical(reinterpret_cast<aclrtDrvMemHandle>(handle)),
                 "aclrtFreePhysical");
  }
  Status Map(uint64_t va, uint64_t size, PhysicalHandle handle) override {
    return Check(api_.aclrtMapMem(reinterpret_cast<void*>(va), size, 0,
                                  reinterpret_cast<aclrtDrvMemHandle>(handle), 0),
                 "aclrtMapMem");
  }
  // As with CUDA, a freed block may still be in use by tasks queued on its
  // stream: the allocator drains the device before a batch of unmaps.
  Status Synchronize() override {
    return Check(api_.aclrtSynchronizeDevice(), "aclrtSynchronizeDevice");
  }
  Status Unmap(uint64_t va, uint64_t) override {
    return Check(api_.aclrtUnmapMem(reinterpret_cast<void*>(va)), "aclrtUnmapMem");
  }
  Result<uint64_t> Allocate(uint64_t size) override {
    void* p = nullptr;
    ANXIN_TRY(Check(api_.aclrtMalloc(&p, size, kAclMemMallocHugeFirst), "aclrtMalloc"));
    return reinterpret_cast<uint64_t>(p);
  }
  Status Free(uint64_t ptr, uint64_t) override {
    return Check(api_.aclrtFree(reinterpret_cast<void*>(ptr)), "aclrtFree");
  }

 private:
  AclPhysicalMemProp Prop() const {
    AclPhysicalMemProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.memAttr = kAclHbmMemHuge;
    prop.location = {static_cast<uint32_t>(device_), kAclMemLocationDevice};
    return prop;
  }
  Status Check(aclError rc, const char* what) const {
    if (rc == 0) return Ok();
    std::string text = fmt::format("acl device {}: {} failed (aclError {})", device_, what, rc);
    return MakeError(
        rc == kAclErrorRtMemoryAllocation ? ErrorCode::kResourceExhausted : ErrorCode::kUnavailable,
        text);
  }

  AclApi api_;
  int device_;
  uint64_t total_;
  uint64_t granularity_;
  bool vmm_;
};

}  // namespace

Result<std::unique_ptr<Provider>> MakeAclProvider(int device) {
  ANXIN_ASSIGN_OR_RETURN(void* lib,
                         OpenLibrary("acl provider", "libascendcl.so",
                                     "install CANN and source set_env.sh (LD_LIBRARY_PATH), or "
                                     "use provider:sim on a machine without an NPU"));
  AclApi api{};
  bool ok = LoadSymbol(lib, "aclrtSetDevice", api.aclrtSetDevice) &&
            LoadSymbol(lib, "aclrtGetMemInfo", api.aclrtGetMemInfo) &&
            LoadSymbol(lib, "aclrtMalloc", api.aclrtMalloc) &&
            LoadSymbol(lib, "aclrtFree", api.aclrtFree);
  if (!ok) return Unavailable("acl provider: libascendcl.so lacks aclrtMalloc; update CANN");
  bool vmm =
      LoadSymbol(lib, "aclrtReserveMemAddress", api.aclrtReserveMemAddress) &&
      LoadSymbol(lib, "aclrtReleaseMemAddress", api.aclrtReleaseMemAddress) &&
      LoadSymbol(lib, "aclrtMallocPhysical", api.aclrtMallocPhysical) &&
      LoadSymbol(lib, "aclrtFreePhysical", api.aclrtFreePhysical) &&
      LoadSymbol(lib, "aclrtMapMem", api.aclrtMapMem) &&
      LoadSymbol(lib, "aclrtUnmapMem", api.aclrtUnmapMem) &&
      LoadSymbol(lib, "aclrtSynchronizeDevice", api.aclrtSynchronizeDevice) &&
      LoadSymbol(lib, "aclrtMemGetAllocationGranularity", api.aclrtMemGetAllocationGranularity);
  if (aclError rc = api.aclrtSetDevice(device); rc != 0) {
    return Unavailable(fmt::format(
        "acl provider: aclrtSetDevice({}) failed (aclError {}): check the device with npu-smi "
        "info and ASCEND_RT_VISIBLE_DEVICES",
        device, rc));
  }
  size_t free_bytes = 0, total = 0;
  if (aclError rc = api.aclrtGetMemInfo(kAclHbmMem, &free_bytes, &total); rc != 0) {
    return Unavailable(fmt::format("acl provider: aclrtGetMemInfo failed (aclError {})", rc));
  }
  size_t granularity = 2 << 20;
  if (vmm) {
    AclPhysicalMemProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.memAttr = kAclHbmMemHuge;
    prop.location = {static_cast<uint32_t>(device), kAclMemLocationDevice};
    if (api.aclrtMemGetAllocationGranularity(&prop, kAclGranularityMinimum, &granularity) != 0) {
      granularity = 2 << 20;
    }
  }
  return std::make_unique<AclProvider>(api, device, total, granularity, vmm);
}

}  // namespace anxin::mem
