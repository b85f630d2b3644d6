// learner_states.cpp — each exercise's state as `workbook check` found it,
// kept for `workbook list`, which shows it without building or running.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include "learner_states.hpp"
#include "revisions.hpp"
#include "skeleton.hpp"

namespace workbook::cli {

// Note: [what `workbook list` shows] Building and testing a chapter takes
// seconds when its binary is current and minutes the first time, so
// `workbook list` runs nothing: it shows what the last `workbook check` (or
// `workbook list --check`) of each exercise found, and when. Each check
// records, per exercise it decided, its state with the time of the check and
// a fingerprint of the chapter's files then (the state file's "checks":
// chNN -> exN.M -> {state, passed, total, time, files}; the tests that belong
// to no exercise under ""). `list` computes the fingerprint again: where it
// differs, the learner has edited the chapter since, and the line says
// "changed since the check of <time>". A chapter still all skeleton is "not
// started" without any record (`workbook dev check` proves it).


nlohmann::json state_entry(const std::string& state, int passed, int total) {
  return {{"state", state}, {"passed", passed}, {"total", total}};
}

std::string row_label(const Exercise& e) { return fmt::format("{:<6} {}", e.id, e.title); }
std::string together_label() { return fmt::format("{:<6} {}", "", "the whole chapter together"); }

// What a row says after its dots: "failing (2/5 tests pass)", "done (3 tests)".
std::string state_text(const StateRow& row) {
  const std::string state = row.entry.value("state", "?");
  const int passed = row.entry.value("passed", 0), total = row.entry.value("total", 0);
  if (row.exercise.empty())
    return passed == total ? fmt::format("done ({} tests)", total) : fmt::format("{}/{} tests pass", passed, total);
  if (state == state_name(ExerciseState::Failing)) return fmt::format("{} ({}/{} tests pass)", state, passed, total);
  if (state == state_name(ExerciseState::Done)) return fmt::format("{} ({} tests)", state, total);
  return state;
}

// Every row of the chapter's table, from a check (or an untouched chapter).
std::vector<StateRow> check_rows(const Chapter& chapter, const ChapterCheck& check) {
  std::vector<StateRow> rows;
  for (const Exercise& e : chapter.exercises) {
    StateRow row{e.id, row_label(e), state_entry("does not compile"), false};
    if (check.untouched) {
      row.entry = state_entry(state_name(ExerciseState::NotStarted));
    } else if (check.built && check.run.ran) {
      const ExerciseTally counts = tally(check.run, e.id);
      const ExerciseState s = counts.state();
      row.entry = state_entry(state_name(s), counts.passed, counts.total);
      row.unfinished = s != ExerciseState::Done && s != ExerciseState::NoTests;
    } else if (check.built) {
      row.entry = state_entry("tests did not finish");
      row.unfinished = true;
    }
    if (!check.built) row.unfinished = true;  // untouched, or it does not compile
    rows.push_back(row);
  }
  // Tests that belong to no single exercise (the whole chapter on real data).
  if (check.built && check.run.ran) {
    int total = 0, passed = 0;
    for (const auto& r : check.run.records)
      if (r.exercise().empty()) {
        ++total;
        passed += r.passed;
      }
    if (total > 0)
      rows.push_back({"", together_label(), state_entry(passed == total ? "done" : "failing", passed, total),
                      passed != total});
  }
  return rows;
}

// Prints the chapter's table of exercises; returns the first unfinished one.
const Exercise* print_states(const Chapter& chapter, const ChapterCheck& check, int& unfinished) {
  fmt::print("{}  {}\n", chapter.id, chapter.title);
  const Exercise* first = nullptr;
  for (const StateRow& row : check_rows(chapter, check)) {
    fmt::print("  {} {}\n", dotted(row.label, 60), state_text(row));
    if (!row.unfinished) continue;
    ++unfinished;
    if (!first && !row.exercise.empty())
      for (const Exercise& e : chapter.exercises)
        if (e.id == row.exercise) first = &e;
  }
  return first;
}

// A fingerprint of the chapter's code in chapters/ (every *.cpp and *.hpp,
// names and contents: what its build compiles), FNV-1a over them in name
// order. Reading them takes milliseconds; an edit undone gives the same one.
std::string chapter_fingerprint(const Chapter& chapter) {
  const fs::path folder = source_dir() / "chapters" / chapter.folder;
  std::vector<fs::path> code;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() && (extension == ".cpp" || extension == ".hpp")) code.push_back(entry.path());
  }
  std::sort(code.begin(), code.end());
  uint64_t hash = 14695981039346656037ull;
  auto add = [&hash](const char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      hash ^= static_cast<unsigned char>(data[i]);
      hash *= 1099511628211ull;
    }
  };
  for (const fs::path& file : code) {
    const std::string name = file.filename().string();
    add(name.c_str(), name.size() + 1);  // with its '\0': names and contents cannot run together
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    add(text.data(), text.size());
    const std::string size = std::to_string(text.size()) + '\0';
    add(size.data(), size.size());
  }
  return fmt::format("{:016x}", hash);
}

std::string local_time(int64_t seconds) { return format_local_time(seconds, "%Y-%m-%d %H:%M"); }

int64_t seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What one check decided, kept: the rows given (an exercise's alone for
// `check exN.M`), merged into the chapter's record in the state file.
void record_check(const Chapter& chapter, const std::vector<StateRow>& rows, const std::string& fingerprint,
                  int64_t time) {
  nlohmann::json state = load_state();
  if (!state.contains("checks") || !state["checks"].is_object()) state["checks"] = nlohmann::json::object();
  nlohmann::json& kept = state["checks"][chapter.id];
  if (!kept.is_object()) kept = nlohmann::json::object();
  for (const StateRow& row : rows) {
    nlohmann::json entry = row.entry;
    entry["time"] = time;
    entry["files"] = fingerprint;
    kept[row.exercise] = entry;
  }
  save_state(state);
}

namespace {

// A row as the last check left it; nullopt when none was kept (or the state
// file's entry is damaged: it is then as good as none).
struct KeptRow {
  StateRow row;
  int64_t time = 0;
  bool current = false;  // the chapter's files are those the check compiled
};

std::optional<KeptRow> kept_row(const nlohmann::json& kept, const std::string& exercise, const std::string& label,
                                const std::string& fingerprint) {
  if (!kept.is_object() || !kept.contains(exercise)) return std::nullopt;
  const nlohmann::json& entry = kept.at(exercise);
  if (!entry.is_object() || !entry.value("state", nlohmann::json()).is_string() ||
      !entry.value("time", nlohmann::json()).is_number_integer() ||
      !entry.value("passed", nlohmann::json()).is_number_integer() ||
      !entry.value("total", nlohmann::json()).is_number_integer())
    return std::nullopt;
  KeptRow out;
  out.row = {exercise, label, entry, false};
  out.time = entry.at("time").get<int64_t>();
  out.current = entry.value("files", nlohmann::json()) == fingerprint;
  return out;
}

std::string kept_note(const KeptRow& k) {
  return k.current ? "checked " + local_time(k.time) : "changed since the check of " + local_time(k.time);
}

}  // namespace

// `workbook list` for a chapter the learner has edited: what its last checks
// found, without building or running anything (Note [what `workbook list`
// shows]). Returns false when a row is stale or was never checked.
bool print_kept_states(const Chapter& chapter, const nlohmann::json& checks) {
  const nlohmann::json kept = checks.is_object() ? checks.value(chapter.id, nlohmann::json()) : nlohmann::json();
  const std::string fingerprint = chapter_fingerprint(chapter);
  std::vector<std::pair<std::string, std::optional<KeptRow>>> rows;  // label, what was kept
  for (const Exercise& e : chapter.exercises) rows.emplace_back(row_label(e), kept_row(kept, e.id, row_label(e), fingerprint));
  // The whole chapter's tests are shown when a check of the whole chapter found some.
  if (auto together = kept_row(kept, "", together_label(), fingerprint)) rows.emplace_back(together_label(), together);
  // One note for the chapter when every row has the same; else one per row.
  std::set<std::string> notes;
  bool all_current = true;
  for (const auto& [label, k] : rows) {
    notes.insert(k ? kept_note(*k) : "");
    all_current = all_current && k && k->current;
  }
  const std::string again = fmt::format("`workbook check {}`", chapter.id);
  const bool one_note = notes.size() == 1;
  std::string header;
  if (one_note && notes.begin()->empty()) header = "not checked yet: " + again;
  else if (one_note) header = *notes.begin() + (all_current ? "" : ": " + again);
  else header = all_current ? "checked at different times" : "changed since some checks: " + again;
  fmt::print("{}  {}  ({})\n", chapter.id, chapter.title, header);
  for (const auto& [label, k] : rows) {
    std::string state = k ? state_text(k->row) : "not checked yet";
    if (k && !one_note) state += ", " + kept_note(*k);
    fmt::print("  {} {}\n", dotted(label, 60), state);
  }
  print_revisions(revisions_since_done(chapter, kept));
  return all_current;
}

void print_revisions(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) fmt::print("  ! {}\n", line);
}

}  // namespace workbook::cli
