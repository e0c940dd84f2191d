// The registry of doctor checks, by id. Each check is a pure function of the
// HostFacts; the registry adds the check's id, why-it-matters and fix text to
// what it returns.
//
//   auto tools = MakeToolSource(host::HostRoot("/"), /*timeout_s=*/5);
//   HostFacts facts = CollectFacts(CollectOptions{}, *tools);
//   const CheckRegistry& r = BuiltinChecks();
//   for (const Check& c : r.checks()) Finding f = r.Run(c, facts);
//   const Check* c = r.Find("irq.irqbalance");
//
// Ids are unique: Add refuses a second check with an id already registered
// (kInvalidArgument naming the id), so two checks can never answer for one id
// in the table, --only or the --hosts matrix. BuiltinChecks() treats such a
// refusal as a bug in anxin and aborts with the message.
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
  // Adds the check, keeping checks() sorted by id. An empty id, a check
  // without a run function, or an id already registered is kInvalidArgument
  // and leaves the registry unchanged.
  Status Add(Check check);
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

// Registration functions of each group, one file each (checks_GROUP.cc);
// each returns the first refusal of Add.
Status RegisterIrqChecks(CheckRegistry& r);
Status RegisterNumaChecks(CheckRegistry& r);
Status RegisterQosChecks(CheckRegistry& r);
Status RegisterCommChecks(CheckRegistry& r);
Status RegisterMemChecks(CheckRegistry& r);
Status RegisterCpuChecks(CheckRegistry& r);
Status RegisterEnvChecks(CheckRegistry& r);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_REGISTRY_H_
