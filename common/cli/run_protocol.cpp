// run_protocol.cpp — running a workbook program the way `bench` and `tour`
// do: with --json into a file, its JSON lines read back (ARCHITECTURE.md,
// "Output"), and how it ended told by its exit status (ARCHITECTURE.md,
// "Errors and exit status").
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string_view>

#include "cli.hpp"

namespace workbook::cli {
namespace {

// What a run that is not ok says about itself. Note: [failures by exit
// status] (exit_status.hpp) the kind comes from the exit status; the text is
// only looked up for it, so "internal error: ..." is never taken for "error: ...".
std::string failure_message(const ProcessResult& done, ExitStatus status) {
  if (done.timed_out) return "time limit reached";
  const std::string_view prefix = failure_prefix(status);
  if (!prefix.empty()) {
    std::istringstream output(done.output);
    for (std::string line; std::getline(output, line);)
      if (line.compare(0, prefix.size(), prefix) == 0) return line;
  }
  if (status == ExitStatus::Ok) return "exit status 0, but no result line";
  return fmt::format("exit status {}", done.exit_code);
}

}  // namespace

RunOutcome run_for_result(std::vector<std::string> argv, bool passthrough, double timeout_s,
                          const Placement& placement, const fs::path& json_file) {
  RunOutcome outcome;
  const fs::path json = json_file.empty() ? build_dir() / fmt::format(".run-{}.jsonl", getpid()) : json_file;
  fs::remove(json);
  argv.push_back("--json");
  argv.push_back(json.string());
  argv = launch_command(placement, argv);
  ProcessOptions options;
  options.capture = !passthrough;
  options.timeout_s = timeout_s;
  if (placement.multi_process()) options.env = mpi_environment();
  const auto begin = std::chrono::steady_clock::now();
  const ProcessResult done = run_process(argv, options);
  outcome.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  // mpirun ends with the exit status of the first rank that failed, so one
  // status tells a distributed run's kind of failure too.
  outcome.status = exit_status_from_code(done.exit_code);
  std::ifstream in(json);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_object()) outcome.lines.push_back(std::move(parsed));
  }
  fs::remove(json);
  if (outcome.status == ExitStatus::Ok && !last.empty()) {
    outcome.result = nlohmann::json::parse(last, nullptr, false);
    outcome.ok = outcome.result.is_object() && outcome.result.value("type", "") == "result";
  }
  if (!outcome.ok) outcome.error = failure_message(done, outcome.status);
  outcome.output = done.output;
  return outcome;
}

}  // namespace workbook::cli
