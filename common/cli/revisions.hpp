// revisions.hpp — telling a learner that an exercise they finished has changed.
//
// Note: [learners mid-course] An exercise keeps its id when it is redesigned,
// and its skeleton may change under a learner who has already finished it: a
// function that was given becomes theirs, or a given one stops doing part of
// the work. Their file, merged by git or left as it was, may then no longer
// fit. The manifest records each such change (chapter.json: an exercise's
// "revised": [{"on": DATE, "what": ...}]), and `workbook list` and `workbook
// check` say so to every learner whose last kept check (the state file's
// "checks", Note [what `workbook list` shows]) found the exercise done
// before that date. A check on the day of a revision counts as after it.
#pragma once
#include <ctime>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace workbook::cli {

// A time in seconds since the epoch, in local time as the learner saw it,
// formatted by strftime's `format` (learner_states.cpp's times too).
inline std::string format_local_time(int64_t seconds, const char* format) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  char text[32];
  std::strftime(text, sizeof text, format, std::localtime(&t));
  return text;
}

// The day of a check's time ("2026-11-30").
inline std::string day_of(int64_t seconds) { return format_local_time(seconds, "%Y-%m-%d"); }

// One line per revision made after the kept check that found its exercise
// done; `kept` is the state file's record of the chapter (exN.M -> {state,
// time, ...}). With `only_exercise`, that exercise's lines alone.
inline std::vector<std::string> revisions_since_done(const Chapter& chapter, const nlohmann::json& kept,
                                                     const std::string& only_exercise = "") {
  std::vector<std::string> lines;
  if (!kept.is_object()) return lines;
  for (const Exercise& e : chapter.exercises) {
    if (!only_exercise.empty() && e.id != only_exercise) continue;
    if (e.revised.empty() || !kept.contains(e.id)) continue;
    const nlohmann::json& entry = kept.at(e.id);
    if (!entry.is_object() || entry.value("state", "") != "done" || !entry.value("time", nlohmann::json()).is_number_integer())
      continue;
    const std::string checked = day_of(entry.at("time").get<int64_t>());
    for (const Revision& r : e.revised)
      if (checked < r.on)
        lines.push_back(fmt::format("{} changed on {}, after your check of {} found it done: {} Check it again: "
                                    "`workbook check {}`.",
                                    e.id, r.on, checked, r.what, e.id));
  }
  return lines;
}

}  // namespace workbook::cli
