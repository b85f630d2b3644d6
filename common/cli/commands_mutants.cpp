// commands_mutants.cpp — `workbook dev mutants [exN.M]`, for maintainers: every
// known-wrong solution in tests/mutants/ must be refused by its exercise's tests.
//
// Note: [how a mutant is tried] A mutant is a patch against one solution file,
// tests/mutants/exN.M-what-is-wrong.patch, whose first line says what is
// wrong. While they are tried, the student copies in chapters/ of the
// chapters concerned are made the reference: every file there with solution
// regions gets its solution's text. Then, for each mutant: its file is patched, the chapter's
// student tests are rebuilt (one file recompiles) and the exercise's tests
// run (not its [timing] ones), at each of the chapter's rank counts until one refuses it; then the
// file is the reference again, so that each mutant is tried alone. A mutant
// that compiles and passes them all is ACCEPTED: the tests miss the very
// mistake it makes. The skeletons are written back on every way out
// of the command, and it refuses to start while any of them holds a learner's
// work: it is meant for a clean checkout (CI, a maintainer's clone).
#include <stdlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "skeleton.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

namespace {

struct Mutant {
  fs::path patch;
  std::string name;      // "ex4.5-launches-every-bucket-in-finish"
  std::string exercise;  // "ex4.5"
  std::string what;      // the first line: what is wrong
  fs::path solution;     // the file it patches, relative: "solutions/04_ring_allreduce/reducer.cpp"
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  std::ofstream(temporary, std::ios::binary) << text;
  fs::rename(temporary, path);
}

Mutant read_mutant(const fs::path& patch) {
  Mutant m;
  m.patch = patch;
  m.name = patch.stem().string();
  m.exercise = m.name.substr(0, m.name.find('-'));
  std::ifstream in(patch);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("What is wrong: ", 0) == 0 && m.what.empty()) m.what = line.substr(15);
    if (line.rfind("--- ", 0) == 0) {
      m.solution = line.substr(4, line.find_first_of("\t ", 4) - 4);
      break;
    }
  }
  WB_CHECK(m.exercise.rfind("ex", 0) == 0 && !m.what.empty() && m.solution.string().rfind("solutions/", 0) == 0,
           "{}: not a mutant (its name starts with exN.M-, its first line with \"What is wrong: \", and it patches "
           "a file under solutions/)",
           patch.string());
  return m;
}

// Puts the chapter's skeletons back however the command ends.
class SkeletonsRestored {
 public:
  explicit SkeletonsRestored(std::vector<skeleton::FileStatus> files) : files_(std::move(files)) {}
  ~SkeletonsRestored() {
    for (const skeleton::FileStatus& f : files_) write_file(f.skeleton, f.expected);
  }
  SkeletonsRestored(const SkeletonsRestored&) = delete;
  SkeletonsRestored& operator=(const SkeletonsRestored&) = delete;

 private:
  std::vector<skeleton::FileStatus> files_;
};

}  // namespace

int cmd_dev_mutants(const std::optional<std::string>& only) {
  const auto started = std::chrono::steady_clock::now();
  // The test programs started below inherit it: Note [two mutants tested at once].
  setenv("OMP_NUM_THREADS", "1", /*overwrite=*/1);
  std::vector<Mutant> mutants;
  for (const auto& entry : fs::directory_iterator(source_dir() / "tests" / "mutants"))
    if (entry.path().extension() == ".patch") mutants.push_back(read_mutant(entry.path()));
  std::sort(mutants.begin(), mutants.end(), [](const Mutant& a, const Mutant& b) { return a.name < b.name; });
  if (only) {
    // "ex4.5" picks one exercise's mutants, "ch04" a chapter's.
    const bool chapter = only->size() == 4 && only->rfind("ch", 0) == 0 && std::isdigit((*only)[2]) && std::isdigit((*only)[3]);
    const std::string prefix = chapter ? "ex" + std::to_string(std::stoi(only->substr(2))) + "." : "";
    auto wanted = [&](const Mutant& m) { return prefix.empty() ? m.exercise == *only : m.exercise.rfind(prefix, 0) == 0; };
    mutants.erase(std::remove_if(mutants.begin(), mutants.end(), [&](const Mutant& m) { return !wanted(m); }),
                  mutants.end());
    WB_CHECK(!mutants.empty(), "no mutants of {} in tests/mutants (give an exercise, ex4.5, or a chapter, ch04)", *only);
  }

  const auto chapters = load_chapters();
  auto chapter_of = [&](const std::string& exercise) -> const Chapter& {
    for (const Chapter& c : chapters)
      for (const Exercise& e : c.exercises)
        if (e.id == exercise) return c;
    throw UserError(fmt::format("tests/mutants: {} is not an exercise of any chapter", exercise));
  };
  std::map<std::string, std::deque<const Mutant*>> by_chapter;  // chapter id -> its mutants, in name order
  for (const Mutant& m : mutants) by_chapter[chapter_of(m.exercise).id].push_back(&m);

  // Every chapter concerned gets the reference in chapters/ for the whole run.
  std::vector<skeleton::FileStatus> chapter_files;
  for (const skeleton::FileStatus& f : skeleton::scan(source_dir())) {
    const auto concerned = std::find_if(by_chapter.begin(), by_chapter.end(), [&](const auto& entry) {
      return chapter_of(entry.second.front()->exercise).folder == f.skeleton.parent_path().filename();
    });
    if (f.regions.empty() || concerned == by_chapter.end()) continue;
    WB_CHECK(f.up_to_date, "{} is not its untouched skeleton: `workbook dev mutants` overwrites chapters/ while it "
             "runs, so it runs on a clean checkout only",
             fs::relative(f.skeleton, source_dir()).string());
    chapter_files.push_back(f);
  }
  SkeletonsRestored restore(chapter_files);
  for (const skeleton::FileStatus& f : chapter_files) write_file(f.skeleton, read_file(f.solution));

  // Note: [a file put back is not compiled again] Each chapter's student
  // tests are built once with the reference in every file, and each file's
  // object is kept. When a mutant's file is put back, its text and time are
  // the reference's again, and the kept object takes the mutant's place with
  // the mutant object's time: ninja then sees a source older than its last
  // compile and an object no newer than the dependencies it recorded for it,
  // so it compiles nothing. The chapter's student library is removed, so the
  // next build archives it again from the reference object and links the
  // tests. Without this, the first mutant of the next file recompiled the
  // file put back beside its own (50 compiles of about 10 s in all).
  auto target_of = [&](const Mutant* m) { return "test_" + chapter_of(m->exercise).id + "_student"; };
  struct Kept {
    fs::file_time_type source_time;
    fs::path object, copy, library;  // library: the chapter's student archive, libchNN_student.a
  };
  std::map<fs::path, Kept> kept;  // student file -> its reference object, kept
  {
    std::vector<std::string> targets;
    for (const auto& [id, queue] : by_chapter) targets.push_back(target_of(queue.front()));
    const auto started_reference = std::chrono::steady_clock::now();
    if (!build_targets(targets, /*quiet=*/true)) {
      fmt::print("dev mutants: the reference does not compile in chapters/ (above)\n");
      return 1;
    }
    const fs::path keep_dir = build_dir() / "dev-mutants" / "reference-objects";
    for (const skeleton::FileStatus& f : chapter_files) {
      const fs::path relative = fs::relative(f.skeleton, source_dir());
      const std::string library = "ch" + relative.parent_path().filename().string().substr(0, 2) + "_student";
      const fs::path object = build_dir() / "CMakeFiles" / (library + ".dir") / (relative.string() + ".o");
      if (!fs::exists(object)) continue;  // a header: nothing compiled from it alone
      const fs::path copy = keep_dir / (relative.string() + ".o");
      fs::create_directories(copy.parent_path());
      fs::copy_file(object, copy, fs::copy_options::overwrite_existing);
      kept[f.skeleton] = {fs::last_write_time(f.skeleton), object, copy, build_dir() / ("lib" + library + ".a")};
    }
    fmt::print("the reference built in chapters/ in {:.0f} s; {} objects kept\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started_reference).count(),
               kept.size());
  }

  int accepted = 0, problems = 0;
  double built_seconds = 0.0, tested_seconds = 0.0;  // in all: compiles and links, test runs
  fmt::print("{} mutant(s), two chapters' at a time; while they are tried, chapters/ holds the reference "
             "(interrupted? `workbook dev sync` writes the skeletons back)\n",
             mutants.size());
  std::fflush(stdout);
  auto student_file = [](const Mutant& m) { return source_dir() / "chapters" / fs::relative(m.solution, "solutions"); };
  auto unpatch = [&](const Mutant& m) {
    const fs::path file = student_file(m);
    write_file(file, read_file(source_dir() / m.solution));
    if (const auto it = kept.find(file); it != kept.end()) {  // Note: [a file put back is not compiled again]
      const Kept& k = it->second;
      fs::last_write_time(file, k.source_time);
      const fs::file_time_type object_time = fs::last_write_time(k.object);
      fs::copy_file(k.copy, k.object, fs::copy_options::overwrite_existing);
      fs::last_write_time(k.object, object_time);
      fs::remove(k.library);
    }
  };
  for (;;) {
    // Note: [two mutants at a time] Most of a mutant's time is compiling its
    // one file, on one core (LibTorch's headers: about 10 s of templates in
    // any file). Two mutants of two chapters patch two libraries, so one
    // build compiles both, a core each; then both are tested together
    // (Note [two mutants tested at once]).
    std::vector<std::deque<const Mutant*>*> fullest;
    for (auto& [id, queue] : by_chapter)
      if (!queue.empty()) fullest.push_back(&queue);
    if (fullest.empty()) break;
    std::sort(fullest.begin(), fullest.end(), [](const auto* a, const auto* b) { return a->size() > b->size(); });
    if (fullest.size() > 2) fullest.resize(2);

    std::vector<const Mutant*> patched;
    for (std::deque<const Mutant*>* queue : fullest) {
      const Mutant* m = queue->front();
      queue->pop_front();
      ProcessOptions quiet;
      quiet.capture = true;
      const ProcessResult applied = run_process(
          {"patch", "-s", "-o", student_file(*m).string(), (source_dir() / m->solution).string(), m->patch.string()},
          quiet);
      if (applied.exit_code != 0) {
        fmt::print("  FAIL     {}: does not apply to {}:\n{}\n", m->name, m->solution.string(), applied.output);
        unpatch(*m);
        ++problems;
        continue;
      }
      patched.push_back(m);
    }
    const auto build_started = std::chrono::steady_clock::now();
    std::vector<std::string> targets;
    for (const Mutant* m : patched) targets.push_back(target_of(m));
    // Together when both compile; when not, each alone says which does not.
    const bool built_together =
        patched.size() > 1 && build_targets(targets, /*quiet=*/true, /*show_errors=*/false);
    auto seconds_since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    std::vector<const Mutant*> built;
    std::vector<double> build_seconds;
    if (built_together) {
      built = patched;
      build_seconds.assign(patched.size(), seconds_since(build_started));
      built_seconds += build_seconds.front();
    } else {
      for (const Mutant* m : patched) {
        const auto alone_started = std::chrono::steady_clock::now();
        if (!build_targets({target_of(m)}, /*quiet=*/true)) {
          fmt::print("  FAIL     {}: does not compile (a mutant must be a program a student could run)\n", m->name);
          unpatch(*m);
          ++problems;
          continue;
        }
        built.push_back(m);
        build_seconds.push_back(seconds_since(alone_started));
        built_seconds += build_seconds.back();
      }
    }

    // Note: [two mutants tested at once] The two built mutants are tested at
    // the same time, each by its own chapter's test program: one test run
    // mostly waits (a program's start, MPI's), and the two together kept
    // both cores busy. Their tests run with OMP_NUM_THREADS=1, as the suite's
    // do (Note [one thread per test process]), and without the [timing] tests:
    // those compare two speeds, which two runs at once would disturb, and
    // none of them is what refuses a kept mutant.
    const auto test_started = std::chrono::steady_clock::now();
    std::vector<TestRun> runs(built.size());
    std::vector<double> test_seconds(built.size());
    std::vector<std::exception_ptr> errors(built.size());
    auto test = [&](size_t i) {
      const auto started_one = std::chrono::steady_clock::now();
      try {
        runs[i] = run_chapter_tests(chapter_of(built[i]->exercise), "student", "[" + built[i]->exercise + "]~[timing]",
                                    /*stop_at_failure=*/true);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      test_seconds[i] = seconds_since(started_one);
    };
    std::vector<std::thread> others;
    for (size_t i = 1; i < built.size(); ++i) others.emplace_back(test, i);
    if (!built.empty()) test(0);
    for (std::thread& t : others) t.join();
    tested_seconds += seconds_since(test_started);
    for (size_t i = 0; i < built.size(); ++i) {
      const Mutant* m = built[i];
      // Its file back to the reference at once: the next mutant of the
      // chapter may patch another file, and must be tried alone.
      unpatch(*m);
      if (errors[i]) std::rethrow_exception(errors[i]);
      const TestRun& run = runs[i];
      const std::string took = fmt::format("built {:.0f} s, tested {:.0f} s", build_seconds[i], test_seconds[i]);
      std::vector<std::string> refusing;
      for (const TestRecord& r : run.records)
        if (!r.passed) refusing.push_back(r.name);
      if (!refusing.empty()) {
        fmt::print("  refused  {}, by \"{}\"{} ({})\n", m->name, refusing.front(),
                   refusing.size() > 1 ? fmt::format(" and {} more", refusing.size() - 1) : "", took);
      } else if (!run.ran || run.exit_code != 0) {
        fmt::print("  refused  {}: the test run stopped (exit status {}; {})\n", m->name, run.exit_code, took);
      } else {
        fmt::print("  ACCEPTED {}: every {} test passes, yet {}\n", m->name, m->exercise, m->what);
        ++accepted;
      }
      std::fflush(stdout);  // a line per mutant as it is decided, also into a log file
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("dev mutants: {} tried, {} accepted, {} problem(s), {:.0f} s (building the mutants {:.0f} s, testing them "
             "{:.0f} s)\n",
             mutants.size(), accepted, problems, seconds, built_seconds, tested_seconds);
  return accepted == 0 && problems == 0 ? 0 : 1;
}

}  // namespace workbook::cli
