#include "anxin/device/sim/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

#include "anxin/base/strings.h"
#include "anxin/device/sim/builtin_scenarios.h"
#include "anxin/device/sim/noise.h"

namespace anxin::device::sim {
namespace {

constexpr int kMaxDevices = 64;

// Scenario times stay within a year: far beyond any drill, and far from the
// limits of the clock's arithmetic.
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

Result<double> CheckedSeconds(const ConfigNode& node) {
  ANXIN_ASSIGN_OR_RETURN(double s, node.AsSeconds());
  if (s > kMaxSeconds) {
    return std::unexpected(node.MakeError(fmt::format("{} s is more than a year", s)));
  }
  return s;
}

Result<double> SecondsOr(const ConfigNode& node, std::string_view key, double def) {
  std::optional<ConfigNode> child = node.Find(key);
  if (!child || child->IsNull()) return def;
  return CheckedSeconds(*child);
}

Result<uint64_t> BytesOr(const ConfigNode& node, std::string_view key, uint64_t def) {
  std::optional<ConfigNode> child = node.Find(key);
  if (!child || child->IsNull()) return def;
  return child->AsBytes();
}

Result<double> DoubleInRange(const ConfigNode& node, std::string_view key, double lo, double hi,
                             double def) {
  return node.GetInRange<double>(key, lo, hi, def);
}

Result<const ModelSpec*> ParseModel(const ConfigNode& node) {
  ANXIN_ASSIGN_OR_RETURN(std::string name, node.As<std::string>());
  const ModelSpec* m = FindModel(name);
  if (!m) {
    return std::unexpected(
        node.MakeError(fmt::format("unknown model '{}' (known: {})", name, KnownModelNames())));
  }
  return m;
}

Status ParseBaseline(const ConfigNode& node, const ModelSpec& model, Baseline& b) {
  ANXIN_TRY(node.CheckKeys({"temperature", "power", "utilisation", "hbm_used"}));
  ANXIN_ASSIGN_OR_RETURN(b.temperature_celsius,
                         DoubleInRange(node, "temperature", -20, 150, b.temperature_celsius));
  ANXIN_ASSIGN_OR_RETURN(b.power_watts, DoubleInRange(node, "power", 0, 5000, b.power_watts));
  ANXIN_ASSIGN_OR_RETURN(b.utilisation_percent,
                         DoubleInRange(node, "utilisation", 0, 100, b.utilisation_percent));
  ANXIN_ASSIGN_OR_RETURN(b.hbm_used_bytes, BytesOr(node, "hbm_used", b.hbm_used_bytes));
  if (b.hbm_used_bytes > model.hbm_bytes) {
    auto n = node.Find("hbm_used");
    return std::unexpected(
        (n ? *n : node)
            .MakeError(fmt::format("{} bytes is more than the {} bytes of HBM a {} has",
                                   b.hbm_used_bytes, model.hbm_bytes, model.name)));
  }
  return Ok();
}

Status ParseNoise(const ConfigNode& node, Noise& n) {
  ANXIN_TRY(node.CheckKeys({"temperature", "power", "utilisation", "hbm_used", "period"}));
  ANXIN_ASSIGN_OR_RETURN(n.temperature_celsius,
                         DoubleInRange(node, "temperature", 0, 50, n.temperature_celsius));
  ANXIN_ASSIGN_OR_RETURN(n.power_watts, DoubleInRange(node, "power", 0, 1000, n.power_watts));
  ANXIN_ASSIGN_OR_RETURN(n.utilisation_percent,
                         DoubleInRange(node, "utilisation", 0, 100, n.utilisation_percent));
  ANXIN_ASSIGN_OR_RETURN(n.hbm_used_bytes, BytesOr(node, "hbm_used", n.hbm_used_bytes));
  ANXIN_ASSIGN_OR_RETURN(n.period_seconds, SecondsOr(node, "period", n.period_seconds));
  if (n.period_seconds < 0.01) {
    return std::unexpected(
        node.Find("period")->MakeError("the noise period must be at least 10ms"));
  }
  return Ok();
}

Status ParseReset(const ConfigNode& node, ResetBehaviour& r) {
  ANXIN_TRY(node.CheckKeys({"duration", "fail_first"}));
  ANXIN_ASSIGN_OR_RETURN(r.duration_seconds, SecondsOr(node, "duration", r.duration_seconds));
  ANXIN_ASSIGN_OR_RETURN(r.fail_first, node.GetInRange<int>("fail_first", 0, 1000, r.fail_first));
  return Ok();
}

// A device selector: an index, a list of indices or "all".
Result<std::vector<int>> ParseIndices(const ConfigNode& node, int count) {
  std::vector<int> out;
  if (node.IsScalar()) {
    ANXIN_ASSIGN_OR_RETURN(std::string text, node.As<std::string>());
    if (text == "all") {
      for (int i = 0; i < count; ++i) out.push_back(i);
      return out;
    }
    auto one = node.As<int>();
    if (!one) {
      return std::unexpected(node.MakeError(
          fmt::format("expected a device index, a list of them or 'all', got '{}'", text)));
    }
    out.push_back(*one);
  } else if (node.IsSequence()) {
    ANXIN_ASSIGN_OR_RETURN(out, node.As<std::vector<int>>());
  } else {
    return std::unexpected(node.MakeError("expected a device index, a list of them or 'all'"));
  }
  if (out.empty()) return std::unexpected(node.MakeError("the list of devices is empty"));
  for (int i : out) {
    if (i < 0 || i >= count) {
      return std::unexpected(node.MakeError(fmt::format(
          "device {} does not exist: the scenario has {} devices (0-{})", i, count, count - 1)));
    }
  }
  return out;
}

Result<Severity> ParseSeverity(const ConfigNode& node) {
  ANXIN_ASSIGN_OR_RETURN(std::string s, node.As<std::string>());
  if (s == "minor") return Severity::kMinor;
  if (s == "major") return Severity::kMajor;
  if (s == "critical") return Severity::kCritical;
  return std::unexpected(
      node.MakeError(fmt::format("unknown severity '{}' (known: minor, major, critical)", s)));
}

Result<std::string> ParseCode(const ConfigNode& node) {
  ANXIN_ASSIGN_OR_RETURN(std::string code, node.As<std::string>());
  bool ok = !code.empty() && code.size() <= 32 &&
            std::all_of(code.begin(), code.end(),
                        [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
  if (!ok) {
    return std::unexpected(node.MakeError(fmt::format(
        "'{}' is not an error code: use the code as the device reports it, e.g. 80E01801 or 79",
        code)));
  }
  return code;
}

struct EventKindEntry {
  EventKind kind;
  std::string_view name;
};
constexpr EventKindEntry kEventKinds[] = {
    {EventKind::kTemperatureRamp, "temperature_ramp"},
    {EventKind::kHbmLeak, "hbm_leak"},
    {EventKind::kHbmStep, "hbm_step"},
    {EventKind::kErrorRaise, "error_raise"},
    {EventKind::kErrorClear, "error_clear"},
    {EventKind::kLinkDown, "link_down"},
    {EventKind::kLinkUp, "link_up"},
    {EventKind::kHang, "hang"},
    {EventKind::kDeviceLost, "device_lost"},
    {EventKind::kEccErrors, "ecc_errors"},
};

std::string KnownEventKinds() {
  std::string out;
  for (const auto& e : kEventKinds) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

// Parses one entry of `events:`; appends one SimEvent per selected device.
Status ParseEvent(const ConfigNode& node, const std::vector<SimDevice>& devices,
                  std::vector<SimEvent>& out) {
  if (!node.IsMap())
    return std::unexpected(node.MakeError("expected a map (at, device, kind, ...)"));
  ANXIN_ASSIGN_OR_RETURN(ConfigNode kind_node, node.Child("kind"));
  ANXIN_ASSIGN_OR_RETURN(std::string kind_name, kind_node.As<std::string>());
  const EventKindEntry* entry = nullptr;
  for (const auto& e : kEventKinds) {
    if (e.name == kind_name) entry = &e;
  }
  if (!entry) {
    return std::unexpected(kind_node.MakeError(
        fmt::format("unknown event kind '{}' (known: {})", kind_name, KnownEventKinds())));
  }
  SimEvent ev;
  ev.kind = entry->kind;
  ev.where = fmt::format("{}:{}:{}", node.source(), node.line(), node.column());
  switch (ev.kind) {
    case EventKind::kTemperatureRamp: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "to", "over"}));
      ANXIN_ASSIGN_OR_RETURN(ev.to_celsius, node.GetInRange<double>("to", -20, 150));
      ANXIN_ASSIGN_OR_RETURN(ev.over_seconds, SecondsOr(node, "over", 0));
      break;
    }
    case EventKind::kHbmLeak: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "rate", "duration"}));
      ANXIN_ASSIGN_OR_RETURN(ConfigNode rate, node.Child("rate"));
      ANXIN_ASSIGN_OR_RETURN(uint64_t bytes, rate.AsBytes());
      if (bytes == 0) return std::unexpected(rate.MakeError("a leak rate must be above 0"));
      ev.rate_bytes_per_second = static_cast<double>(bytes);
      ANXIN_ASSIGN_OR_RETURN(ev.duration_seconds, SecondsOr(node, "duration", kForever));
      break;
    }
    case EventKind::kHbmStep: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "bytes"}));
      ANXIN_ASSIGN_OR_RETURN(ConfigNode bytes_node, node.Child("bytes"));
      ANXIN_ASSIGN_OR_RETURN(std::string text, bytes_node.As<std::string>());
      bool negative = !text.empty() && text[0] == '-';
      auto bytes = ParseBytes(negative ? std::string_view(text).substr(1) : text);
      if (!bytes) return std::unexpected(bytes_node.MakeError(bytes.error().message()));
      if (*bytes > (1ull << 50)) {
        return std::unexpected(bytes_node.MakeError("a step of more than 1 PiB"));
      }
      ev.step_bytes = static_cast<int64_t>(*bytes) * (negative ? -1 : 1);
      break;
    }
    case EventKind::kErrorRaise: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "code", "severity", "text"}));
      ANXIN_ASSIGN_OR_RETURN(ConfigNode code, node.Child("code"));
      ANXIN_ASSIGN_OR_RETURN(ev.code, ParseCode(code));
      if (auto s = node.Find("severity"); s && !s->IsNull()) {
        ANXIN_ASSIGN_OR_RETURN(ev.severity, ParseSeverity(*s));
      }
      ANXIN_ASSIGN_OR_RETURN(ev.text, node.Get<std::string>("text", ""));
      break;
    }
    case EventKind::kErrorClear: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "code"}));
      if (auto c = node.Find("code"); c && !c->IsNull()) {
        ANXIN_ASSIGN_OR_RETURN(ev.code, ParseCode(*c));
      }
      break;
    }
    case EventKind::kLinkDown:
    case EventKind::kLinkUp: {
      if (ev.kind == EventKind::kLinkDown) {
        ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "port", "duration"}));
        ANXIN_ASSIGN_OR_RETURN(ev.duration_seconds, SecondsOr(node, "duration", kForever));
      } else {
        ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "port"}));
      }
      ANXIN_ASSIGN_OR_RETURN(ev.port, node.GetInRange<int>("port", 0, 63, 0));
      break;
    }
    case EventKind::kHang: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "utilisation", "duration"}));
      ANXIN_ASSIGN_OR_RETURN(ev.hang_utilisation,
                             node.GetInRange<double>("utilisation", 0, 100, -1));
      ANXIN_ASSIGN_OR_RETURN(ev.duration_seconds, SecondsOr(node, "duration", kForever));
      break;
    }
    case EventKind::kDeviceLost:
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind"}));
      break;
    case EventKind::kEccErrors: {
      ANXIN_TRY(node.CheckKeys({"at", "device", "kind", "single_bit", "double_bit"}));
      ANXIN_ASSIGN_OR_RETURN(ev.single_bit, node.Get<uint64_t>("single_bit", 0));
      ANXIN_ASSIGN_OR_RETURN(ev.double_bit, node.Get<uint64_t>("double_bit", 0));
      if (ev.single_bit == 0 && ev.double_bit == 0) {
        return std::unexpected(
            node.MakeError("an ecc_errors event needs single_bit or double_bit above 0"));
      }
      break;
    }
  }
  ANXIN_ASSIGN_OR_RETURN(ConfigNode at, node.Child("at"));
  ANXIN_ASSIGN_OR_RETURN(ev.at_seconds, CheckedSeconds(at));
  ANXIN_ASSIGN_OR_RETURN(ConfigNode device_node, node.Child("device"));
  ANXIN_ASSIGN_OR_RETURN(std::vector<int> indices,
                         ParseIndices(device_node, static_cast<int>(devices.size())));
  for (int i : indices) {
    if ((ev.kind == EventKind::kLinkDown || ev.kind == EventKind::kLinkUp) &&
        ev.port >= devices[i].ports) {
      return std::unexpected(node.Find("port")->MakeError(
          fmt::format("device {} has {} port(s) (0-{}): set devices.ports to have more", i,
                      devices[i].ports, devices[i].ports - 1)));
    }
    SimEvent copy = ev;
    copy.device = i;
    out.push_back(std::move(copy));
  }
  return Ok();
}

// Settings shared by every device unless an override changes them.
struct DeviceTemplate {
  const ModelSpec* model = nullptr;
  Baseline baseline;
  Noise noise;
  ResetBehaviour reset;
  int ports = 1;
  bool power_given = false;
};

Baseline IdleBaseline(const ModelSpec& m) {
  // An idle device: a cool die, a quarter of its rated power, the few GiB
  // that the driver keeps for itself.
  return Baseline{.temperature_celsius = 38,
                  .power_watts = m.tdp_watts * 0.25,
                  .utilisation_percent = 0,
                  .hbm_used_bytes = 3 * kGiB};
}

Status ApplyTemplateKeys(const ConfigNode& node, DeviceTemplate& t) {
  if (auto m = node.Find("model"); m && !m->IsNull()) {
    ANXIN_ASSIGN_OR_RETURN(t.model, ParseModel(*m));
    if (!t.power_given) t.baseline.power_watts = t.model->tdp_watts * 0.25;
  }
  ANXIN_ASSIGN_OR_RETURN(t.ports, node.GetInRange<int>("ports", 1, 32, t.ports));
  if (auto b = node.Find("baseline"); b && !b->IsNull()) {
    ANXIN_TRY(ParseBaseline(*b, *t.model, t.baseline));
    if (b->Has("power")) t.power_given = true;
  } else if (t.baseline.hbm_used_bytes > t.model->hbm_bytes) {
    return std::unexpected(node.MakeError(
        fmt::format("the baseline hbm_used is more than the HBM of a {}: set baseline.hbm_used",
                    t.model->name)));
  }
  if (auto n = node.Find("noise"); n && !n->IsNull()) ANXIN_TRY(ParseNoise(*n, t.noise));
  if (auto r = node.Find("reset"); r && !r->IsNull()) ANXIN_TRY(ParseReset(*r, t.reset));
  return Ok();
}

std::string SimUuid(uint64_t seed, int index) {
  uint64_t a = HashBits(seed, static_cast<uint64_t>(index), 0x5555);
  uint64_t b = HashBits(seed, static_cast<uint64_t>(index), 0xAAAA);
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFFF,
                     b >> 48, b & 0xFFFFFFFFFFFFull);
}

SimDevice MakeDevice(const DeviceTemplate& t, int index, int count, int numa_nodes, uint64_t seed) {
  SimDevice d;
  d.model = *t.model;
  d.baseline = t.baseline;
  d.noise = t.noise;
  d.reset = t.reset;
  d.ports = t.ports;
  d.info.index = index;
  d.info.uuid = SimUuid(seed, index);
  d.info.model = std::string(t.model->name);
  d.info.vendor = std::string(t.model->vendor);
  // Distinct, stable bus numbers (0x1F is odd, so 256 devices never collide).
  d.info.pci_bus_id = fmt::format("0000:{:02X}:00.0", (0x01 + 0x1F * index) % 0x100);
  d.info.numa_node = index * numa_nodes / count;
  d.info.hbm_total_bytes = t.model->hbm_bytes;
  d.info.tdp_watts = t.model->tdp_watts;
  d.info.throttle_celsius = t.model->throttle_celsius;
  return d;
}

Status ParseDevices(const ConfigNode& node, uint64_t seed, std::vector<SimDevice>& out) {
  if (!node.IsMap()) {
    return std::unexpected(node.MakeError("expected a map (count, model, baseline, ...)"));
  }
  ANXIN_TRY(node.CheckKeys(
      {"count", "model", "numa_nodes", "ports", "baseline", "noise", "reset", "overrides"}));
  ANXIN_ASSIGN_OR_RETURN(int count, node.GetInRange<int>("count", 1, kMaxDevices, 8));
  ANXIN_ASSIGN_OR_RETURN(int numa_nodes, node.GetInRange<int>("numa_nodes", 1, 64, 2));
  DeviceTemplate t;
  t.model = FindModel("Ascend910C");
  t.baseline = IdleBaseline(*t.model);
  t.noise = Noise{.temperature_celsius = 0.5,
                  .power_watts = 3,
                  .utilisation_percent = 0,
                  .hbm_used_bytes = 0,
                  .period_seconds = 1};
  ANXIN_TRY(ApplyTemplateKeys(node, t));
  for (int i = 0; i < count; ++i) out.push_back(MakeDevice(t, i, count, numa_nodes, seed));

  if (auto overrides = node.Find("overrides"); overrides && !overrides->IsNull()) {
    if (!overrides->IsSequence()) {
      return std::unexpected(
          overrides->MakeError("expected a list of overrides (- index: N, baseline: ...)"));
    }
    ANXIN_ASSIGN_OR_RETURN(std::vector<ConfigNode> list, overrides->Elements());
    for (const ConfigNode& o : list) {
      if (!o.IsMap()) return std::unexpected(o.MakeError("expected a map (index, ...)"));
      ANXIN_TRY(o.CheckKeys({"index", "model", "ports", "baseline", "noise", "reset"}));
      ANXIN_ASSIGN_OR_RETURN(ConfigNode index_node, o.Child("index"));
      ANXIN_ASSIGN_OR_RETURN(std::vector<int> indices, ParseIndices(index_node, count));
      DeviceTemplate ot = t;
      ANXIN_TRY(ApplyTemplateKeys(o, ot));
      for (int i : indices) out[i] = MakeDevice(ot, i, count, numa_nodes, seed);
    }
  }
  return Ok();
}

Status ParseUnsupported(const ConfigNode& node, Capabilities& caps) {
  ANXIN_ASSIGN_OR_RETURN(std::vector<std::string> ops, node.As<std::vector<std::string>>());
  for (const std::string& op : ops) {
    if (op == "reset") {
      caps.reset = false;
    } else if (op == "clear_memory") {
      caps.clear_memory = false;
    } else if (op == "fault_events") {
      caps.fault_events = false;
    } else {
      return std::unexpected(node.MakeError(
          fmt::format("unknown operation '{}' (known: reset, clear_memory, fault_events)", op)));
    }
  }
  return Ok();
}

}  // namespace

std::string_view EventKindName(EventKind k) {
  for (const auto& e : kEventKinds) {
    if (e.kind == k) return e.name;
  }
  return "unknown";
}

Result<Scenario> ParseScenario(const ConfigNode& root) {
  if (!root.IsMap() && !root.IsNull()) {
    return std::unexpected(root.MakeError("a scenario is a map (name, seed, devices, events)"));
  }
  ANXIN_TRY(root.CheckKeys({"name", "description", "seed", "devices", "events", "unsupported"}));
  Scenario s;
  s.source = root.source();
  ANXIN_ASSIGN_OR_RETURN(s.name, root.Get<std::string>("name", ""));
  if (s.name.empty()) s.name = std::filesystem::path(root.source()).stem().string();
  ANXIN_ASSIGN_OR_RETURN(s.description, root.Get<std::string>("description", ""));
  ANXIN_ASSIGN_OR_RETURN(s.seed, root.Get<uint64_t>("seed", 1));
  if (auto d = root.Find("devices"); d && !d->IsNull()) {
    ANXIN_TRY(ParseDevices(*d, s.seed, s.devices));
  } else {
    // No devices section: the default node.
    ANXIN_ASSIGN_OR_RETURN(ConfigNode empty, ConfigNode::Parse("{}", root.source()));
    ANXIN_TRY(ParseDevices(empty, s.seed, s.devices));
  }
  if (auto u = root.Find("unsupported"); u && !u->IsNull()) {
    ANXIN_TRY(ParseUnsupported(*u, s.capabilities));
  }
  if (auto e = root.Find("events"); e && !e->IsNull()) {
    if (!e->IsSequence()) {
      return std::unexpected(e->MakeError("expected a list of events (- at: 1s, device: 0, ...)"));
    }
    ANXIN_ASSIGN_OR_RETURN(std::vector<ConfigNode> list, e->Elements());
    for (const ConfigNode& ev : list) ANXIN_TRY(ParseEvent(ev, s.devices, s.events));
  }
  std::stable_sort(s.events.begin(), s.events.end(), [](const SimEvent& a, const SimEvent& b) {
    return a.at_seconds < b.at_seconds;
  });
  return s;
}

Result<Scenario> ParseScenarioText(std::string_view yaml, std::string source_name) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(yaml, std::move(source_name)));
  return ParseScenario(root);
}

Result<Scenario> LoadScenario(const std::string& path) {
  // LoadFile's errors name the file (and line:col) already.
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
  return ParseScenario(root);
}

Result<Scenario> BuiltinScenario(std::string_view name) {
  for (const internal::BuiltinScenarioText& b : internal::BuiltinScenarios()) {
    if (b.name == name) {
      auto s = ParseScenarioText(b.yaml, "builtin:" + std::string(b.name));
      if (!s) return std::unexpected(Error(ErrorCode::kInternal, s.error().Describe()));
      return s;
    }
  }
  std::string known;
  for (const std::string& n : BuiltinScenarioNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound(fmt::format("no built-in scenario '{}' (known: {})", name, known));
}

std::vector<std::string> BuiltinScenarioNames() {
  std::vector<std::string> names;
  for (const internal::BuiltinScenarioText& b : internal::BuiltinScenarios()) {
    names.emplace_back(b.name);
  }
  return names;
}

Result<Scenario> ResolveScenario(const std::string& path_or_name) {
  if (path_or_name.empty()) return BuiltinScenario("default");
  std::error_code ec;
  if (std::filesystem::exists(path_or_name, ec) || path_or_name.find('/') != std::string::npos ||
      path_or_name.ends_with(".yaml") || path_or_name.ends_with(".yml")) {
    return LoadScenario(path_or_name);
  }
  auto builtin = BuiltinScenario(path_or_name);
  if (!builtin && builtin.error().code() == ErrorCode::kNotFound) {
    return NotFound(fmt::format(
        "no scenario file '{}' and no built-in scenario of that name: give a path to a YAML "
        "file, or one of: {}",
        path_or_name, fmt::join(BuiltinScenarioNames(), ", ")));
  }
  return builtin;
}

}  // namespace anxin::device::sim
