// Planning the ranks of a single-node job: which device each rank drives, the
// environment torch.distributed (and torch_npu) read, and the CPUs of the
// device's NUMA node that the rank is bound to.
//
//   LaunchPlanOptions opts;
//   opts.nproc_per_node = 2;
//   opts.master_port = 29500;
//   device::DeviceInfo d0;
//   d0.vendor = "huawei";
//   std::vector<host::NumaNode> nodes = {{.id = 0, .cpus = {0, 1, 2, 3}}};
//   ANXIN_ASSIGN_OR_RETURN(std::vector<RankPlan> plan, PlanRanks(opts, {d0, d0}, nodes));
//   // plan[1].env holds RANK=1, LOCAL_RANK=1, WORLD_SIZE=2, MASTER_PORT=29500,
//   // ASCEND_RT_VISIBLE_DEVICES=0,1; plan[1].cpus = {0, 1, 2, 3}
//
// Thread safety: plain functions; BindCurrentThread changes only the calling
// thread.
#ifndef ANXIN_RUN_LAUNCH_H_
#define ANXIN_RUN_LAUNCH_H_

#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/device/backend.h"
#include "anxin/host/topology.h"

namespace anxin::run {

struct LaunchPlanOptions {
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Bind each rank to its device's NUMA node (CPUs, preferred memory).
  bool numa_bind = true;
  // Devices left out of the job (isolated after repeated faults).
  std::vector<int> excluded_devices{};
  // A job over several nodes, each with nproc_per_node ranks: this node's
  // place; ranks are node_rank * nproc_per_node + local rank.
  int node_rank = 0;
  int nnodes = 1;
};

// What one rank gets.
struct RankPlan {
  int rank = 0;
  int local_rank = 0;
  int device_index = -1;  // the backend's index of the device it drives
  int numa_node = -1;     // -1: unknown, or binding off
  std::vector<int> cpus;  // empty: no CPU binding
  // "NAME=VALUE" entries: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
  // GROUP_RANK, MASTER_ADDR, MASTER_PORT and the vendor's visible-devices
  // variable listing the job's devices in rank order.
  std::vector<std::string> env;
  std::vector<std::string> notes;  // why a binding was skipped
};

// "ASCEND_RT_VISIBLE_DEVICES" for vendor "huawei", "CUDA_VISIBLE_DEVICES"
// otherwise.
std::string_view VisibleDevicesVariable(std::string_view vendor);

// One plan per rank, rank i on the i-th device not excluded. More ranks than
// devices -> kInvalidArgument naming --nproc-per-node.
Result<std::vector<RankPlan>> PlanRanks(const LaunchPlanOptions& options,
                                        const std::vector<device::DeviceInfo>& devices,
                                        const std::vector<host::NumaNode>& nodes);

// A TCP port on 127.0.0.1 that nobody listens on now (the kernel's choice).
Result<int> PickFreePort();

// Restricts the calling thread to cpus (sched_setaffinity) and, when node >= 0,
// prefers that NUMA node for its memory (set_mempolicy MPOL_PREFERRED).
// Threads and processes it starts afterwards inherit both. Empty cpus and
// node -1 restore no-binding: every CPU the process had at start, default
// memory policy.
Status BindCurrentThread(const std::vector<int>& cpus, int node);

}  // namespace anxin::run

#endif  // ANXIN_RUN_LAUNCH_H_
