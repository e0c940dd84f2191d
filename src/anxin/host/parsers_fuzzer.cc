// libFuzzer target for the parsers of outside input in host/: /proc/interrupts,
// mlnx_qos and hccn_tool output, npu-smi tables, numa_maps, environ, env files,
// CPU lists and /etc/ascend_numa.conf. Every input goes to every parser; none
// may crash, hang or trip ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/host/ascend_numa_conf.h"
#include "anxin/host/cpu_list.h"
#include "anxin/host/interrupts.h"
#include "anxin/host/processes.h"
#include "anxin/host/qos.h"
#include "anxin/host/system.h"
#include "anxin/host/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace anxin::host;
  (void)ParseInterrupts(text);
  if (auto q = ParseMlnxQos(text)) (void)q->PriorityOfDscp(static_cast<int>(size % 64));
  (void)ParsePfcTable(text);
  (void)ParseHccnDscpToTc(text);
  (void)ParseNpuSmiBusIds(text);
  (void)ParseNumaMaps(text);
  (void)ParseEnviron(text);
  (void)ParseEnvFile(text);
  if (auto c = ParseCpuList(text.substr(0, 64))) (void)FormatCpuList(*c);
  (void)ParseAscendNumaConf(text);
  (void)ParseMeminfo(text);
  (void)NormalizePciAddress(text.substr(0, 32));
  return 0;
}
