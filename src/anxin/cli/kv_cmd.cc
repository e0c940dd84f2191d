// `anxin kv`: KV-cache tools. Each member lives in its own file
// (kv_NAME_cmd.cc) and registers with ANXIN_REGISTER_SUBCOMMAND(kv, NAME, ...).
#include "anxin/cli/command.h"

namespace anxin::cli::kv_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(kv, "KV-cache sizing and accuracy: plan capacity, measure formats");

}  // namespace
}  // namespace anxin::cli::kv_cmd
