// Whole-file reads and crash-safe writes.
//
// WriteFileAtomic replaces a file so that, whatever happens (the process is
// killed, the machine loses power after it returns), a reader sees either the
// old contents or the new ones, never a mix or a truncated file:
//
//   ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile("state.json"));
//   ANXIN_TRY(WriteFileAtomic("state.json", updated));          // keeps the old mode
//   ANXIN_TRY(WriteFileAtomic("secret.yaml", text, 0600));      // or sets one
//
//   // Large files, written piece by piece (a checkpoint, a journal snapshot):
//   ANXIN_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open("ckpt.bin"));
//   for (auto& chunk : chunks) ANXIN_TRY(w.Write(chunk));
//   ANXIN_TRY(w.Commit());   // without Commit the target is left untouched
//
// How: the data goes to an unnamed file in the target's directory (O_TMPFILE,
// so a killed writer leaves nothing behind; where the file system lacks it, a
// hidden ".NAME.tmp.XXXXXX" file), is fsync'ed, given a temporary name, renamed
// over the target, and the directory is fsync'ed so the rename itself is durable.
//
// Thread safety: the functions are safe to call concurrently; concurrent
// writers of one path each replace it whole (the last rename wins). An
// AtomicFileWriter object is used by one thread at a time.
#ifndef ANXIN_BASE_FILE_H_
#define ANXIN_BASE_FILE_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin {

// The whole file. Missing -> kNotFound; a directory -> kInvalidArgument.
[[nodiscard]] Result<std::string> ReadFile(const std::string& path);
// The same, refusing more than max_bytes (kInvalidArgument) so that a wrong
// path such as /dev/zero cannot exhaust memory.
[[nodiscard]] Result<std::string> ReadFile(const std::string& path, size_t max_bytes);

// Replaces path with contents atomically and durably. mode: the given one;
// otherwise the existing file's mode; otherwise 0644.
[[nodiscard]] Status WriteFileAtomic(const std::string& path, std::string_view contents,
                                     std::optional<mode_t> mode = std::nullopt);

class AtomicFileWriter {
 public:
  // Creates the temporary file next to path; nothing is visible at path yet.
  [[nodiscard]] static Result<AtomicFileWriter> Open(const std::string& path,
                                                     std::optional<mode_t> mode = std::nullopt);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Abandons the write if Commit was not called: the target stays as it was.
  ~AtomicFileWriter();

  [[nodiscard]] Status Write(std::string_view data);
  // fsync, rename over the target, fsync the directory. REQUIRES: not yet committed.
  [[nodiscard]] Status Commit();

  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter() = default;
  void Abandon();

  std::string path_;
  std::string name_;       // the target's name within its directory
  std::string temp_name_;  // the temporary file's name; "" while it is unnamed (O_TMPFILE)
  int fd_ = -1;
  int dir_fd_ = -1;
  bool committed_ = false;
};

}  // namespace anxin

#endif  // ANXIN_BASE_FILE_H_
