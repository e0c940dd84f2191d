// The CUDA provider: the driver's virtual memory API through dlopen of
// libcuda.so.1. The prototypes below are declared here, from the CUDA driver
// API reference, so that anxin builds without the CUDA toolkit.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "anxin/base/dynamic_library.h"
#include "anxin/mem/provider.h"

namespace anxin::mem {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;

constexpr int kCuMemAllocationTypePinned = 1;
constexpr int kCuMemHandleTypeNone = 0;
constexpr int kCuMemLocationTypeDevice = 1;
constexpr int kCuMemAccessFlagsReadWrite = 3;
constexpr int kCuMemAllocGranularityMinimum = 0;
constexpr int kCuDeviceAttributeVmmSupported = 102;  // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED

struct CUmemLocation {
  int type;
  int id;
};
struct CUmemAllocationProp {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;
};

struct CudaApi {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuMemGetAllocationGranularity)(size_t*, const CUmemAllocationProp*, int);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                          unsigned long long);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
  CUresult (*cuMemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                       unsigned long long);
  CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
};

class CudaProvider final : public Provider {
 public:
  CudaProvider(CudaApi api, int device, CUdevice dev, CUcontext ctx, uint64_t total,
               uint64_t granularity, bool vmm)
      : api_(api),
        device_(device),
        dev_(dev),
        ctx_(ctx),
        total_(total),
        granularity_(granularity),
        vmm_(vmm) {}

  std::string_view name() const override { return "cuda"; }
  uint64_t TotalMemory() const override { return total_; }
  bool SupportsVirtualMemory() const override { return vmm_; }
  uint64_t Granularity() const override { return granularity_; }

  Result<uint64_t> ReserveAddress(uint64_t size) override {
    ANXIN_TRY(Bind());
    CUdeviceptr va = 0;
    ANXIN_TRY(
        Check(api_.cuMemAddressReserve(&va, size, granularity_, 0, 0), "cuMemAddressReserve"));
    return va;
  }
  Status ReleaseAddress(uint64_t va, uint64_t size) override {
    return Check(api_.cuMemAddressFree(va, size), "cuMemAddressFree");
  }
  Result<PhysicalHandle> CreatePhysical(uint64_t size) override {
    ANXIN_TRY(Bind());
    CUmemAllocationProp prop = Prop();
    CUmemGenericAllocationHandle h = 0;
    ANXIN_TRY(Check(api_.cuMemCreate(&h, size, &prop, 0), "cuMemCreate"));
    return h;
  }
  Status ReleasePhysical(PhysicalHandle handle, uint64_t) override {
    return Check(api_.cuMemRelease(handle), "cuMemRelease");
  }
  Status Map(uint64_t va, uint64_t size, PhysicalHandle handle) override {
    ANXIN_TRY(Check(api_.cuMemMap(va, size, 0, handle, 0), "cuMemMap"));
    CUmemAccessDesc access{{kCuMemLocationTypeDevice, dev_}, kCuMemAccessFlagsReadWrite};
    auto set = Check(api_.cuMemSetAccess(va, size, &access, 1), "cuMemSetAccess");
    if (!set) {
      (void)api_.cuMemUnmap(va, size);
      return set;
    }
    return Ok();
  }
  // cuMemUnmap does not wait for work queued on the device: the allocator
  // calls this first (Provider::Synchronize). Without it, a remap while a
  // training step runs is an illegal address in a kernel still in flight.
  Status Synchronize() override {
    ANXIN_TRY(Bind());
    return Check(api_.cuCtxSynchronize(), "cuCtxSynchronize");
  }
  Status Unmap(uint64_t va, uint64_t size) override {
    return Check(api_.cuMemUnmap(va, size), "cuMemUnmap");
  }
  Result<uint64_t> Allocate(uint64_t size) override {
    ANXIN_TRY(Bind());
    CUdeviceptr p = 0;
    ANXIN_TRY(Check(api_.cuMemAlloc(&p, size), "cuMemAlloc"));
    return p;
  }
  Status Free(uint64_t ptr, uint64_t) override { return Check(api_.cuMemFree(ptr), "cuMemFree"); }

 private:
  CUmemAllocationProp Prop() const {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.type = kCuMemAllocationTypePinned;
    prop.requestedHandleTypes = kCuMemHandleTypeNone;
    prop.location = {kCuMemLocationTypeDevice, dev_};
    return prop;
  }
  // The calling thread may have no current context (a fresh thread under
  // PyTorch); make the device's primary context current.
  Status Bind() {
    CUcontext cur = nullptr;
    if (api_.cuCtxGetCurrent(&cur) == 0 && cur != nullptr) return Ok();
    return Check(api_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  }
  Status Check(CUresult rc, const char* what) const {
    if (rc == 0) return Ok();
    const char* msg = nullptr;
    if (api_.cuGetErrorString) api_.cuGetErrorString(rc, &msg);
    std::string text = fmt::format("cuda device {}: {} failed: {} (CUresult {})", device_, what,
                                   msg ? msg : "unknown error", rc);
    // 2 = CUDA_ERROR_OUT_OF_MEMORY.
    return MakeError(rc == 2 ? ErrorCode::kResourceExhausted : ErrorCode::kUnavailable, text);
  }

  CudaApi api_;
  int device_;
  CUdevice dev_;
  CUcontext ctx_;
  uint64_t total_;
  uint64_t granularity_;
  bool vmm_;
};

}  // namespace

Result<std::unique_ptr<Provider>> MakeCudaProvider(int device) {
  CudaApi api{};
  ANXIN_ASSIGN_OR_RETURN(api.lib, OpenLibrary("cuda provider", "libcuda.so.1",
                                              "install the NVIDIA driver, or use provider:sim "
                                              "(ANXIN_ALLOC_CONF=provider:sim) on a machine "
                                              "without a GPU"));
  // Closed again on every error below; handed to the provider on success.
  std::unique_ptr<void, int (*)(void*)> library(api.lib, &dlclose);
  bool ok = LoadSymbol(api.lib, "cuInit", api.cuInit) &&
            LoadSymbol(api.lib, "cuDeviceGet", api.cuDeviceGet) &&
            LoadSymbol(api.lib, "cuDeviceGetAttribute", api.cuDeviceGetAttribute) &&
            LoadSymbol(api.lib, "cuDeviceTotalMem_v2", api.cuDeviceTotalMem) &&
            LoadSymbol(api.lib, "cuCtxGetCurrent", api.cuCtxGetCurrent) &&
            LoadSymbol(api.lib, "cuCtxSetCurrent", api.cuCtxSetCurrent) &&
            LoadSymbol(api.lib, "cuCtxSynchronize", api.cuCtxSynchronize) &&
            LoadSymbol(api.lib, "cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain) &&
            LoadSymbol(api.lib, "cuGetErrorString", api.cuGetErrorString) &&
            LoadSymbol(api.lib, "cuMemAlloc_v2", api.cuMemAlloc) &&
            LoadSymbol(api.lib, "cuMemFree_v2", api.cuMemFree);
  if (!ok) {
    return Unavailable(
        "cuda provider: libcuda.so.1 lacks basic driver functions; update the "
        "NVIDIA driver");
  }
  bool vmm_symbols =
      LoadSymbol(api.lib, "cuMemGetAllocationGranularity", api.cuMemGetAllocationGranularity) &&
      LoadSymbol(api.lib, "cuMemCreate", api.cuMemCreate) &&
      LoadSymbol(api.lib, "cuMemRelease", api.cuMemRelease) &&
      LoadSymbol(api.lib, "cuMemAddressReserve", api.cuMemAddressReserve) &&
      LoadSymbol(api.lib, "cuMemAddressFree", api.cuMemAddressFree) &&
      LoadSymbol(api.lib, "cuMemMap", api.cuMemMap) &&
      LoadSymbol(api.lib, "cuMemUnmap", api.cuMemUnmap) &&
      LoadSymbol(api.lib, "cuMemSetAccess", api.cuMemSetAccess);
  auto fail = [&](const char* what, CUresult rc) {
    return Unavailable(fmt::format(
        "cuda provider: {} failed for device {} (CUresult {}): check that the device exists "
        "(nvidia-smi) and CUDA_VISIBLE_DEVICES",
        what, device, rc));
  };
  if (CUresult rc = api.cuInit(0); rc != 0) return fail("cuInit", rc);
  CUdevice dev = 0;
  if (CUresult rc = api.cuDeviceGet(&dev, device); rc != 0) return fail("cuDeviceGet", rc);
  size_t total = 0;
  if (CUresult rc = api.cuDeviceTotalMem(&total, dev); rc != 0) return fail("cuDeviceTotalMem", rc);
  CUcontext ctx = nullptr;
  if (CUresult rc = api.cuDevicePrimaryCtxRetain(&ctx, dev); rc != 0) {
    return fail("cuDevicePrimaryCtxRetain", rc);
  }
  int vmm = 0;
  if (vmm_symbols) api.cuDeviceGetAttribute(&vmm, kCuDeviceAttributeVmmSupported, dev);
  size_t granularity = 2 << 20;
  if (vmm) {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.type = kCuMemAllocationTypePinned;
    prop.location = {kCuMemLocationTypeDevice, dev};
    if (api.cuMemGetAllocationGranularity(&granularity, &prop, kCuMemAllocGranularityMinimum) !=
        0) {
      granularity = 2 << 20;
    }
  }
  library.release();
  return std::make_unique<CudaProvider>(api, device, dev, ctx, total, granularity, vmm != 0);
}

}  // namespace anxin::mem
