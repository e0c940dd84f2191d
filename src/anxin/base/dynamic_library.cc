#include "anxin/base/dynamic_library.h"

#include <fmt/format.h>

#include <cstdlib>

namespace anxin {

std::string LibraryPath(std::string_view configured, const char* env_var,
                        std::string_view fallback) {
  if (!configured.empty()) return std::string(configured);
  const char* env = std::getenv(env_var);
  return std::string(env != nullptr && *env != '\0' ? std::string_view(env) : fallback);
}

Result<void*> OpenLibrary(std::string_view who, const std::string& path, std::string_view advice,
                          int scope) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | scope);
  if (lib != nullptr) return lib;
  const char* reason = dlerror();
  std::string message = fmt::format("cannot load {} ({})", path, reason != nullptr ? reason : "?");
  if (!who.empty()) message = fmt::format("{}: {}", who, message);
  if (!advice.empty()) message = fmt::format("{}: {}", message, advice);
  return Unavailable(std::move(message));
}

}  // namespace anxin
