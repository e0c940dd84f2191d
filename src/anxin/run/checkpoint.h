// Finding the newest checkpoint a job can resume from. Understands Megatron
// (latest_checkpointed_iteration.txt + iter_NNNNNNN/), DeepSpeed (latest +
// global_stepN/), torch.distributed.checkpoint (a directory with .metadata)
// and anxin's own manifest (anxin-manifest.json: every file's size and
// SHA-256), and never picks a partial or corrupt one.
//
//   ANXIN_ASSIGN_OR_RETURN(CheckpointScan scan, ScanCheckpoints("/ckpt/run1"));
//   if (const Checkpoint* c = scan.Chosen()) std::printf("resume %s\n", c->path.c_str());
//   for (const Checkpoint& c : scan.checkpoints)
//     if (!c.valid) std::printf("skipped %s: %s\n", c.name.c_str(), c.reason.c_str());
//
// Rules (docs/recovery.md, "Checkpoint rules"):
// - A directory with anxin-manifest.json is valid when every file it lists
//   exists with that size and SHA-256; nothing else is looked at.
// - Megatron and DeepSpeed write their pointer file after the directory, so a
//   directory newer than the step the pointer names is still being written
//   (or was abandoned): skipped. One that the pointer names or precedes must
//   hold at least one file and no empty file.
// - torch DCP writes .metadata last: a directory without it is partial.
//
// Thread safety: plain functions over the file system.
#ifndef ANXIN_RUN_CHECKPOINT_H_
#define ANXIN_RUN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::run {

inline constexpr char kManifestName[] = "anxin-manifest.json";

struct Checkpoint {
  std::string name;    // "iter_0000200"
  std::string path;    // the directory
  std::string format;  // "megatron", "deepspeed", "torch-dcp", "anxin-manifest"
  int64_t step = -1;
  bool sealed = false;  // has an anxin manifest
  bool valid = false;
  std::string reason;  // why not valid; "" when valid
};

struct CheckpointScan {
  std::string dir;
  // Newest (highest step) first.
  std::vector<Checkpoint> checkpoints;
  // What the pointer file says, when there is one ("" otherwise).
  std::string pointer;
  // The newest valid one, or nullptr.
  const Checkpoint* Chosen() const;
};

// A missing dir -> kNotFound; a file -> kInvalidArgument; an empty directory
// is a scan with no checkpoints.
Result<CheckpointScan> ScanCheckpoints(const std::string& dir);

// Writes dir/anxin-manifest.json (atomically) listing every regular file
// under dir with its size and SHA-256. Returns the number of files; a
// directory without files -> kInvalidArgument (nothing to seal).
Result<int> SealCheckpoint(const std::string& dir);

// Checks dir against its manifest: kDataLoss naming the first file that is
// missing or differs; kNotFound when there is no manifest.
Status VerifyManifest(const std::string& dir);

}  // namespace anxin::run

#endif  // ANXIN_RUN_CHECKPOINT_H_
