#include "anxin/run/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"
#include "anxin/run/sha256.h"

namespace anxin::run {
namespace fs = std::filesystem;
namespace {

// The number after `prefix` when name is prefix + digits only.
int64_t StepOf(const std::string& name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t v = -1;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e) return -1;
  return v;
}

// The trailing digits of a name ("step_300" -> 300), or -1.
int64_t TrailingNumber(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
  if (i == name.size()) return -1;
  int64_t v = -1;
  std::from_chars(name.data() + i, name.data() + name.size(), v);
  return v;
}

// Megatron/DeepSpeed without a manifest: at least one file, none empty.
std::string CheckFiles(const fs::path& dir) {
  std::error_code ec;
  int files = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    ++files;
    if (it->file_size(ec) == 0) {
      return "file " + fs::relative(it->path(), dir).string() + " is empty";
    }
  }
  if (ec) return "cannot read: " + ec.message();
  if (files == 0) return "holds no files";
  return "";
}

}  // namespace

const Checkpoint* CheckpointScan::Chosen() const {
  for (const Checkpoint& c : checkpoints) {
    if (c.valid) return &c;
  }
  return nullptr;
}

Status VerifyManifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestName).string();
  auto text = ReadFile(path);
  if (!text) return std::unexpected(text.error());
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_array()) {
    return DataLoss(std::string(kManifestName) + " is not a valid manifest");
  }
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("sha256") || !f["sha256"].is_string()) {
      return DataLoss(std::string(kManifestName) + " has a malformed entry");
    }
    const std::string rel = f["path"];
    if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos) {
      return DataLoss(std::string(kManifestName) + " names a path outside the checkpoint: " + rel);
    }
    const std::string file = (fs::path(dir) / rel).string();
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) return DataLoss("file " + rel + " is missing");
    const uint64_t want = f["size"];
    if (static_cast<uint64_t>(st.st_size) != want) {
      return DataLoss("file " + rel + " has " + std::to_string(st.st_size) +
                      " bytes, manifest says " + std::to_string(want));
    }
    ANXIN_ASSIGN_OR_RETURN(FileDigest d, Sha256File(file));
    if (d.sha256 != f["sha256"].get<std::string>()) {
      return DataLoss("file " + rel + " does not match its SHA-256 in the manifest");
    }
  }
  return Ok();
}

Result<int> SealCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("no checkpoint directory " + dir);
  std::vector<std::string> rels;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string rel = fs::relative(it->path(), dir).string();
    if (rel == kManifestName) continue;
    rels.push_back(std::move(rel));
  }
  if (ec)
    return std::unexpected(Error(ErrorCode::kUnavailable, "reading " + dir + ": " + ec.message()));
  std::sort(rels.begin(), rels.end());
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& rel : rels) {
    ANXIN_ASSIGN_OR_RETURN(FileDigest d, Sha256File((fs::path(dir) / rel).string()));
    files.push_back({{"path", rel}, {"size", d.size}, {"sha256", d.sha256}});
  }
  nlohmann::json m = {{"format", "anxin-manifest"}, {"version", 1}, {"files", files}};
  ANXIN_TRY(WriteFileAtomic((fs::path(dir) / kManifestName).string(), m.dump(1) + "\n"));
  return static_cast<int>(rels.size());
}

Result<CheckpointScan> ScanCheckpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("no checkpoint directory " + dir);
  CheckpointScan scan;
  scan.dir = dir;
  const fs::path root(dir);

  // Pointer files.
  int64_t pointer_step = -1;
  std::string pointer_format;
  if (fs::exists(root / "latest_checkpointed_iteration.txt", ec)) {
    auto t = ReadFile((root / "latest_checkpointed_iteration.txt").string());
    if (t) {
      scan.pointer = std::string(Trim(*t));
      pointer_format = "megatron";
      int64_t v = -1;
      auto [p, e] =
          std::from_chars(scan.pointer.data(), scan.pointer.data() + scan.pointer.size(), v);
      if (e == std::errc() && p == scan.pointer.data() + scan.pointer.size()) pointer_step = v;
    }
  } else if (fs::exists(root / "latest", ec) && fs::is_regular_file(root / "latest", ec)) {
    auto t = ReadFile((root / "latest").string());
    if (t) {
      scan.pointer = std::string(Trim(*t));
      pointer_format = "deepspeed";
      pointer_step = StepOf(scan.pointer, "global_step");
    }
  }

  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec)) continue;
    Checkpoint c;
    c.name = entry.path().filename().string();
    c.path = entry.path().string();
    c.sealed = fs::exists(entry.path() / kManifestName, ec);
    const bool dcp = fs::exists(entry.path() / ".metadata", ec);
    if ((c.step = StepOf(c.name, "iter_")) >= 0) {
      c.format = "megatron";
    } else if ((c.step = StepOf(c.name, "global_step")) >= 0) {
      c.format = "deepspeed";
    } else if ((c.step = TrailingNumber(c.name)) >= 0 && (dcp || c.sealed)) {
      c.format = dcp ? "torch-dcp" : "anxin-manifest";
    } else {
      continue;  // not a checkpoint directory
    }
    if (c.sealed) {
      Status v = VerifyManifest(c.path);
      c.valid = v.has_value();
      if (!v) c.reason = v.error().Describe();
    } else if (c.format == "torch-dcp") {
      c.valid = true;
    } else if (pointer_format == c.format && pointer_step >= 0 && c.step > pointer_step) {
      c.reason = "newer than the step the pointer file names (" + scan.pointer +
                 "): still being written or abandoned";
    } else {
      c.reason = CheckFiles(entry.path());
      c.valid = c.reason.empty();
    }
    scan.checkpoints.push_back(std::move(c));
  }
  // DCP directories without .metadata: partial saves.
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    bool known = false;
    for (const Checkpoint& c : scan.checkpoints) known |= c.name == name;
    if (known) continue;
    bool distcp = false;
    for (const auto& f : fs::directory_iterator(entry.path(), ec)) {
      distcp |= f.path().extension() == ".distcp";
    }
    if (!distcp) continue;
    Checkpoint c;
    c.name = name;
    c.path = entry.path().string();
    c.format = "torch-dcp";
    c.step = TrailingNumber(name);
    c.reason = "no .metadata: the save did not finish";
    scan.checkpoints.push_back(std::move(c));
  }
  std::sort(scan.checkpoints.begin(), scan.checkpoints.end(),
            [](const Checkpoint& a, const Checkpoint& b) {
              return a.step != b.step ? a.step > b.step : a.name > b.name;
            });
  return scan;
}

}  // namespace anxin::run
