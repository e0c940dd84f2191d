#include "anxin/base/error.h"

#include <cerrno>
#include <cstring>

namespace anxin {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kDataLoss:
      return "data loss";
    case ErrorCode::kFailedPrecondition:
      return "failed precondition";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDeadlineExceeded:
      return "deadline exceeded";
    case ErrorCode::kResourceExhausted:
      return "resource exhausted";
    case ErrorCode::kPermissionDenied:
      return "permission denied";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Error::Describe() const {
  std::string out;
  for (const auto& c : context_) {
    out += c;
    out += ": ";
  }
  out += message_;
  return out;
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code_));
  out += ": ";
  out += Describe();
  return out;
}

Error ErrnoError(int errno_value, std::string_view what) {
  ErrorCode code = ErrorCode::kInternal;
  switch (errno_value) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:
      code = ErrorCode::kNotFound;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      code = ErrorCode::kPermissionDenied;
      break;
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EDQUOT:
      code = ErrorCode::kResourceExhausted;
      break;
    case EINVAL:
    case EISDIR:
    case ENAMETOOLONG:
      code = ErrorCode::kInvalidArgument;
      break;
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EBUSY:
      code = ErrorCode::kUnavailable;
      break;
    case ETIMEDOUT:
      code = ErrorCode::kDeadlineExceeded;
      break;
    case EINTR:
      code = ErrorCode::kAborted;
      break;
    case EIO:
      code = ErrorCode::kDataLoss;
      break;
    default:
      break;
  }
  std::string message(what);
  message += ": ";
  message += std::strerror(errno_value);
  return Error(code, std::move(message));
}

int ExitCodeFor(const Error& error) {
  switch (error.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kDataLoss:
      return 2;
    default:
      return 3;
  }
}

}  // namespace anxin
