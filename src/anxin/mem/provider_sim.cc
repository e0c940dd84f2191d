// The simulated device: addresses only, or real host memory where a physical
// chunk is a slice of a memfd so that remapping keeps its contents (as on a GPU).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_map>
#include <vector>

#include "anxin/mem/provider.h"

namespace anxin::mem {
namespace {

class SimProvider final : public Provider {
 public:
  explicit SimProvider(SimOptions o) : o_(std::move(o)) {}
  ~SimProvider() override {
    if (memfd_ >= 0) close(memfd_);
  }

  std::string_view name() const override { return "sim"; }
  uint64_t TotalMemory() const override { return o_.capacity; }
  bool SupportsVirtualMemory() const override { return o_.virtual_memory; }
  uint64_t Granularity() const override { return o_.granularity; }

  Result<uint64_t> ReserveAddress(uint64_t size) override {
    if (!o_.virtual_memory) return Unimplemented("sim device was created without virtual memory");
    if (Fails("reserve")) return ResourceExhausted("sim: address reservation failed (injected)");
    if (!o_.backed) return NextFakeAddress(size);
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return std::unexpected(ErrnoError(errno, "sim: reserve address range"));
    return reinterpret_cast<uint64_t>(p);
  }

  Status ReleaseAddress(uint64_t va, uint64_t size) override {
    if (o_.backed && munmap(reinterpret_cast<void*>(va), size) != 0) {
      return std::unexpected(ErrnoError(errno, "sim: release address range"));
    }
    return Ok();
  }

  Result<PhysicalHandle> CreatePhysical(uint64_t size) override {
    if (size == 0 || size % o_.granularity != 0) {
      return InvalidArgument(
          fmt::format("sim: physical size {} is not a multiple of {}", size, o_.granularity));
    }
    if (Fails("create") || used_ + size > o_.capacity) {
      return ResourceExhausted(fmt::format("sim: device full ({} of {} bytes in use, {} asked)",
                                           used_, o_.capacity, size));
    }
    uint64_t offset = 0;
    // Reuse a released slice of the same size so the memfd stays small.
    auto& free_list = free_offsets_[size];
    if (!free_list.empty()) {
      offset = free_list.back();
      free_list.pop_back();
    } else {
      offset = file_end_;
      file_end_ += size;
    }
    if (o_.backed) ANXIN_TRY(EnsureMemfd(file_end_));
    used_ += size;
    // Handles are offset+1 so that 0 is never a valid handle.
    handle_size_[offset + 1] = size;
    return offset + 1;
  }

  Status ReleasePhysical(PhysicalHandle handle, uint64_t size) override {
    if (Fails("release")) return Unavailable("sim: release of physical memory failed (injected)");
    auto it = handle_size_.find(handle);
    if (it == handle_size_.end() || it->second != size) {
      return InvalidArgument(fmt::format("sim: release of unknown handle {}", handle));
    }
    handle_size_.erase(it);
    used_ -= size;
    uint64_t offset = handle - 1;
    if (o_.backed) {
      // Give the pages back to the host, as the device would.
      fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                static_cast<off_t>(size));
    }
    free_offsets_[size].push_back(offset);
    return Ok();
  }

  Status Map(uint64_t va, uint64_t size, PhysicalHandle handle) override {
    if (Fails("map")) return ResourceExhausted("sim: map failed (injected)");
    auto it = handle_size_.find(handle);
    if (it == handle_size_.end() || it->second != size) {
      return InvalidArgument(fmt::format("sim: map of unknown handle {}", handle));
    }
    if (!o_.backed) return Ok();
    void* p = mmap(reinterpret_cast<void*>(va), size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, memfd_, static_cast<off_t>(handle - 1));
    if (p == MAP_FAILED) return std::unexpected(ErrnoError(errno, "sim: map chunk"));
    return Ok();
  }

  Status Synchronize() override {
    if (o_.observe) o_.observe("synchronize");
    if (Fails("synchronize")) return Unavailable("sim: synchronize failed (injected)");
    return Ok();
  }
  Status Unmap(uint64_t va, uint64_t size) override {
    if (o_.observe) o_.observe("unmap");
    if (Fails("unmap"))
      return Unavailable(fmt::format("sim: unmap of {:#x} failed (injected)", va));
    if (!o_.backed) return Ok();
    void* p = mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return std::unexpected(ErrnoError(errno, "sim: unmap chunk"));
    return Ok();
  }

  Result<uint64_t> Allocate(uint64_t size) override {
    if (Fails("allocate") || used_ + size > o_.capacity) {
      return ResourceExhausted(fmt::format("sim: device full ({} of {} bytes in use, {} asked)",
                                           used_, o_.capacity, size));
    }
    uint64_t addr = 0;
    if (o_.backed) {
      void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return std::unexpected(ErrnoError(errno, "sim: allocate"));
      addr = reinterpret_cast<uint64_t>(p);
    } else {
      addr = NextFakeAddress(size);
    }
    used_ += size;
    return addr;
  }

  Status Free(uint64_t ptr, uint64_t size) override {
    if (o_.backed && munmap(reinterpret_cast<void*>(ptr), size) != 0) {
      return std::unexpected(ErrnoError(errno, "sim: free"));
    }
    used_ -= size;
    return Ok();
  }

 private:
  bool Fails(std::string_view op) const { return o_.fail && o_.fail(op); }

  uint64_t NextFakeAddress(uint64_t size) {
    uint64_t addr = next_fake_;
    // A gap keeps distinct ranges from ever touching.
    next_fake_ += (size + o_.granularity * 2 - 1) / o_.granularity * o_.granularity;
    return addr;
  }

  Status EnsureMemfd(uint64_t size) {
    if (memfd_ < 0) {
      memfd_ = memfd_create("anxin-sim-device", MFD_CLOEXEC);
      if (memfd_ < 0) return std::unexpected(ErrnoError(errno, "sim: memfd_create"));
    }
    if (size > memfd_size_) {
      if (ftruncate(memfd_, static_cast<off_t>(size)) != 0) {
        return std::unexpected(ErrnoError(errno, "sim: grow device file"));
      }
      memfd_size_ = size;
    }
    return Ok();
  }

  SimOptions o_;
  uint64_t used_ = 0;
  uint64_t next_fake_ = uint64_t{1} << 44;
  int memfd_ = -1;
  uint64_t memfd_size_ = 0;
  uint64_t file_end_ = 0;
  std::unordered_map<uint64_t, std::vector<uint64_t>> free_offsets_;
  std::unordered_map<PhysicalHandle, uint64_t> handle_size_;
};

}  // namespace

std::unique_ptr<Provider> MakeSimProvider(SimOptions options) {
  return std::make_unique<SimProvider>(std::move(options));
}

}  // namespace anxin::mem
