// Vendor libraries (NVML, DCMI, the CUDA driver, ACL, HCCL) loaded at run time
// with dlopen, so that anxin builds and runs on machines without them: a
// missing library is an error that names it and says what to install, a
// missing function a false the caller turns into its own advice.
//
//   std::string path = LibraryPath(/*configured=*/"", "ANXIN_CUDA_LIBRARY", "libcuda.so.1");
//   ANXIN_ASSIGN_OR_RETURN(void* lib,
//                          OpenLibrary("cuda provider", path, "install the NVIDIA driver"));
//   int (*cu_init)(unsigned) = nullptr;
//   if (!LoadSymbol(lib, "cuInit", cu_init)) {
//     dlclose(lib);
//     return Unavailable("cuda provider: libcuda.so.1 lacks cuInit; update the NVIDIA driver");
//   }
//
// Thread safety: as dlopen and dlsym (safe from any thread).
#ifndef ANXIN_BASE_DYNAMIC_LIBRARY_H_
#define ANXIN_BASE_DYNAMIC_LIBRARY_H_

#include <dlfcn.h>

#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin {

// The library to open: `configured` (an option) when set, else the value of
// the environment variable env_var when set and not empty, else fallback.
std::string LibraryPath(std::string_view configured, const char* env_var,
                        std::string_view fallback);

// dlopen(path, RTLD_NOW | scope) (scope: RTLD_LOCAL or RTLD_GLOBAL). When
// that fails, kUnavailable "WHO: cannot load PATH (DLERROR): ADVICE", without
// "WHO: " when who is empty and without ": ADVICE" when advice is.
// The caller owns the handle (dlclose).
[[nodiscard]] Result<void*> OpenLibrary(std::string_view who, const std::string& path,
                                        std::string_view advice, int scope = RTLD_LOCAL);

// Sets fn to the function `name` of `library` (a dlopen handle); false, with
// fn null, when the library has none (optional functions may ignore it).
template <typename F>
bool LoadSymbol(void* library, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(library, name));
  return fn != nullptr;
}

}  // namespace anxin

#endif  // ANXIN_BASE_DYNAMIC_LIBRARY_H_
