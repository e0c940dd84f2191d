// HostRoot: reads (and, for fixes, writes) files of /sys, /proc and /etc
// under a root prefix, so that every reader runs unchanged on a captured tree.
//
//   HostRoot root("/tmp/captured-host");          // or HostRoot() for the live "/"
//   ANXIN_ASSIGN_OR_RETURN(std::string text, root.ReadFile("/proc/interrupts"));
//   ANXIN_ASSIGN_OR_RETURN(auto names, root.ListDir("/sys/bus/pci/devices"));
//
// Paths given to the methods are absolute paths on the host ("/proc/..."); the
// prefix is added here and nowhere else. Errors name the host path, not the
// prefixed one, so a report reads the same on a fixture and on a live host.
// Thread safety: const methods may be called from several threads.
#ifndef ANXIN_HOST_ROOT_FS_H_
#define ANXIN_HOST_ROOT_FS_H_

#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::host {

class HostRoot {
 public:
  explicit HostRoot(std::string root = "/");

  // True when the prefix is "/", i.e. this is the machine we run on.
  bool is_live() const { return root_.empty(); }
  // The prefix as given ("/" for the live host).
  std::string root() const { return root_.empty() ? "/" : root_; }
  // The real file-system path of a host path.
  std::string Path(std::string_view host_path) const;

  // Whole contents (works for /proc files that report size 0).
  Result<std::string> ReadFile(std::string_view host_path) const;
  // Contents with trailing white space removed (sysfs attribute files).
  Result<std::string> ReadAttr(std::string_view host_path) const;
  // Sorted entry names without "." and "..".
  Result<std::vector<std::string>> ListDir(std::string_view host_path) const;
  // The target of a symbolic link, as stored.
  Result<std::string> ReadLink(std::string_view host_path) const;
  bool Exists(std::string_view host_path) const;
  // Overwrites an existing file (O_WRONLY|O_TRUNC, no create), as one writes
  // to /proc/irq/N/smp_affinity_list.
  Status WriteExisting(std::string_view host_path, std::string_view content) const;

 private:
  std::string root_;  // "" for "/", else the prefix without a trailing '/'
};

}  // namespace anxin::host

#endif  // ANXIN_HOST_ROOT_FS_H_
