// commands_dev.cpp — `workbook dev sync` and `workbook dev check`, for maintainers.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>

#include "cli.hpp"
#include "commands.hpp"
#include "skeleton.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

namespace {

// Code in a hint stage: the first backticked text that is an expression or a
// statement (it holds a call, an assignment, a semicolon, a modulo), or "".
// Note: [a first hint is a question] plain identifiers in backticks are
// allowed (naming `ring_segment` is a pointer, not the answer).
std::string code_in(const std::string& stage) {
  static const std::regex ticked("`([^`]+)`"), code(R"([(=;%]|\bmod\b)");
  for (std::sregex_iterator it(stage.begin(), stage.end(), ticked), end; it != end; ++it)
    if (std::regex_search((*it)[1].str(), code)) return (*it)[1].str();
  return "";
}

}  // namespace

int cmd_dev_sync(bool dry_run) {
  const auto files = skeleton::scan(source_dir());
  const fs::path backup = build_dir() / "dev-sync-backup" /
                          std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  int written = 0;
  bool backed_up = false;
  for (const auto& f : files) {
    if (f.up_to_date) continue;
    const fs::path relative = fs::relative(f.skeleton, source_dir());
    fmt::print("{} {}\n", dry_run ? "would write" : "writing", relative.string());
    ++written;
    if (dry_run) continue;
    // Nothing is lost: whatever chapters/ held is kept under the build tree.
    if (fs::exists(f.skeleton)) {
      fs::create_directories((backup / relative).parent_path());
      fs::copy_file(f.skeleton, backup / relative);
      backed_up = true;
    }
    fs::create_directories(f.skeleton.parent_path());
    const fs::path temporary = f.skeleton.string() + ".tmp";
    std::ofstream(temporary, std::ios::binary) << f.expected;
    fs::rename(temporary, f.skeleton);
  }
  for (const fs::path& orphan : skeleton::orphans(source_dir()))
    fmt::print("note: {} has no counterpart in solutions/ (remove it, or add its solution)\n",
               fs::relative(orphan, source_dir()).string());
  fmt::print("{} file(s) {}; {} up to date{}\n", written, dry_run ? "would change" : "written",
             files.size() - static_cast<size_t>(written),
             backed_up ? fmt::format(" (previous versions in {})", backup.string()) : "");
  return 0;
}

int cmd_dev_check(bool reference_run) {
  int problems = 0;
  auto problem = [&](const std::string& text) {
    fmt::print("  FAIL {}\n", text);
    ++problems;
  };

  fmt::print("1. chapters/ is generated from solutions/\n");
  std::vector<skeleton::FileStatus> files;
  try {
    files = skeleton::scan(source_dir());
  } catch (const skeleton::RegionError& e) {
    problem(e.what());
  }
  std::map<std::string, std::vector<std::string>> regions_by_exercise;  // exercise -> files
  for (const auto& f : files) {
    const std::string relative = fs::relative(f.skeleton, source_dir()).string();
    if (!f.up_to_date) problem(relative + " differs from its generated skeleton (run `workbook dev sync`)");
    for (const auto& r : f.regions) regions_by_exercise[r.exercise].push_back(relative);
  }
  for (const fs::path& orphan : skeleton::orphans(source_dir()))
    problem(fs::relative(orphan, source_dir()).string() + " has no counterpart in solutions/");

  fmt::print("2. manifests, regions and hints agree\n");
  const auto chapters = load_chapters();
  std::set<std::string> declared;
  for (const Chapter& c : chapters) {
    const auto hints = load_hints(c);
    for (const Exercise& e : c.exercises) {
      declared.insert(e.id);
      if (!regions_by_exercise.count(e.id)) problem(fmt::format("{}: no BEGIN SOLUTION {} region", c.id, e.id));
      if (!hints.count(e.id) || hints.at(e.id).empty())
        problem(fmt::format("{}: no hints for {} in {}", c.id, e.id, c.hints_file().string()));
      else if (const std::string code = code_in(hints.at(e.id).front()); !code.empty())
        problem(fmt::format("{}: the first hint of {} shows code (`{}`): a first hint asks a question in words",
                            c.id, e.id, code));
      else if (hints.at(e.id).size() < 3)
        problem(fmt::format("{}: {} has {} hint stage(s): they climb from a question, through the approach, to "
                            "near-code (3 or more)", c.id, e.id, hints.at(e.id).size()));
      if (!fs::exists(source_dir() / "chapters" / c.folder / e.file))
        problem(fmt::format("{}: {} names {}, which does not exist", c.id, e.id, e.file));
    }
    if (!fs::exists(c.lesson())) problem(fmt::format("{}: no lesson at {}", c.id, c.lesson().string()));
  }
  for (const auto& [exercise, where] : regions_by_exercise)
    if (!declared.count(exercise))
      problem(fmt::format("region {} in {} is not in any chapter.json", exercise, where.front()));

  fmt::print("3. everything builds (the students' targets too)\n");
  if (!build_targets({"all", "students"}, /*quiet=*/true)) {
    problem("the build failed");
    fmt::print("dev check: {} problem(s)\n", problems);
    return 1;
  }

  const std::string filter = "~[.]~[slow]~[timing]~[gpu]";
  for (const Chapter& c : chapters) {
    TestRun solution;
    if (reference_run) {
      fmt::print("4. {}: every reference test passes\n", c.id);
      solution = run_chapter_tests(c, "solution", filter);
      if (!solution.ran) problem(fmt::format("{}: the solution tests did not finish (exit {})", c.id, solution.exit_code));
      for (const TestRecord& r : solution.records)
        if (!r.passed) {
          problem(fmt::format("{}: solution test failed: {}", c.id, r.name));
          print_failure(r);
        }
    }

    fmt::print("5. {}: every student test fails on the untouched skeleton, naming its exercise\n", c.id);
    TestRun student = run_chapter_tests(c, "student", filter);
    if (!student.ran) problem(fmt::format("{}: the student tests did not finish (exit {})", c.id, student.exit_code));
    // Both builds run the same test files: the student's run shows the tags.
    for (const Exercise& e : c.exercises)
      if (exercise_state(student, e.id) == ExerciseState::NoTests)
        problem(fmt::format("{}: no test is tagged [{}]", c.id, e.id));
    for (const TestRecord& r : student.records) {
      // A test tagged [given] checks given code alone (Chapter 6's schedule): it passes on the skeleton too.
      const bool given = std::find(r.tags.begin(), r.tags.end(), "given") != r.tags.end();
      if (r.passed && given) continue;
      if (r.passed) {
        problem(fmt::format("{}: student test passes on the skeleton: {}", c.id, r.name));
      } else if (!r.exercise().empty() && !r.not_implemented(r.exercise())) {
        problem(fmt::format("{}: student test \"{}\" fails, but not with {}'s NotImplemented message", c.id, r.name,
                            r.exercise()));
        print_failure(r);
      }
    }
    if (reference_run) fmt::print("   {} reference tests, {} student tests\n", solution.records.size(), student.records.size());
    else fmt::print("   {} student tests (the reference tests not run here: --no-reference-run)\n", student.records.size());
  }
  fmt::print(problems == 0 ? "dev check: OK\n" : "dev check: {} problem(s)\n", problems);
  return problems == 0 ? 0 : 1;
}

}  // namespace workbook::cli
