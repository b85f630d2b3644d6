// learner_states.hpp — what `workbook list` and `workbook check` show of a
// chapter: each exercise's state from a check, kept in the state file with the
// time of the check and a fingerprint of the chapter's files
// (learner_states.cpp, Note [what `workbook list` shows]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"

namespace workbook::cli {

// The student's tests for one chapter, built and run.
struct ChapterCheck {
  bool built = false;
  bool untouched = false;  // every file is still the generated skeleton: nothing was built or run
  TestRun run;
};

inline std::string dotted(const std::string& left, int width) {
  return left.size() >= static_cast<size_t>(width) ? left + " " : left + " " + std::string(width - left.size() - 1, '.');
}

// A row of a chapter's table: an exercise, or "" for the tests of the whole
// chapter together; `entry` is what the state file keeps of it.
struct StateRow {
  std::string exercise;  // "ex1.2", or "" for the whole chapter together
  std::string label;
  nlohmann::json entry;  // {"state", "passed", "total"}
  bool unfinished = false;
};

nlohmann::json state_entry(const std::string& state, int passed = 0, int total = 0);
std::string row_label(const Exercise& e);
std::string together_label();
std::string state_text(const StateRow& row);  // "failing (2/5 tests pass)", "done (3 tests)"

// Every row of the chapter's table from a check; printed, with the first unfinished exercise returned.
std::vector<StateRow> check_rows(const Chapter& chapter, const ChapterCheck& check);
const Exercise* print_states(const Chapter& chapter, const ChapterCheck& check, int& unfinished);

std::string chapter_fingerprint(const Chapter& chapter);  // of its compiled files in chapters/
std::string local_time(int64_t seconds);
int64_t seconds_now();
void record_check(const Chapter& chapter, const std::vector<StateRow>& rows, const std::string& fingerprint,
                  int64_t time);
// What the last checks found, built and run nothing; false when a row is stale or was never checked.
bool print_kept_states(const Chapter& chapter, const nlohmann::json& checks);
// Each line of revisions_since_done (revisions.hpp), indented under a chapter's table.
void print_revisions(const std::vector<std::string>& lines);

}  // namespace workbook::cli
