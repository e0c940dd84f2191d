// The `anxin serve` commands' wait for SIGINT / SIGTERM or the end of
// --duration: BlockStopSignals() and WaitForStop(seconds), now in
// base/stop_token.h. Include that header instead; this one goes once the
// serve commands do.
#ifndef ANXIN_CLI_SERVE_WAIT_H_
#define ANXIN_CLI_SERVE_WAIT_H_

#include "anxin/base/stop_token.h"

#endif  // ANXIN_CLI_SERVE_WAIT_H_
