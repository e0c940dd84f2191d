#include "anxin/run/launch.h"

#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace anxin::run {
namespace {

constexpr int kMpolDefault = 0;
constexpr int kMpolPreferred = 1;

std::string Join(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

// The CPUs this process could use when it started, so that unbinding can
// restore them.
const cpu_set_t& InitialAffinity() {
  static cpu_set_t set = [] {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof(s), &s) != 0) {
      for (int i = 0; i < CPU_SETSIZE; ++i) CPU_SET(i, &s);
    }
    return s;
  }();
  return set;
}

}  // namespace

std::string_view VisibleDevicesVariable(std::string_view vendor) {
  return vendor == "huawei" ? "ASCEND_RT_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
}

Result<std::vector<RankPlan>> PlanRanks(const LaunchPlanOptions& options,
                                        const std::vector<device::DeviceInfo>& devices,
                                        const std::vector<host::NumaNode>& nodes) {
  if (options.nproc_per_node < 1) {
    return InvalidArgument("--nproc-per-node: expected 1 or more, got " +
                           std::to_string(options.nproc_per_node));
  }
  std::vector<const device::DeviceInfo*> usable;
  for (const device::DeviceInfo& d : devices) {
    bool excluded = false;
    for (int x : options.excluded_devices) excluded |= (x == d.index);
    if (!excluded) usable.push_back(&d);
  }
  if (static_cast<int>(usable.size()) < options.nproc_per_node) {
    return InvalidArgument("--nproc-per-node " + std::to_string(options.nproc_per_node) +
                           " needs that many devices, but the backend has " +
                           std::to_string(usable.size()) +
                           (options.excluded_devices.empty() ? "" : " left after isolation") +
                           ": lower --nproc-per-node");
  }
  const int n = options.nproc_per_node;
  std::vector<int> indices;
  for (int i = 0; i < n; ++i) indices.push_back(usable[i]->index);
  const std::string vendor = usable.empty() ? "" : usable[0]->vendor;
  const std::string visible = std::string(VisibleDevicesVariable(vendor)) + "=" + Join(indices);

  std::vector<RankPlan> plans;
  for (int i = 0; i < n; ++i) {
    RankPlan p;
    p.rank = options.node_rank * n + i;
    p.local_rank = i;
    p.device_index = usable[i]->index;
    p.env = {"RANK=" + std::to_string(p.rank),
             "LOCAL_RANK=" + std::to_string(i),
             "WORLD_SIZE=" + std::to_string(options.nnodes * n),
             "LOCAL_WORLD_SIZE=" + std::to_string(n),
             "GROUP_RANK=" + std::to_string(options.node_rank),
             "MASTER_ADDR=" + options.master_addr,
             "MASTER_PORT=" + std::to_string(options.master_port),
             visible};
    if (options.numa_bind) {
      const int node = usable[i]->numa_node;
      const host::NumaNode* found = node >= 0 ? host::FindNode(nodes, node) : nullptr;
      if (node < 0) {
        p.notes.push_back("device " + std::to_string(p.device_index) +
                          " has no known NUMA node: not bound");
      } else if (found == nullptr || found->cpus.empty()) {
        p.notes.push_back("device " + std::to_string(p.device_index) + " is on NUMA node " +
                          std::to_string(node) + ", which this host does not have: not bound");
      } else {
        p.numa_node = node;
        p.cpus = found->cpus;
      }
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

Result<int> PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(ErrnoError(errno, "socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    close(fd);
    return std::unexpected(ErrnoError(e, "choosing a free port"));
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Status BindCurrentThread(const std::vector<int>& cpus, int node) {
  cpu_set_t set;
  if (cpus.empty()) {
    set = InitialAffinity();
  } else {
    (void)InitialAffinity();
    CPU_ZERO(&set);
    for (int c : cpus) {
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    }
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return std::unexpected(ErrnoError(errno, "sched_setaffinity to CPUs " + Join(cpus)));
  }
  unsigned long mask = 0;  // NOLINT(runtime/int): the kernel's type
  long rc;                 // NOLINT(runtime/int)
  if (node >= 0 && node < static_cast<int>(8 * sizeof(mask))) {
    mask = 1UL << node;
    rc = syscall(SYS_set_mempolicy, kMpolPreferred, &mask, 8 * sizeof(mask));
  } else {
    rc = syscall(SYS_set_mempolicy, kMpolDefault, nullptr, 0);
  }
  if (rc != 0 && errno != ENOSYS && errno != EPERM) {
    return std::unexpected(
        ErrnoError(errno, "set_mempolicy for NUMA node " + std::to_string(node)));
  }
  return Ok();
}

}  // namespace anxin::run
