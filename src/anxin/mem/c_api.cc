// The exported C functions of libanxin_alloc.so (include/anxin/alloc.h): one
// allocator per device, created at the first call from ANXIN_ALLOC_CONF.
//
// When a node agent is there, the allocators' statistics go to it through
// the job telemetry SDK (include/anxin/sdk.h). The SDK is loaded with dlopen
// rather than linked: the library PyTorch loads by path stays one file that
// works alone, and a process without ANXIN_AGENT_SOCKET (and without the SDK
// loaded already, e.g. by the anxin_sdk Python module) never loads it, starts
// no thread and pays nothing.
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "anxin/alloc.h"
#include "anxin/mem/alloc_config.h"
#include "anxin/mem/allocator.h"
#include "anxin/sdk.h"

namespace {

using anxin::mem::Allocator;

constexpr int kMaxDevices = 64;

struct DeviceSlot {
  std::once_flag once;
  std::atomic<Allocator*> ready{nullptr};  // set once creation has finished
  std::unique_ptr<Allocator> allocator;
  std::string error;  // why creation failed, if it did
};

std::array<DeviceSlot, kMaxDevices>& Slots() {
  static auto* slots = new std::array<DeviceSlot, kMaxDevices>();  // never destroyed: PyTorch
  return *slots;                                                   // frees at exit
}

// ---- statistics to the agent, through libanxin_sdk.so ----------------

struct SdkApi {
  decltype(&anxin_report_alloc_stats) report = nullptr;
  decltype(&anxin_sdk_add_sampler) add_sampler = nullptr;
};
SdkApi sdk;  // written once, before the sampler that reads it is registered

// Called by the SDK's sending thread about once a second while an agent is
// connected: one record per device that has an allocator.
void SampleAllocators(void*) {
  for (int device = 0; device < kMaxDevices; ++device) {
    Allocator* a = Slots()[device].ready.load(std::memory_order_acquire);
    if (!a) continue;
    anxin::mem::AllocatorStats s = a->Stats();
    // remaps: idle chunks unmapped to be mapped again elsewhere, as
    // `anxin mem replay` counts them.
    anxin_sdk_alloc_stats out{
        s.reserved_bytes, s.allocated_bytes, s.peak_reserved_bytes, s.fragmentation,
        s.ooms,           s.unmaps};
    sdk.report(device, &out);
  }
}

// The SDK already in the process, else (only when an agent socket is named)
// the one next to this library, else the dynamic linker's; nullptr if none.
void* OpenSdk() {
  if (void* h = dlopen("libanxin_sdk.so", RTLD_NOW | RTLD_NOLOAD)) return h;
  const char* socket = std::getenv("ANXIN_AGENT_SOCKET");
  if (!socket || !*socket) return nullptr;
  if (const char* lib = std::getenv("ANXIN_SDK_LIB"); lib && *lib) {
    if (void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) return h;
  }
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&SampleAllocators), &self) && self.dli_fname) {
    std::string path = self.dli_fname;
    path = path.substr(0, path.find_last_of('/') + 1) + "libanxin_sdk.so";
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return dlopen("libanxin_sdk.so", RTLD_NOW | RTLD_LOCAL);
}

// Once per process, when the first allocator exists. Without an SDK the
// statistics stay local (anxin_alloc_get_stats); nothing is printed, since
// telemetry is optional.
void StartTelemetry() {
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = OpenSdk();
    if (!h) return;
    sdk.report = reinterpret_cast<decltype(sdk.report)>(dlsym(h, "anxin_report_alloc_stats"));
    sdk.add_sampler =
        reinterpret_cast<decltype(sdk.add_sampler)>(dlsym(h, "anxin_sdk_add_sampler"));
    if (sdk.report && sdk.add_sampler) sdk.add_sampler(SampleAllocators, nullptr);
  });
}

thread_local std::string last_error;
std::atomic<bool> reported{false};

void SetError(std::string text) {
  last_error = std::move(text);
  // Once, so that a training loop that probes for memory does not flood logs.
  if (!reported.exchange(true)) std::fprintf(stderr, "anxin_alloc: %s\n", last_error.c_str());
}

Allocator* Get(int device, bool create) {
  if (device < 0 || device >= kMaxDevices) {
    SetError("device " + std::to_string(device) + " is out of range");
    return nullptr;
  }
  DeviceSlot& slot = Slots()[device];
  if (create) {
    std::call_once(slot.once, [&] {
      const char* env = std::getenv("ANXIN_ALLOC_CONF");
      auto conf = anxin::mem::ParseAllocConf(env ? env : "");
      if (!conf) {
        slot.error = "ANXIN_ALLOC_CONF: " + conf.error().Describe();
        return;
      }
      auto provider = anxin::mem::MakeProvider(*conf, device);
      if (!provider) {
        slot.error = provider.error().Describe();
        return;
      }
      auto a = Allocator::Create(std::move(*provider), conf->options);
      if (!a) {
        slot.error = "ANXIN_ALLOC_CONF: " + a.error().Describe();
        return;
      }
      slot.allocator = std::move(*a);
      slot.ready.store(slot.allocator.get(), std::memory_order_release);
      StartTelemetry();
    });
  }
  Allocator* a = slot.ready.load(std::memory_order_acquire);
  if (!a && create) SetError(slot.error);
  return a;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* anxin_alloc(ssize_t size, int device, void* stream) {
  Allocator* a = Get(device, true);
  if (!a) return nullptr;
  if (size < 0) {
    SetError("negative allocation size " + std::to_string(size));
    return nullptr;
  }
  auto p = a->Allocate(static_cast<uint64_t>(size), reinterpret_cast<uintptr_t>(stream));
  if (!p) {
    SetError(p.error().Describe());
    return nullptr;
  }
  return reinterpret_cast<void*>(*p);
}

__attribute__((visibility("default"))) void anxin_free(void* ptr, ssize_t, int device, void*) {
  if (!ptr) return;
  Allocator* a = Get(device, false);
  if (!a) {
    SetError("free on device " + std::to_string(device) + ", which has no allocator");
    return;
  }
  auto s = a->Free(reinterpret_cast<uint64_t>(ptr));
  if (!s) SetError(s.error().Describe());
}

__attribute__((visibility("default"))) int anxin_empty_cache(int device) {
  Allocator* a = Get(device, false);
  if (!a) return 0;
  auto s = a->EmptyCache();
  if (!s) {
    SetError(s.error().Describe());
    return -1;
  }
  return 0;
}

__attribute__((visibility("default"))) int anxin_alloc_get_stats(int device,
                                                                 anxin_alloc_stats* out) {
  if (!out) return -1;
  Allocator* a = Get(device, false);
  if (!a) return -1;
  anxin::mem::AllocatorStats s = a->Stats();
  *out = anxin_alloc_stats{s.reserved_bytes,
                           s.allocated_bytes,
                           s.requested_bytes,
                           s.cached_bytes,
                           s.largest_free_block,
                           s.pool_limit_bytes,
                           s.peak_reserved_bytes,
                           s.peak_allocated_bytes,
                           s.fragmentation,
                           s.allocs,
                           s.frees,
                           s.device_allocs,
                           s.device_frees,
                           s.maps,
                           s.unmaps,
                           s.retries,
                           s.ooms,
                           s.expansions};
  return 0;
}

__attribute__((visibility("default"))) const char* anxin_alloc_last_error(void) {
  return last_error.c_str();
}

}  // extern "C"
