// Tests for revisions.hpp: a learner who found an exercise done before it was
// revised is told so, and only that learner (Note [learners mid-course]).
#include "catch2_compat.hpp"

#include "revisions.hpp"

namespace {

using workbook::cli::Chapter;

Chapter chapter_with_a_revision() {
  Chapter chapter;
  chapter.id = "ch07";
  chapter.exercises.push_back({"ex7.2", "stage 1", "stage1.cpp"});
  chapter.exercises.push_back({"ex7.3", "stage 2", "stage2.cpp", {{"2026-11-30", "reduce_bucket changed."}}});
  return chapter;
}

// Noon, local time, on `day` of November 2026.
int64_t noon_on(int day) {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 10;
  t.tm_mday = day;
  t.tm_hour = 12;
  t.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&t));
}

nlohmann::json kept(const std::string& exercise, const std::string& state, int64_t time) {
  return {{exercise, {{"state", state}, {"passed", 3}, {"total", 3}, {"time", time}, {"files", "0"}}}};
}

}  // namespace

TEST_CASE("a revision after the check that found the exercise done is reported", "[revisions]") {
  const auto lines = workbook::cli::revisions_since_done(chapter_with_a_revision(), kept("ex7.3", "done", noon_on(2)));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "ex7.3 changed on 2026-11-30, after your check of 2026-11-02 found it done: reduce_bucket changed. "
        "Check it again: `workbook check ex7.3`.");
}

TEST_CASE("no report for a check on or after the revision's day, an unfinished exercise, or none kept", "[revisions]") {
  const Chapter chapter = chapter_with_a_revision();
  CHECK(workbook::cli::revisions_since_done(chapter, kept("ex7.3", "done", noon_on(30))).empty());
  CHECK(workbook::cli::revisions_since_done(chapter, kept("ex7.3", "failing", noon_on(2))).empty());
  CHECK(workbook::cli::revisions_since_done(chapter, kept("ex7.2", "done", noon_on(2))).empty());
  CHECK(workbook::cli::revisions_since_done(chapter, nlohmann::json::object()).empty());
  CHECK(workbook::cli::revisions_since_done(chapter, nlohmann::json()).empty());
  nlohmann::json damaged = kept("ex7.3", "done", noon_on(2));
  damaged["ex7.3"]["time"] = "yesterday";
  CHECK(workbook::cli::revisions_since_done(chapter, damaged).empty());
}

TEST_CASE("`workbook check exN.M` hears of that exercise's revisions alone", "[revisions]") {
  const auto chapter = chapter_with_a_revision();
  CHECK(workbook::cli::revisions_since_done(chapter, kept("ex7.3", "done", noon_on(2)), "ex7.3").size() == 1);
  CHECK(workbook::cli::revisions_since_done(chapter, kept("ex7.3", "done", noon_on(2)), "ex7.2").empty());
}
