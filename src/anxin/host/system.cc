#include "anxin/host/system.h"

#include "anxin/base/strings.h"

namespace anxin::host {

Result<std::map<std::string, int64_t>> ParseMeminfo(std::string_view text) {
  std::map<std::string, int64_t> out;
  for (std::string_view line : SplitLines(text)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto words = SplitWords(line.substr(colon + 1));
    if (words.empty()) continue;
    if (auto v = ParseInt(words[0])) out[std::string(Trim(line.substr(0, colon)))] = *v;
  }
  if (!out.contains("MemTotal")) return DataLoss("/proc/meminfo has no MemTotal line");
  return out;
}

std::string SelectedChoice(std::string_view s) {
  size_t b = s.find('[');
  size_t e = s.find(']', b);
  if (b == std::string_view::npos || e == std::string_view::npos) return std::string(Trim(s));
  return std::string(s.substr(b + 1, e - b - 1));
}

Result<HugePages> ReadHugePages(const HostRoot& root) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, root.ReadFile("/proc/meminfo"));
  auto mi = ParseMeminfo(text);
  if (!mi) return std::unexpected(std::move(mi).error());
  HugePages h;
  auto get = [&](const char* k) { return mi->contains(k) ? mi->at(k) : 0; };
  h.mem_total_kb = get("MemTotal");
  h.total = get("HugePages_Total");
  h.free = get("HugePages_Free");
  h.reserved = get("HugePages_Rsvd");
  h.page_size_kb = get("Hugepagesize");
  if (auto thp = root.ReadAttr("/sys/kernel/mm/transparent_hugepage/enabled")) {
    h.thp_enabled = SelectedChoice(*thp);
  }
  return h;
}

Result<std::map<int, std::string>> ReadGovernors(const HostRoot& root) {
  ANXIN_ASSIGN_OR_RETURN(auto names, root.ListDir("/sys/devices/system/cpu"));
  std::map<int, std::string> out;
  for (const std::string& n : names) {
    if (!n.starts_with("cpu")) continue;
    auto id = ParseInt(std::string_view(n).substr(3));
    if (!id) continue;
    auto g = root.ReadAttr("/sys/devices/system/cpu/" + n + "/cpufreq/scaling_governor");
    if (g) out[static_cast<int>(*id)] = *g;
  }
  return out;
}

}  // namespace anxin::host
