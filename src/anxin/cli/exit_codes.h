// Exit statuses of the `anxin` program (docs/exit-codes.md).
#ifndef ANXIN_CLI_EXIT_CODES_H_
#define ANXIN_CLI_EXIT_CODES_H_

namespace anxin::cli {

inline constexpr int kExitOk = 0;           // ran, and everything checked is fine
inline constexpr int kExitCheckFailed = 1;  // ran, and the thing checked failed
inline constexpr int kExitUsage = 2;        // bad flag, config or input file
inline constexpr int kExitEnvironment = 3;  // missing library, device or server
// `anxin run` only (docs/recovery.md):
inline constexpr int kExitRestartStorm = 4;  // restarts in a row made no progress
inline constexpr int kExitEscalated = 5;  // a failing device could not be isolated: stopped, paged

}  // namespace anxin::cli

#endif  // ANXIN_CLI_EXIT_CODES_H_
