// `anxin serve`: serving components. Each member lives in its own file
// (serve_NAME_cmd.cc) and registers with ANXIN_REGISTER_SUBCOMMAND(serve, NAME, ...).
#include "anxin/cli/command.h"

namespace anxin::cli::serve_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(serve,
                             "serving: a simulated OpenAI-compatible server, an admission gate");

}  // namespace
}  // namespace anxin::cli::serve_cmd
