// Whole-file reads and crash-safe writes.
//
// WriteFileAtomic replaces a file so that, whatever happens (the process is
// killed, the machine loses power after it returns), a reader sees either the
// old contents or the new ones, never a mix or a truncated file:
//
//   ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile("state.json"));
//   std::string updated = text + "\n";
//   ANXIN_TRY(WriteFileAtomic("state.json", updated));          // keeps the old mode
//   ANXIN_TRY(WriteFileAtomic("secret.yaml", text, 0600));      // or sets one
//
//   // Large files, written piece by piece (a checkpoint, a journal snapshot):
//   std::vector<std::string> chunks = {"header", "payload"};
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
Result<std::string> ReadFile(const std::string& path);
// The same, refusing more than max_bytes (kInvalidArgument) so that a wrong
// path such as /dev/zero cannot exhaust memory.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes);

// A file the user named as input (a flag's value, an argument, a variable),
// read whole. Everything that cannot be what the user meant is an input error
// (kInvalidArgument, exit status 2) naming `what`, the place it came from:
//   "--hosts /etc: is a directory, not a file"
//   "--env env.txt: the file is empty"
//   "--thresholds t.yaml: cannot read it: Permission denied"
// A missing file is kNotFound: "--map m.yaml: open m.yaml: No such file or directory".
// max_bytes as for ReadFile.
Result<std::string> ReadInputFile(const std::string& path, std::string_view what,
                                  size_t max_bytes = size_t{1} << 30);

// Replaces path with contents atomically and durably. mode: the given one;
// otherwise the existing file's mode; otherwise 0644.
Status WriteFileAtomic(const std::string& path, std::string_view contents,
                       std::optional<mode_t> mode = std::nullopt);

class AtomicFileWriter {
 public:
  // Creates the temporary file next to path; nothing is visible at path yet.
  static Result<AtomicFileWriter> Open(const std::string& path,
                                       std::optional<mode_t> mode = std::nullopt);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Abandons the write if Commit was not called: the target stays as it was.
  ~AtomicFileWriter();

  Status Write(std::string_view data);
  // fsync, rename over the target, fsync the directory. REQUIRES: not yet committed.
  Status Commit();

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
