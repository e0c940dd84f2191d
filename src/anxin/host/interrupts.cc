#include "anxin/host/interrupts.h"

#include "anxin/base/strings.h"
#include "anxin/host/cpu_list.h"

namespace anxin::host {

const IrqLine* InterruptTable::Find(int irq) const {
  for (const IrqLine& l : irqs) {
    if (l.irq == irq) return &l;
  }
  return nullptr;
}

Result<InterruptTable> ParseInterrupts(std::string_view text) {
  auto lines = SplitLines(text);
  InterruptTable t;
  size_t i = 0;
  while (i < lines.size() && Trim(lines[i]).empty()) ++i;
  if (i == lines.size()) return DataLoss("/proc/interrupts is empty");
  for (std::string_view w : SplitWords(lines[i])) {
    auto id = w.starts_with("CPU") ? ParseInt(w.substr(3)) : std::nullopt;
    if (!id) return DataLoss("/proc/interrupts: header token '" + std::string(w) + "' is not CPUn");
    t.cpu_ids.push_back(static_cast<int>(*id));
  }
  if (t.cpu_ids.empty()) return DataLoss("/proc/interrupts: no CPU columns in the header");
  for (++i; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto irq = ParseInt(line.substr(0, colon));
    if (!irq) continue;
    IrqLine l;
    l.irq = static_cast<int>(*irq);
    std::string_view rest = line.substr(colon + 1);
    size_t pos = 0;
    while (l.counts.size() < t.cpu_ids.size()) {
      while (pos < rest.size() && rest[pos] == ' ') ++pos;
      size_t b = pos;
      while (pos < rest.size() && rest[pos] != ' ') ++pos;
      auto v = ParseInt(rest.substr(b, pos - b));
      if (!v) {
        pos = b;
        break;
      }
      l.counts.push_back(*v);
    }
    l.description = std::string(Trim(rest.substr(std::min(pos, rest.size()))));
    t.irqs.push_back(std::move(l));
  }
  return t;
}

std::string IrqAffinityPath(int irq) {
  return "/proc/irq/" + std::to_string(irq) + "/smp_affinity_list";
}

Result<std::vector<int>> ReadIrqAffinity(const HostRoot& root, int irq) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, root.ReadAttr(IrqAffinityPath(irq)));
  auto cpus = ParseCpuList(text);
  if (!cpus) return std::unexpected(std::move(cpus).error().With(IrqAffinityPath(irq)));
  return cpus;
}

}  // namespace anxin::host
