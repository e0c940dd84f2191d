#include "anxin/host/ascend_numa_conf.h"

#include <string>

#include "anxin/base/strings.h"
#include "anxin/host/cpu_list.h"

namespace anxin::host {

Result<std::vector<NpuNumaBinding>> ParseAscendNumaConf(std::string_view text) {
  std::vector<NpuNumaBinding> out;
  int n = 0;
  for (std::string_view raw : SplitLines(text)) {
    ++n;
    std::string line(raw.substr(0, raw.find('#')));
    for (char& c : line) {
      if (c == '=' || c == ':' || c == ';') c = ' ';
    }
    auto words = SplitWords(line);
    if (words.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("ascend_numa.conf:" + std::to_string(n) + ": " + why + " in '" +
                             std::string(Trim(raw)) + "' (expected e.g. 'npu0 node=0 cpus=0-23')");
    };
    size_t i = 0;
    std::string dev = ToLower(words[0]);
    for (std::string_view prefix : {"npu", "davinci", "device"}) {
      if (dev.starts_with(prefix)) {
        dev = dev.substr(prefix.size());
        break;
      }
    }
    if (dev.empty() && words.size() > 1) dev = std::string(words[++i]);
    auto id = ParseInt(dev);
    if (!id || *id < 0) return bad("no NPU id");
    NpuNumaBinding b;
    b.npu = static_cast<int>(*id);
    b.line = n;
    for (++i; i < words.size(); ++i) {
      std::string key = ToLower(words[i]);
      if ((key == "node" || key == "numa" || key == "numa_node") && i + 1 < words.size()) {
        auto v = ParseInt(words[++i]);
        if (!v || *v < 0) return bad("bad node '" + std::string(words[i]) + "'");
        b.node = static_cast<int>(*v);
      } else if ((key == "cpus" || key == "cpu" || key == "cpulist") && i + 1 < words.size()) {
        auto l = ParseCpuList(words[++i]);
        if (!l) return bad(l.error().message());
        b.cpus = *l;
      } else if (auto v = ParseInt(words[i]); v && !b.node && *v >= 0) {
        b.node = static_cast<int>(*v);
      } else {
        return bad("unexpected '" + std::string(words[i]) + "'");
      }
    }
    if (!b.node && b.cpus.empty()) return bad("no node or cpus for NPU " + std::to_string(b.npu));
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace anxin::host
