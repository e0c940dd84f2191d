// The registry of doctor checks, by id. Each check is a pure function of the
// HostFacts; the registry adds the check's id, why-it-matters and fix text to
// what it returns.
//
//   HostFacts facts;                                      // from CollectFacts (facts.h)
//   const CheckRegistry& r = BuiltinChecks();
//   for (const Check& c : r.checks()) Finding f = r.Run(c, facts);
//   const Check* c = r.Find("irq.irqbalance");
#ifndef ANXIN_DOCTOR_REGISTRY_H_
#define ANXIN_DOCTOR_REGISTRY_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/doctor/facts.h"
#include "anxin/doctor/finding.h"

namespace anxin::doctor {

struct Check {
  std::string id;     // "area.name", e.g. "qos.dscp_pfc"
  std::string title;  // short, for the table
  std::string why;    // the field report's lesson
  std::string fix;    // the fix in words / commands
  std::function<Finding(const HostFacts&)> run;
};

class CheckRegistry {
 public:
  void Add(Check check);
  const std::vector<Check>& checks() const { return checks_; }
  const Check* Find(std::string_view id) const;
  // Runs one check; fills check_id, why and fix, and turns an exception-free
  // empty summary into "ok".
  Finding Run(const Check& check, const HostFacts& facts) const;
  // Checks selected by a comma-separated list of ids or id prefixes
  // ("irq,qos.ecn"); empty selects all. Unknown names are kInvalidArgument
  // listing the known ids.
  Result<std::vector<const Check*>> Select(std::string_view only) const;

 private:
  std::vector<Check> checks_;
};

// All built-in checks (irq, numa, qos, comm, mem, cpu, env), sorted by id.
const CheckRegistry& BuiltinChecks();

// Registration functions of each group (one file each).
void RegisterIrqChecks(CheckRegistry& r);
void RegisterNumaChecks(CheckRegistry& r);
void RegisterQosChecks(CheckRegistry& r);
void RegisterEnvChecks(CheckRegistry& r);
void RegisterSystemChecks(CheckRegistry& r);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_REGISTRY_H_
