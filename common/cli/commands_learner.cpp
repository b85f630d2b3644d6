// commands_learner.cpp — list, check, hint, run: the learner's loop.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>

#include "cli.hpp"
#include "revisions.hpp"
#include "commands.hpp"
#include "learner_states.hpp"
#include "skeleton.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

// The default filter leaves out the long runs; `workbook check` is the quick loop.
constexpr const char* kQuickFilter = "~[.]~[slow]~[timing]~[gpu]";

// Note: only the chapter's test binary is built, not its programs: the
// verdicts need the tests alone, and each program is one more link against
// LibTorch in the learner's loop. `workbook run` builds the program it runs.
// Note: [one exercise stops at its first failing world size] A chapter's tests
// run at each of its world sizes in turn (2, 1, 3, 4 ranks for Chapter 4), a
// few seconds each. Checking one exercise, a failure at the first size already
// decides its verdict and gives the failure to show, so the other sizes are
// not run; checking a chapter runs them all, since every exercise's state
// depends on every size.
ChapterCheck check_chapter(const Chapter& chapter, const std::string& filter, bool quiet,
                           bool stop_at_failure = false) {
  ChapterCheck result;
  result.built = build_targets({"test_" + chapter.id + "_student"}, quiet);
  if (!result.built) return result;
  result.run = run_chapter_tests(chapter, "student", filter, stop_at_failure);
  if (!result.run.ran) {
    fmt::print("\nThe tests of {} did not finish (exit status {}{}). Their last output:\n{}\n", chapter.id,
               result.run.exit_code, result.run.exit_code == 124 ? ", time limit" : "",
               result.run.output.substr(result.run.output.size() > 3000 ? result.run.output.size() - 3000 : 0));
  }
  return result;
}

int hint_stage(const std::string& exercise) {
  const nlohmann::json state = load_state();
  return state.value("hints", nlohmann::json::object()).value(exercise, 0);
}

// True when every file of the chapter in chapters/ is still exactly its
// generated skeleton. Its exercises are then not started: `workbook dev check`
// proves that every test fails on an untouched skeleton with NotImplemented.
bool chapter_untouched(const Chapter& chapter, const std::vector<skeleton::FileStatus>& files) {
  const fs::path folder = source_dir() / "chapters" / chapter.folder;
  for (const skeleton::FileStatus& f : files)
    if (f.skeleton.parent_path() == folder && !f.up_to_date) return false;
  return true;
}

// The exercise whose WB_NOT_IMPLEMENTED a failed test of `exercise` stopped
// at, when it is another one; nullptr otherwise.
const Exercise* waits_for(const TestRecord& failed, const std::vector<Chapter>& chapters, const std::string& exercise) {
  static const std::regex missing_re(R"((ex\d+\.\d+) is not implemented yet)");
  for (const char* field : {"message", "expanded"}) {
    const std::string text = failed.failure.is_object() ? failed.failure.value(field, "") : "";
    std::smatch m;
    if (std::regex_search(text, m, missing_re) && m[1].str() != exercise) return find_exercise(chapters, m[1].str());
  }
  return nullptr;
}

}  // namespace

int cmd_list(bool check_first) {
  const auto chapters = load_chapters();
  // Note: a chapter the learner has not touched is neither built nor run, so
  // that the first `workbook list` does not compile every chapter's tests;
  // one they have touched is shown as its last check left it, unless
  // --check (Note [what `workbook list` shows]).
  const auto files = skeleton::scan(source_dir());
  const nlohmann::json checks = load_state().value("checks", nlohmann::json::object());
  int unfinished = 0;
  bool all_current = true;
  for (const Chapter& chapter : chapters) {
    ChapterCheck check;
    check.untouched = chapter_untouched(chapter, files);
    if (check.untouched) {
      print_states(chapter, check, unfinished);
    } else if (check_first) {
      const std::string fingerprint = chapter_fingerprint(chapter);
      const int64_t time = seconds_now();
      const auto revised = revisions_since_done(chapter, checks.value(chapter.id, nlohmann::json()));
      check = check_chapter(chapter, kQuickFilter, /*quiet=*/true);
      print_states(chapter, check, unfinished);
      print_revisions(revised);
      record_check(chapter, check_rows(chapter, check), fingerprint, time);
    } else {
      all_current = print_kept_states(chapter, checks) && all_current;
    }
    fmt::print("\n");
  }
  if (!all_current) fmt::print("`workbook list --check` checks every chapter you have changed first.\n");
  fmt::print("`workbook check exN.M` shows what is wrong with an exercise; `workbook hint exN.M` helps.\n");
  return 0;
}

int cmd_check(const std::optional<std::string>& target) {
  const auto chapters = load_chapters();
  std::vector<const Chapter*> selected;
  const Exercise* only = target ? find_exercise(chapters, *target) : nullptr;
  if (target) selected.push_back(&find_chapter(chapters, *target));
  else
    for (const Chapter& c : chapters) selected.push_back(&c);

  int unfinished = 0;
  for (const Chapter* chapter : selected) {
    const std::string filter = only ? "[" + only->id + "]" : kQuickFilter;
    // The files as they were compiled, for `workbook list` (Note [what `workbook list` shows]).
    const std::string fingerprint = chapter_fingerprint(*chapter);
    const int64_t time = seconds_now();
    ChapterCheck check = check_chapter(*chapter, filter, /*quiet=*/false, /*stop_at_failure=*/only != nullptr);
    std::vector<StateRow> rows = check_rows(*chapter, check);
    if (only) {  // this exercise's alone: the others' tests did not run
      rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const StateRow& r) { return r.exercise != only->id; }),
                 rows.end());
    }
    // What changed since this learner last found an exercise done (Note [learners mid-course]).
    const std::vector<std::string> revised =
        revisions_since_done(*chapter, load_state().value("checks", nlohmann::json::object()).value(chapter->id, nlohmann::json()),
                             only ? only->id : "");
    record_check(*chapter, rows, fingerprint, time);
    if (!check.built) {
      print_revisions(revised);
      fmt::print("\nFix the compiler errors above in chapters/{}/, then run `workbook check` again.\n", chapter->folder);
      return 1;
    }
    if (!check.run.ran) return 1;
    fmt::print("\n");
    int chapter_unfinished = 0;
    const Exercise* first = nullptr;
    if (only) {
      fmt::print("{}  {}\n", chapter->id, chapter->title);
      ExerciseState s = exercise_state(check.run, only->id);
      fmt::print("  {} {}\n", dotted(fmt::format("{:<6} {}", only->id, only->title), 60), state_name(s));
      if (s != ExerciseState::Done) {
        chapter_unfinished = 1;
        first = only;
      }
    } else {
      first = print_states(*chapter, check, chapter_unfinished);
    }
    print_revisions(revised);
    unfinished += chapter_unfinished;
    if (chapter_unfinished == 0) continue;

    // The first failing assertion: of the first unfinished exercise, else of any test.
    const TestRecord* failed = nullptr;
    for (const TestRecord& r : check.run.records)
      if (!r.passed && first && r.exercise() == first->id) {
        failed = &r;
        break;
      }
    if (!failed)
      for (const TestRecord& r : check.run.records)
        if (!r.passed) {
          failed = &r;
          break;
        }
    if (failed) {
      fmt::print("\nFirst failure{}:\n", first ? " in " + first->id : "");
      print_failure(*failed);
    }
    if (first) {
      // Note: [the exercise a failure waits for] A test of one exercise that
      // stops at another's WB_NOT_IMPLEMENTED (an earlier exercise, or another
      // chapter's through "uses") needs that one written first: name it.
      const Exercise* blocker = failed ? waits_for(*failed, chapters, first->id) : nullptr;
      if (blocker) {
        chapter = &find_chapter(chapters, blocker->id);
        fmt::print("\n{} needs {} first: its test stopped where {} is not written yet.", first->id, blocker->id,
                   blocker->id);
        first = blocker;
      }
      const auto hints = load_hints(*chapter);
      const size_t stages = hints.count(first->id) ? hints.at(first->id).size() : 0;
      const int seen = hint_stage(first->id);
      fmt::print("\nNext: read exercise {} in chapters/{}/README.md, edit chapters/{}/{}", first->id, chapter->folder,
                 chapter->folder, first->file);
      if (seen < static_cast<int>(stages))
        fmt::print(",\n      or run `workbook hint {}` (hint {} of {}).\n", first->id, seen + 1, stages);
      else
        fmt::print(" (all {} hints shown: `workbook hint {} --all`).\n", stages, first->id);
    }
    return 1;  // stop at the first chapter with work left: one thing at a time
  }
  if (unfinished == 0)
    fmt::print("\nAll checked exercises are done. Compare your speed with the reference: `workbook bench {}`.\n",
               selected.size() == 1 ? selected[0]->id : "chNN");
  return unfinished == 0 ? 0 : 1;
}

int cmd_hint(const std::string& exercise_id, bool all, bool reset) {
  const auto chapters = load_chapters();
  const Exercise* exercise = find_exercise(chapters, exercise_id);
  WB_CHECK(exercise != nullptr, "no exercise '{}' (they look like ex1.2; `workbook list` shows them)", exercise_id);
  const Chapter& chapter = find_chapter(chapters, exercise_id);
  const auto hints = load_hints(chapter);
  WB_CHECK(hints.count(exercise_id) && !hints.at(exercise_id).empty(), "{} has no hints in {}", exercise_id,
           chapter.hints_file().string());
  const auto& stages = hints.at(exercise_id);
  nlohmann::json state = load_state();
  int seen = reset ? 0 : hint_stage(exercise_id);
  if (reset) {
    state["hints"][exercise_id] = 0;
    save_state(state);
    fmt::print("{}: hints start again from the first.\n", exercise_id);
    return 0;
  }
  const int stop = all ? static_cast<int>(stages.size()) : std::min<int>(seen + 1, static_cast<int>(stages.size()));
  const int start = all ? 0 : std::max(0, stop - 1);
  for (int i = start; i < stop; ++i) {
    fmt::print("{} — hint {} of {}: {}\n", exercise_id, i + 1, stages.size(), stages[static_cast<size_t>(i)]);
  }
  if (!all && seen >= static_cast<int>(stages.size()))
    fmt::print("(that was the last hint; the lesson, chapters/{}/README.md, explains the rest)\n", chapter.folder);
  state["hints"][exercise_id] = std::max(seen, stop);
  save_state(state);
  return 0;
}

namespace {

// A chapter's programs are its main_*.cpp files: main_train.cpp is chNN_train.
std::vector<std::string> chapter_programs(const Chapter& chapter) {
  std::vector<std::string> programs;
  for (const auto& entry : fs::directory_iterator(source_dir() / "solutions" / chapter.folder)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("main_", 0) == 0 && entry.path().extension() == ".cpp")
      programs.push_back(chapter.id + "_" + entry.path().stem().string().substr(5));
  }
  std::sort(programs.begin(), programs.end());
  return programs;
}

}  // namespace

int cmd_run(const std::string& chapter_name, const std::optional<std::string>& program_flag, bool solution, int ranks,
            int nodes, const std::vector<std::string>& args) {
  const auto chapters = load_chapters();
  const Chapter& chapter = find_chapter(chapters, chapter_name);
  const std::string program = program_flag.value_or(chapter.program);
  WB_CHECK(!program.empty(), "{} has no program to run", chapter.id);
  const std::vector<std::string> programs = chapter_programs(chapter);
  WB_CHECK(std::find(programs.begin(), programs.end(), program) != programs.end(),
           "--program {}: {} has {}", program, chapter.id, fmt::join(programs, ", "));
  WB_CHECK(ranks <= chapter.max_ranks, "{} is a {}: --ranks {} is more than its {}", chapter.id,
           chapter.max_ranks == 1 ? "single-process chapter" : "chapter", ranks, chapter.max_ranks);
  const Placement placement = nodes > 0 ? Placement::on_nodes(ranks, nodes) : Placement(ranks);
  const std::string flavor = solution ? "solution" : "student";
  if (!build_targets({program + "_" + flavor}, /*quiet=*/true)) return 1;
  std::vector<std::string> argv = {(build_dir() / "bin" / flavor / program).string()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv = launch_command(placement, argv);
  ProcessOptions options;
  if (placement.multi_process()) options.env = mpi_environment();
  return run_process(argv, options).exit_code;
}

}  // namespace workbook::cli
