// test_results.cpp — running a Catch2 binary and reading what each test did.
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <algorithm>
#include <regex>

#include "cli.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

std::string TestRecord::exercise() const {
  static const std::regex tag(R"(ex\d+\.\d+)");
  for (const std::string& t : tags)
    if (std::regex_match(t, tag)) return t;
  return "";
}

bool TestRecord::not_implemented(const std::string& exercise) const {
  if (passed || failure.is_null()) return false;
  // An unexpected exception carries it in the message; REQUIRE_THROWS_WITH
  // shows the exception's text in the expanded expression.
  const std::string needle = exercise + " is not implemented yet";
  return failure.value("message", "").find(needle) != std::string::npos ||
         failure.value("expanded", "").find(needle) != std::string::npos;
}

TestRun run_tests(const std::string& binary, const std::string& filter, int ranks, double timeout_s) {
  TestRun run;
  const fs::path program = build_dir() / binary;
  WB_CHECK(fs::exists(program), "{} is not built (run `cmake --build {}`)", program.string(), build_dir().string());
  const fs::path results = build_dir() / fmt::format(".results-{}-{}.json", binary, getpid());
  fs::remove(results);
  ProcessOptions options;
  options.capture = true;
  options.timeout_s = timeout_s;
  options.env = mpi_environment();
  options.env["WORKBOOK_RESULTS"] = results.string();
  std::vector<std::string> argv = {program.string()};
  if (!filter.empty()) argv.push_back(filter);
  ProcessResult done = run_process(launch_command(ranks, argv), options);
  run.exit_code = done.exit_code;
  run.output = done.output;
  if (!fs::exists(results)) return run;
  std::ifstream in(results);
  nlohmann::json records = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  fs::remove(results);
  if (!records.is_array()) return run;
  run.ran = true;
  for (const auto& r : records) {
    TestRecord record;
    record.name = r.value("name", "");
    record.tags = r.value("tags", std::vector<std::string>{});
    record.passed = r.value("passed", false);
    record.failure = r.value("failure", nlohmann::json());
    run.aborted = run.aborted || r.value("aborted", false);
    run.records.push_back(record);
  }
  return run;
}

TestRun run_chapter_tests(const Chapter& chapter, const std::string& flavor, const std::string& filter,
                          bool stop_at_failure) {
  const std::string binary = "test_" + chapter.id + "_" + flavor;
  if (chapter.test_ranks.empty()) return run_tests(binary, filter);
  TestRun merged;
  merged.ran = true;
  merged.exit_code = 0;
  for (size_t i = 0; i < chapter.test_ranks.size(); ++i) {
    const int ranks = chapter.test_ranks[i];
    TestRun run = run_tests(binary, i == 0 ? filter : fmt::format("[np{}]{}", ranks, filter), ranks);
    merged.output += fmt::format("--- {} rank(s)\n{}", ranks, run.output);
    if (run.exit_code != 0 && merged.exit_code == 0) merged.exit_code = run.exit_code;
    merged.ran = merged.ran && run.ran;
    merged.aborted = merged.aborted || run.aborted;
    for (TestRecord& record : run.records) {
      if (!record.passed && !record.failure.is_null())
        record.failure["message"] = fmt::format("(at {} ranks) {}", ranks, record.failure.value("message", ""));
      auto same = std::find_if(merged.records.begin(), merged.records.end(),
                               [&](const TestRecord& r) { return r.name == record.name; });
      if (same == merged.records.end()) merged.records.push_back(record);
      else if (same->passed && !record.passed) *same = record;
    }
    if (!run.ran) break;  // a run that did not finish: its output says why
    if (stop_at_failure && std::any_of(merged.records.begin(), merged.records.end(),
                                       [](const TestRecord& r) { return !r.passed; }))
      break;
  }
  return merged;
}

std::string state_name(ExerciseState state) {
  switch (state) {
    case ExerciseState::NotStarted: return "not started";
    case ExerciseState::Failing: return "failing";
    case ExerciseState::Done: return "done";
    case ExerciseState::NoTests: return "no tests";
    case ExerciseState::NotRun: return "not run (the test run stopped early)";
  }
  return "?";
}

ExerciseTally tally(const TestRun& run, const std::string& exercise) {
  ExerciseTally t;
  t.stopped_early = run.aborted;
  for (const TestRecord& r : run.records) {
    if (r.exercise() != exercise) continue;
    ++t.total;
    if (r.passed) ++t.passed;
    else if (r.not_implemented(exercise)) ++t.not_started;
  }
  return t;
}

ExerciseState ExerciseTally::state() const {
  if (total == 0) return stopped_early ? ExerciseState::NotRun : ExerciseState::NoTests;
  if (passed == total) return ExerciseState::Done;
  if (not_started == total) return ExerciseState::NotStarted;
  return ExerciseState::Failing;
}

void print_failure(const TestRecord& record) {
  fmt::print("  test:     {}\n", record.name);
  const nlohmann::json& f = record.failure;
  if (f.is_null()) return;
  fmt::print("  at:       {}:{}\n", relative_to_source(f.value("file", "")), f.value("line", 0));
  const std::string expression = f.value("expression", "");
  // An exception thrown between checks has no expression: Catch2 says "{Unknown expression ...}".
  if (!expression.empty() && expression.front() != '{') {
    fmt::print("  check:    {}\n", expression);
    const std::string expanded = f.value("expanded", "");
    if (!expanded.empty() && expanded != expression) fmt::print("  values:   {}\n", expanded);
  }
  const std::string message = f.value("message", "");
  if (!message.empty()) fmt::print("  message:  {}\n", message);
  // Every INFO and CAPTURE in scope: the outer ones (which case of a loop:
  // the sizes, the ranks, the step) as context, the innermost, written for
  // this check, as its meaning; a message of several lines kept whole.
  std::vector<std::string> infos;
  if (f.contains("infos") && f["infos"].is_array()) {
    for (const auto& each : f["infos"]) infos.push_back(each.get<std::string>());
  } else {  // a record from before "infos": one line a message
    std::string info = f.value("info", "");
    for (size_t start = 0; start < info.size();) {
      const size_t end = info.find('\n', start);
      infos.push_back(info.substr(start, end == std::string::npos ? std::string::npos : end - start));
      start = end == std::string::npos ? info.size() : end + 1;
    }
  }
  while (!infos.empty() && (infos.back().empty() || message.find(infos.back()) != std::string::npos)) infos.pop_back();
  constexpr size_t kMostShown = 8;  // the innermost ones, should a loop have captured many
  const size_t first = infos.size() > kMostShown ? infos.size() - kMostShown : 0;
  // A CAPTURE reads "name := value": which case failed. The innermost INFO
  // says what the check means; the INFOs around it, its context.
  auto captured = [](const std::string& text) { return text.find(" := ") != std::string::npos; };
  size_t meaning = infos.size();
  for (size_t i = infos.size(); i-- > first;)
    if (!captured(infos[i])) {
      meaning = i;
      break;
    }
  for (size_t i = first; i < infos.size(); ++i) {
    std::string text = infos[i];
    for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 13)) text.insert(at + 1, 12, ' ');
    fmt::print("  {:<10}{}\n", captured(infos[i]) ? "case:" : i == meaning ? "meaning:" : "context:", text);
  }
}

}  // namespace workbook::cli
