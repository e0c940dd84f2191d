// The version string from `git describe` at configure time.
#ifndef ANXIN_CLI_VERSION_H_
#define ANXIN_CLI_VERSION_H_

namespace anxin::cli {
extern const char kVersion[];
}  // namespace anxin::cli

#endif  // ANXIN_CLI_VERSION_H_
