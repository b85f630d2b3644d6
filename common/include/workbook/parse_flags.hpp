// parse_flags.hpp — how every program parses its flags: --help prints usage
// and exits 0; a bad flag prints one message and exits 2.
#pragma once
#include <CLI/CLI.hpp>

namespace workbook {

void parse_flags_or_exit(CLI::App& app, int argc, char** argv);

}  // namespace workbook
