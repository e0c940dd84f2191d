// WithContext: adds "doing x" to the error of a Result or Status and passes
// it on (g++ 12's std::expected has no transform_error yet).
//
//   #include "anxin/mem/trace.h"
//
//   std::string path = "snap.pickle";
//   ANXIN_ASSIGN_OR_RETURN(auto t, WithContext(ReadTrace(path), "replaying " + path));
#ifndef ANXIN_MEM_CONTEXT_H_
#define ANXIN_MEM_CONTEXT_H_

#include <string>
#include <utility>

#include "anxin/base/error.h"

namespace anxin::mem {

template <typename T>
std::expected<T, Error> WithContext(std::expected<T, Error> r, std::string context) {
  if (!r) return std::unexpected<Error>(std::move(r.error()).With(std::move(context)));
  return r;
}

}  // namespace anxin::mem

#endif  // ANXIN_MEM_CONTEXT_H_
