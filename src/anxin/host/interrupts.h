// /proc/interrupts and /proc/irq/N/smp_affinity_list.
//
//   HostRoot root;                                   // live host
//   ANXIN_ASSIGN_OR_RETURN(std::string text, root.ReadFile("/proc/interrupts"));
//   ANXIN_ASSIGN_OR_RETURN(InterruptTable t, ParseInterrupts(text));
//   for (const IrqLine& l : t.irqs) {
//     for (size_t i = 0; i < l.counts.size(); ++i) {
//       std::printf("irq %d cpu %d: %lld\n", l.irq, t.cpu_ids[i],
//                   static_cast<long long>(l.counts[i]));
//     }
//   }
#ifndef ANXIN_HOST_INTERRUPTS_H_
#define ANXIN_HOST_INTERRUPTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/host/root_fs.h"

namespace anxin::host {

struct IrqLine {
  int irq = 0;
  std::vector<int64_t> counts;  // one per column of InterruptTable::cpu_ids
  std::string description;  // chip, hwirq and action names, e.g. "... mlx5_comp0@pci:0000:18:00.0"
};

struct InterruptTable {
  std::vector<int> cpu_ids;   // from the "CPU0 CPU1 ..." header (offline CPUs are absent)
  std::vector<IrqLine> irqs;  // numbered rows only (NMI, LOC, ... are dropped)
  const IrqLine* Find(int irq) const;
};

// Rows shorter than the header (a driver that prints fewer columns) keep the
// counts they have. A missing or malformed header is kDataLoss.
Result<InterruptTable> ParseInterrupts(std::string_view text);

Result<std::vector<int>> ReadIrqAffinity(const HostRoot& root, int irq);
std::string IrqAffinityPath(int irq);

}  // namespace anxin::host

#endif  // ANXIN_HOST_INTERRUPTS_H_
