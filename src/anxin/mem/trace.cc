#include "anxin/mem/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "anxin/base/file.h"
#include "anxin/mem/context.h"

namespace anxin::mem {
namespace {

using Kind = PickleNode::Kind;
using Action = TraceEvent::Action;

constexpr uint64_t kSmallSegment = 2 << 20;
// Larger files are refused before they are read (a wrong path such as
// /dev/zero must not exhaust memory); real snapshots are tens of MiB.
constexpr size_t kMaxTraceBytes = size_t{4} << 30;

// The first bytes of a file, printable, for a message.
std::string Excerpt(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes.substr(0, 16)) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (bytes.size() > 16) out += "...";
  return out;
}

bool FromEmptyCache(const PickleDoc& doc, const PickleNode& entry) {
  const PickleNode* frames = doc.Find(entry, "frames");
  if (!frames || !frames->IsSequence()) return false;
  for (uint32_t id : frames->items) {
    auto name = doc.GetString(doc.node(id), "name");
    if (name && (name->find("emptyCache") != std::string_view::npos ||
                 name->find("empty_cache") != std::string_view::npos)) {
      return true;
    }
  }
  return false;
}

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

}  // namespace

uint64_t Trace::InitialReserved() const {
  uint64_t sum = 0;
  for (const auto& s : initial_segments) sum += s.size;
  return sum;
}

uint64_t Trace::InitialLive() const {
  uint64_t sum = 0;
  for (const auto& b : initial_live) sum += b.size;
  return sum;
}

Result<Trace> TraceFromSnapshot(const PickleDoc& doc, int device) {
  const PickleNode& root = doc.root();
  const PickleNode* segments = doc.Find(root, "segments");
  const PickleNode* traces = doc.Find(root, "device_traces");
  if (!segments || !segments->IsSequence() || !traces || !traces->IsSequence()) {
    return InvalidArgument(
        "not a PyTorch memory snapshot: no 'segments' and 'device_traces' lists (record one "
        "with torch.cuda.memory._record_memory_history() and _dump_snapshot())");
  }
  if (traces->items.empty()) return InvalidArgument("snapshot has no device traces");
  if (device < 0) {
    size_t best = 0;
    for (size_t d = 0; d < traces->items.size(); ++d) {
      if (doc.node(traces->items[d]).items.size() > doc.node(traces->items[best]).items.size()) {
        best = d;
      }
    }
    device = static_cast<int>(best);
  }
  if (static_cast<size_t>(device) >= traces->items.size()) {
    return InvalidArgument(fmt::format("snapshot has traces for devices 0..{}, not {}",
                                       traces->items.size() - 1, device));
  }
  const PickleNode& entries = doc.node(traces->items[device]);
  if (!entries.IsSequence()) return DataLoss("device trace is not a list");

  // The state at dump time.
  std::map<uint64_t, LiveBlock> live;
  std::map<uint64_t, TraceSegment> segs;
  for (uint32_t sid : segments->items) {
    const PickleNode& seg = doc.node(sid);
    auto dev = doc.GetInt(seg, "device");
    if (dev && *dev != device) continue;
    auto addr = doc.GetInt(seg, "address");
    auto total = doc.GetInt(seg, "total_size");
    if (!addr || !total) return DataLoss("snapshot segment without address or total_size");
    TraceSegment ts{U(*addr), U(*total), U(doc.GetInt(seg, "stream").value_or(0)), false};
    auto type = doc.GetString(seg, "segment_type");
    ts.small = type ? *type == "small" : ts.size == kSmallSegment;
    segs[ts.addr] = ts;
    const PickleNode* blocks = doc.Find(seg, "blocks");
    if (!blocks || !blocks->IsSequence()) continue;
    for (uint32_t bid : blocks->items) {
      const PickleNode& b = doc.node(bid);
      auto state = doc.GetString(b, "state");
      if (!state || !state->starts_with("active")) continue;
      auto baddr = doc.GetInt(b, "address");
      auto bsize = doc.GetInt(b, "size");
      if (!baddr || !bsize) return DataLoss("snapshot block without address or size");
      auto req = doc.GetInt(b, "requested_size").value_or(*bsize);
      live[U(*baddr)] = LiveBlock{U(*baddr), U(req), U(*bsize), ts.stream};
    }
  }

  Trace t;
  t.events.reserve(entries.items.size() / 2);
  struct Raw {
    std::string_view action;
    uint64_t addr, size, stream;
    bool empty_cache;
  };
  std::vector<Raw> raw;
  raw.reserve(entries.items.size());
  for (size_t k = 0; k < entries.items.size(); ++k) {
    const PickleNode& e = doc.node(entries.items[k]);
    auto action = doc.GetString(e, "action");
    if (!action) return DataLoss(fmt::format("trace entry {} has no action", k));
    Raw r{*action, U(doc.GetInt(e, "addr").value_or(0)), U(doc.GetInt(e, "size").value_or(0)),
          U(doc.GetInt(e, "stream").value_or(0)), false};
    if (r.action == "segment_free") r.empty_cache = FromEmptyCache(doc, e);
    raw.push_back(r);
  }

  // Walk backwards from the dump to the first entry.
  for (size_t k = raw.size(); k-- > 0;) {
    const Raw& r = raw[k];
    if (r.action == "alloc") {
      if (!live.erase(r.addr)) {
        return DataLoss(fmt::format(
            "trace entry {}: alloc at {:#x} is neither live at dump time nor freed later; the "
            "snapshot and its trace disagree",
            k, r.addr));
      }
    } else if (r.action == "free_completed") {
      if (!live.emplace(r.addr, LiveBlock{r.addr, r.size, 0, r.stream}).second) {
        return DataLoss(
            fmt::format("trace entry {}: free of {:#x}, which is live again later "
                        "without an alloc in between",
                        k, r.addr));
      }
    } else if (r.action == "segment_alloc") {
      if (!segs.erase(r.addr)) {
        return DataLoss(fmt::format(
            "trace entry {}: segment_alloc at {:#x} has no segment at dump time", k, r.addr));
      }
    } else if (r.action == "segment_free") {
      segs[r.addr] = TraceSegment{r.addr, r.size, r.stream, r.size == kSmallSegment};
    }
  }
  for (auto& [addr, b] : live) t.initial_live.push_back(b);
  for (auto& [addr, s] : segs) t.initial_segments.push_back(s);

  bool in_empty_cache = false;
  for (const Raw& r : raw) {
    bool empty_cache_run = false;
    if (r.action == "alloc") {
      t.events.push_back({Action::kAlloc, r.addr, r.size, r.stream});
    } else if (r.action == "free_completed") {
      t.events.push_back({Action::kFree, r.addr, r.size, r.stream});
    } else if (r.action == "segment_alloc" || r.action == "segment_map") {
      t.events.push_back({Action::kSegmentAlloc, r.addr, r.size, r.stream});
      t.has_segment_events = true;
    } else if (r.action == "segment_free" || r.action == "segment_unmap") {
      if (r.empty_cache) {
        if (!in_empty_cache) t.events.push_back({Action::kEmptyCache, 0, 0, r.stream});
        empty_cache_run = true;
      }
      t.events.push_back({Action::kSegmentFree, r.addr, r.size, r.stream});
      t.has_segment_events = true;
    } else if (r.action == "oom") {
      t.events.push_back({Action::kOom, r.addr, r.size, r.stream});
    }
    // free_requested and snapshot markers change nothing.
    if (r.action != "free_requested") in_empty_cache = empty_cache_run;
  }
  return t;
}

Result<Trace> ParseJsonlTrace(std::string_view text, const std::string& path) {
  Trace t;
  t.source = path;
  std::unordered_map<uint64_t, uint64_t> live;  // addr -> requested size
  int lineno = 0;
  bool started = false;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    std::string line(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    auto where = [&](std::string what) {
      return InvalidArgument(fmt::format("{}:{}: {}", path, lineno, what));
    };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return where("not a JSON object");
    auto action_it = j.find("action");
    if (action_it == j.end() || !action_it->is_string()) {
      return where(
          "missing \"action\" (alloc, free, segment_alloc, segment_free, "
          "empty_cache, oom, live, segment)");
    }
    std::string action = *action_it;
    auto num = [&](const char* key, bool required) -> Result<uint64_t> {
      auto it = j.find(key);
      if (it == j.end()) {
        if (required) return where(fmt::format("\"{}\" is required for {}", key, action));
        return uint64_t{0};
      }
      if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
        return where(fmt::format("\"{}\" must be a non-negative integer", key));
      }
      return it->get<uint64_t>();
    };
    ANXIN_ASSIGN_OR_RETURN(uint64_t stream, num("stream", false));
    if (action == "live" || action == "segment") {
      if (started) return where(fmt::format("\"{}\" lines must come before events", action));
      ANXIN_ASSIGN_OR_RETURN(uint64_t addr, num("addr", true));
      ANXIN_ASSIGN_OR_RETURN(uint64_t size, num("size", true));
      if (action == "live") {
        if (!live.emplace(addr, size).second) return where("live block listed twice");
        ANXIN_ASSIGN_OR_RETURN(uint64_t bs, num("block_size", false));
        t.initial_live.push_back({addr, size, bs, stream});
      } else {
        bool small = j.value("pool", std::string()) == "small" || size == kSmallSegment;
        t.initial_segments.push_back({addr, size, stream, small});
      }
      continue;
    }
    started = true;
    if (action == "alloc") {
      ANXIN_ASSIGN_OR_RETURN(uint64_t addr, num("addr", true));
      ANXIN_ASSIGN_OR_RETURN(uint64_t size, num("size", true));
      if (!live.emplace(addr, size).second) {
        return where(fmt::format("alloc at {:#x}, which is still live", addr));
      }
      t.events.push_back({Action::kAlloc, addr, size, stream});
    } else if (action == "free" || action == "free_completed") {
      ANXIN_ASSIGN_OR_RETURN(uint64_t addr, num("addr", true));
      auto it = live.find(addr);
      if (it == live.end()) return where(fmt::format("free of {:#x}, which is not live", addr));
      t.events.push_back({Action::kFree, addr, it->second, stream});
      live.erase(it);
    } else if (action == "segment_alloc" || action == "segment_free") {
      ANXIN_ASSIGN_OR_RETURN(uint64_t addr, num("addr", true));
      ANXIN_ASSIGN_OR_RETURN(uint64_t size, num("size", true));
      t.events.push_back({action == "segment_alloc" ? Action::kSegmentAlloc : Action::kSegmentFree,
                          addr, size, stream});
      t.has_segment_events = true;
    } else if (action == "empty_cache") {
      t.events.push_back({Action::kEmptyCache, 0, 0, stream});
    } else if (action == "oom") {
      ANXIN_ASSIGN_OR_RETURN(uint64_t size, num("size", false));
      t.events.push_back({Action::kOom, 0, size, stream});
    } else if (action != "free_requested") {
      return where(fmt::format("unknown action '{}'", action));
    }
  }
  return t;
}

Result<Trace> ReadJsonlTrace(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path, "trace", kMaxTraceBytes));
  return ParseJsonlTrace(text, path);
}

Result<Trace> ReadTrace(const std::string& path, int device) {
  ANXIN_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path, "trace", kMaxTraceBytes));
  Trace t;
  // By content, whatever the name: a pickle starts with its PROTO opcode,
  // 0x80; a JSONL trace with '{' (or a '#' comment).
  size_t first = bytes.find_first_not_of(" \t\r\n");
  if (static_cast<unsigned char>(bytes[0]) == 0x80) {
    ANXIN_ASSIGN_OR_RETURN(PickleDoc doc, WithContext(ParsePickle(bytes), "reading " + path));
    ANXIN_ASSIGN_OR_RETURN(t, WithContext(TraceFromSnapshot(doc, device), "reading " + path));
    t.source = path;
  } else if (first == std::string::npos || bytes[first] == '{' || bytes[first] == '#') {
    ANXIN_ASSIGN_OR_RETURN(t, ParseJsonlTrace(bytes, path));
  } else if (path.ends_with(".pickle") || path.ends_with(".pkl")) {
    return InvalidArgument(fmt::format(
        "trace {}: is not a PyTorch memory snapshot: a snapshot is a pickle, whose first byte is "
        "0x80, and this file starts with \"{}\"; give the file "
        "torch.cuda.memory._dump_snapshot() wrote",
        path, Excerpt(bytes)));
  } else {
    return InvalidArgument(fmt::format(
        "trace {}: is neither a PyTorch memory snapshot (a pickle, first byte 0x80) nor an anxin "
        "JSONL trace (one JSON object per line, first character '{{'); it starts with \"{}\"",
        path, Excerpt(bytes)));
  }
  if (t.events.empty()) {
    return InvalidArgument(fmt::format(
        "trace {}: holds no allocation events, so there is nothing to replay; record the "
        "snapshot after the allocations (torch.cuda.memory._record_memory_history() first)",
        path));
  }
  return t;
}

Status WriteJsonlTrace(const Trace& trace, const std::string& path) {
  std::ofstream out(path);
  if (!out) return std::unexpected(ErrnoError(errno, "create " + path));
  for (const auto& s : trace.initial_segments) {
    out << nlohmann::json{{"action", "segment"},
                          {"addr", s.addr},
                          {"size", s.size},
                          {"stream", s.stream},
                          {"pool", s.small ? "small" : "large"}}
               .dump()
        << '\n';
  }
  for (const auto& b : trace.initial_live) {
    nlohmann::json j{{"action", "live"}, {"addr", b.addr}, {"size", b.size}, {"stream", b.stream}};
    if (b.block_size) j["block_size"] = b.block_size;
    out << j.dump() << '\n';
  }
  for (const auto& e : trace.events) {
    nlohmann::json j;
    switch (e.action) {
      case Action::kAlloc:
        j = {{"action", "alloc"}, {"addr", e.addr}, {"size", e.size}};
        break;
      case Action::kFree:
        j = {{"action", "free"}, {"addr", e.addr}};
        break;
      case Action::kSegmentAlloc:
        j = {{"action", "segment_alloc"}, {"addr", e.addr}, {"size", e.size}};
        break;
      case Action::kSegmentFree:
        j = {{"action", "segment_free"}, {"addr", e.addr}, {"size", e.size}};
        break;
      case Action::kEmptyCache:
        j = {{"action", "empty_cache"}};
        break;
      case Action::kOom:
        j = {{"action", "oom"}, {"size", e.size}};
        break;
    }
    if (e.stream) j["stream"] = e.stream;
    out << j.dump() << '\n';
  }
  out.close();
  if (!out) return std::unexpected(ErrnoError(errno, "write " + path));
  return Ok();
}

}  // namespace anxin::mem
