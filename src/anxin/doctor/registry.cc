#include "anxin/doctor/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "anxin/base/strings.h"

namespace anxin::doctor {

Status CheckRegistry::Add(Check check) {
  if (check.id.empty()) return InvalidArgument("doctor check without an id");
  if (!check.run) return InvalidArgument("doctor check '" + check.id + "' has no run function");
  if (Find(check.id) != nullptr) {
    return InvalidArgument("doctor check '" + check.id +
                           "' is registered twice; each check needs its own id");
  }
  checks_.push_back(std::move(check));
  std::sort(checks_.begin(), checks_.end(),
            [](const Check& a, const Check& b) { return a.id < b.id; });
  return Ok();
}

const Check* CheckRegistry::Find(std::string_view id) const {
  for (const Check& c : checks_) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

Finding CheckRegistry::Run(const Check& check, const HostFacts& facts) const {
  Finding f = check.run(facts);
  f.check_id = check.id;
  if (f.why.empty()) f.why = check.why;
  if (f.fix.empty()) f.fix = check.fix;
  if (f.summary.empty()) f.summary = std::string(SeverityName(f.severity));
  return f;
}

Result<std::vector<const Check*>> CheckRegistry::Select(std::string_view only) const {
  std::vector<const Check*> out;
  if (Trim(only).empty()) {
    for (const Check& c : checks_) out.push_back(&c);
    return out;
  }
  for (std::string_view name : Split(only, ',')) {
    name = Trim(name);
    if (name.empty()) continue;
    bool matched = false;
    for (const Check& c : checks_) {
      bool hit = c.id == name ||
                 (c.id.size() > name.size() && c.id.starts_with(name) && c.id[name.size()] == '.');
      if (hit) {
        matched = true;
        if (std::find(out.begin(), out.end(), &c) == out.end()) out.push_back(&c);
      }
    }
    if (!matched) {
      std::string known;
      for (const Check& c : checks_) known += (known.empty() ? "" : ", ") + c.id;
      return InvalidArgument("--only: unknown check '" + std::string(name) + "' (known: " + known +
                             ")");
    }
  }
  std::sort(out.begin(), out.end(), [](const Check* a, const Check* b) { return a->id < b->id; });
  return out;
}

const CheckRegistry& BuiltinChecks() {
  static const CheckRegistry* registry = [] {
    auto* r = new CheckRegistry;
    for (Status (*add)(CheckRegistry&) :
         {RegisterIrqChecks, RegisterNumaChecks, RegisterQosChecks, RegisterCommChecks,
          RegisterMemChecks, RegisterCpuChecks, RegisterEnvChecks}) {
      if (Status s = add(*r); !s) {
        // The built-in set is fixed at compile time: a refusal is a bug in anxin.
        std::fprintf(stderr, "internal error: %s\n", s.error().Describe().c_str());
        std::abort();
      }
    }
    return r;
  }();
  return *registry;
}

}  // namespace anxin::doctor
