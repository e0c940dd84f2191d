// `anxin bench`: the group of stress tests and load tests. Each member lives
// in its own file (bench_NAME_cmd.cc) and registers with
// ANXIN_REGISTER_SUBCOMMAND(bench, NAME, ...).
#include "anxin/cli/command.h"

namespace anxin::cli::bench_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(bench, "stress tests and load tests: collectives, inference servers");

}  // namespace
}  // namespace anxin::cli::bench_cmd
