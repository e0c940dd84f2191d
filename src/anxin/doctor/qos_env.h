// The traffic class of the job's collectives, from its environment: HCCL's
// HCCL_RDMA_TC (default 132 = DSCP 33) and NCCL's NCCL_IB_TC (default 0).
// Both hold DSCP x 4 (the low two bits are ECN); internal to doctor.
#ifndef ANXIN_DOCTOR_QOS_ENV_H_
#define ANXIN_DOCTOR_QOS_ENV_H_

#include <string>

#include "anxin/base/strings.h"
#include "anxin/doctor/facts.h"

namespace anxin::doctor {

struct TrafficDscp {
  bool in_use = false;  // the library runs on this host
  int dscp = 0;
  std::string source;  // "HCCL_RDMA_TC=132", "HCCL_RDMA_TC default 132"
  std::string error;   // a malformed value
};

inline bool AnyEnvWithPrefix(const HostFacts& f, std::string_view prefix) {
  for (const auto& [k, v] : f.env) {
    if (k.starts_with(prefix)) return true;
  }
  return false;
}

inline TrafficDscp DscpFromEnv(const HostFacts& f, const std::string& var, int def, bool in_use,
                               bool strict_multiple_of_4) {
  TrafficDscp t;
  t.in_use = in_use;
  auto v = f.Env(var);
  if (!v) {
    t.dscp = def / 4;
    t.source = var + " default " + std::to_string(def);
    return t;
  }
  t.source = var + "=" + *v;
  auto n = ParseInt(*v);
  if (!n || *n < 0 || *n > 255 || (strict_multiple_of_4 && *n % 4 != 0)) {
    t.error = var + "=" + *v + " is not DSCP x 4 in [0, 255]" +
              (strict_multiple_of_4 ? " (a multiple of 4)" : "");
    return t;
  }
  t.dscp = static_cast<int>(*n) >> 2;
  return t;
}

inline TrafficDscp HcclDscp(const HostFacts& f) {
  bool in_use = f.CountKind(host::DeviceKind::kHuaweiNpu) > 0 || AnyEnvWithPrefix(f, "HCCL_");
  return DscpFromEnv(f, "HCCL_RDMA_TC", 132, in_use, true);
}

inline TrafficDscp NcclDscp(const HostFacts& f) {
  bool in_use = f.CountKind(host::DeviceKind::kNvidiaGpu) > 0 || AnyEnvWithPrefix(f, "NCCL_");
  return DscpFromEnv(f, "NCCL_IB_TC", 0, in_use, false);
}

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_QOS_ENV_H_
