#include "anxin/host/root_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin::host {

HostRoot::HostRoot(std::string root) : root_(std::move(root)) {
  while (!root_.empty() && root_.back() == '/') root_.pop_back();
}

std::string HostRoot::Path(std::string_view host_path) const {
  std::string p = root_;
  if (host_path.empty() || host_path.front() != '/') p += '/';
  p += host_path;
  return p;
}

Result<std::string> HostRoot::ReadFile(std::string_view host_path) const {
  const std::string path = Path(host_path);
  auto text = anxin::ReadFile(path);
  if (text || path == host_path) return text;
  // Errors name the path on the host ("/proc/x"), not where the tree was captured.
  std::string message = text.error().message();
  if (size_t at = message.find(path); at != std::string::npos) {
    message.replace(at, path.size(), host_path);
  }
  return MakeError(text.error().code(), std::move(message));
}

Result<std::string> HostRoot::ReadAttr(std::string_view host_path) const {
  ANXIN_ASSIGN_OR_RETURN(std::string s, ReadFile(host_path));
  return std::string(Trim(s));
}

Result<std::vector<std::string>> HostRoot::ListDir(std::string_view host_path) const {
  std::string path = Path(host_path);
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return std::unexpected(ErrnoError(errno, "list " + std::string(host_path)));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> HostRoot::ReadLink(std::string_view host_path) const {
  std::string path = Path(host_path);
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return std::unexpected(ErrnoError(errno, "readlink " + std::string(host_path)));
  return std::string(buf, static_cast<size_t>(n));
}

bool HostRoot::Exists(std::string_view host_path) const {
  struct stat st;
  return ::lstat(Path(host_path).c_str(), &st) == 0;
}

Status HostRoot::WriteExisting(std::string_view host_path, std::string_view content) const {
  std::string path = Path(host_path);
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return std::unexpected(ErrnoError(errno, "open " + std::string(host_path)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return std::unexpected(ErrnoError(e, "write " + std::string(host_path)));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    return std::unexpected(ErrnoError(errno, "close " + std::string(host_path)));
  return Ok();
}

}  // namespace anxin::host
