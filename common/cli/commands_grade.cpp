// commands_grade.cpp — `workbook grade`, for instructors: a class's submissions
// built and tested, each in a sandbox, into a gradebook.
//
// Note: [the grader is Python] Grading is files and processes: reading
// tarballs and git bundles without trusting them, starting sandboxes, writing
// JSON and CSV. Python's standard library has each of those (tarfile, csv,
// subprocess), and nothing of it is on a learner's path, so it lives in
// common/grade/*.py and this command only starts it, with Debian's python3
// (no .venv needed), the paths of this checkout and build, and the LibTorch
// version the gradebook records. ARCHITECTURE.md, "Grading".
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "workbook/config.hpp"

namespace workbook::cli {

int cmd_grade(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   (source_dir() / "common" / "grade" / "grade.py").string(),
                                   "--source", source_dir().string(),
                                   "--build", build_dir().string(),
                                   "--workbook", (build_dir() / "workbook").string(),
                                   "--libtorch", std::string(config::torch_version)};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv).exit_code;
}

}  // namespace workbook::cli
