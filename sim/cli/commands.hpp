// The command line: argument parsing and dispatch only. Every exception becomes a message and an
// exit status here (0 done, 1 partly failed, 2 bad input, 3 internal error: docs/scenario-format.md).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace zerosim::cli {

/// Run `zerosim ARGS...` (args excludes the program name). Results go to `out`, messages to `err`.
int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

} // namespace zerosim::cli
