// anxin::Error and anxin::Result<T>: the one error type of the project.
//
// An Error carries a code chosen by what the caller should do next, a message
// for a person, and a chain of context added as it rises through the layers:
//
//   #include "anxin/base/file.h"   // ReadFile
//
//   struct Scenario { std::string text; };
//   Status Validate(const std::string& text) {
//     if (text.empty()) return InvalidArgument("the scenario is empty");
//     return Ok();
//   }
//   Result<Scenario> LoadScenario(const std::string& path) {
//     ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     ANXIN_TRY(Validate(text));
//     return Scenario{std::move(text)};
//   }
//   void Report() {
//     auto r = LoadScenario("x.yaml");
//     if (!r) std::cerr << r.error().ToString();  // "invalid argument: the scenario is empty"
//   }
//
// Thread safety: Error is a value type; distinct objects may be used from
// different threads.
#ifndef ANXIN_BASE_ERROR_H_
#define ANXIN_BASE_ERROR_H_

#include <expected>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anxin {

// What the caller should do next.
enum class ErrorCode {
  kInvalidArgument,     // fix the input (flag, file contents, config value)
  kNotFound,            // the named thing does not exist; fix the name
  kDataLoss,            // input is truncated or corrupt; get a good copy
  kFailedPrecondition,  // the system is not in a state to do this; fix the state first
  kUnavailable,         // a server, device or library is not reachable now; retry later
  kDeadlineExceeded,    // it took too long; retry with a longer timeout
  kResourceExhausted,   // out of memory, space or quota
  kPermissionDenied,    // run with the rights it needs
  kUnimplemented,       // this backend or build cannot do it; use another
  kAborted,             // a concurrent change or a stop interrupted it; retry the whole thing
  kCancelled,           // the caller asked to stop
  kInternal,            // a bug in anxin: report it
};

// The lower-case name of a code ("invalid argument").
std::string_view ErrorCodeName(ErrorCode code);

class [[nodiscard]] Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Outermost context first.
  const std::vector<std::string>& context() const { return context_; }

  // Adds what the caller was doing, e.g. "loading scenario x.yaml". Returns
  // *this so that `return std::unexpected(e.With("..."))` reads naturally.
  Error& With(std::string context) & {
    context_.insert(context_.begin(), std::move(context));
    return *this;
  }
  Error&& With(std::string context) && {
    context_.insert(context_.begin(), std::move(context));
    return std::move(*this);
  }

  // "ctx1: ctx2: message" (no code name); what a person reads after "error: ".
  std::string Describe() const;
  // "invalid argument: ctx1: ctx2: message".
  std::string ToString() const;

 private:
  ErrorCode code_;
  std::string message_;
  std::vector<std::string> context_;
};

// A value or the Error that stopped it. A std::expected<T, Error> in every
// respect, and [[nodiscard]] as a type: a call whose Result is dropped does not
// compile (-Werror), whichever function returned it. Where ignoring a failure
// is really right, say so: `(void)RemoveStaleFile(path);  // best effort`.
template <typename T>
class [[nodiscard]] Result : public std::expected<T, Error> {
 public:
  using Base = std::expected<T, Error>;
  using Base::Base;
  Result() = default;
  // From a plain std::expected (std::expected's own monadic operations return one).
  Result(const Base& other) : Base(other) {}
  Result(Base&& other) : Base(std::move(other)) {}
};
using Status = Result<void>;

inline Status Ok() { return {}; }

// Shorthands that build an unexpected Error with the given code.
inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error(code, std::move(message)));
}
inline std::unexpected<Error> InvalidArgument(std::string m) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(m));
}
inline std::unexpected<Error> NotFound(std::string m) {
  return MakeError(ErrorCode::kNotFound, std::move(m));
}
inline std::unexpected<Error> DataLoss(std::string m) {
  return MakeError(ErrorCode::kDataLoss, std::move(m));
}
inline std::unexpected<Error> FailedPrecondition(std::string m) {
  return MakeError(ErrorCode::kFailedPrecondition, std::move(m));
}
inline std::unexpected<Error> Unavailable(std::string m) {
  return MakeError(ErrorCode::kUnavailable, std::move(m));
}
inline std::unexpected<Error> DeadlineExceeded(std::string m) {
  return MakeError(ErrorCode::kDeadlineExceeded, std::move(m));
}
inline std::unexpected<Error> ResourceExhausted(std::string m) {
  return MakeError(ErrorCode::kResourceExhausted, std::move(m));
}
inline std::unexpected<Error> PermissionDenied(std::string m) {
  return MakeError(ErrorCode::kPermissionDenied, std::move(m));
}
inline std::unexpected<Error> Unimplemented(std::string m) {
  return MakeError(ErrorCode::kUnimplemented, std::move(m));
}
inline std::unexpected<Error> Aborted(std::string m) {
  return MakeError(ErrorCode::kAborted, std::move(m));
}
inline std::unexpected<Error> Cancelled(std::string m) {
  return MakeError(ErrorCode::kCancelled, std::move(m));
}
inline std::unexpected<Error> Internal(std::string m) {
  return MakeError(ErrorCode::kInternal, std::move(m));
}

// An Error from errno after a failed system call: "open x.yaml: No such file
// or directory", with the code that fits errno (ENOENT -> kNotFound, EACCES ->
// kPermissionDenied, ENOSPC -> kResourceExhausted, ...).
Error ErrnoError(int errno_value, std::string_view what);

// The exit status of the `anxin` program for an error that ends it
// (docs/exit-codes.md): 2 for usage, configuration and input errors, 3 for
// environment errors (missing library, device or server), 1 never (that is
// "the thing checked failed", decided by the command itself).
int ExitCodeFor(const Error& error);

namespace internal {
inline Error&& TakeError(Error&& e) { return std::move(e); }
template <typename T>
Error TakeError(std::expected<T, Error>&& r) {
  return std::move(r).error();
}
}  // namespace internal

}  // namespace anxin

#define ANXIN_CONCAT_INNER_(a, b) a##b
#define ANXIN_CONCAT_(a, b) ANXIN_CONCAT_INNER_(a, b)

// Evaluates expr (a Result<T> or Status); on error returns it from the
// enclosing function, which must return a Result or Status.
#define ANXIN_TRY(expr)                                                             \
  do {                                                                              \
    auto&& anxin_try_result_ = (expr);                                              \
    if (!anxin_try_result_) [[unlikely]]                                            \
      return std::unexpected<::anxin::Error>(std::move(anxin_try_result_).error()); \
  } while (false)

// Declares lhs from the value of expr (a Result<T>), or returns its error.
#define ANXIN_ASSIGN_OR_RETURN(lhs, expr) \
  ANXIN_ASSIGN_OR_RETURN_IMPL_(ANXIN_CONCAT_(anxin_aor_, __LINE__), lhs, expr)
#define ANXIN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)                \
  auto tmp = (expr);                                                \
  if (!tmp) [[unlikely]]                                            \
    return std::unexpected<::anxin::Error>(std::move(tmp).error()); \
  lhs = std::move(tmp).value()

#endif  // ANXIN_BASE_ERROR_H_
