// predictions.hpp — predict, then measure: the numbers a student writes in a
// chapter's predictions.txt before `workbook bench` or `workbook model` runs,
// printed beside what the run measured.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace workbook::cli {

// The student's predictions: `id = number` lines of the chapter's
// predictions.txt (`#` starts a comment; `id =` with nothing after is not
// predicted yet). A malformed line, an unknown id or a number that is not
// one is a UserError naming the file and line: read before anything runs.
// `file` is chapter.predictions_file(); missing: nothing predicted yet.
std::map<std::string, double> read_predictions(const fs::path& file, const std::vector<Prediction>& asked,
                                               const std::string& chapter_id);

// The measurement of `prediction` among a run's summary lines: its `value`
// field in the first line that matches `where` (and its part); none: NaN.
double measured_value(const Prediction& prediction, const std::vector<nlohmann::json>& lines);

// The table: each prediction, its measurement and their ratio; then which are
// not predicted yet, with their questions. Nothing when the chapter has none.
// `file` is the predictions file as the student is told of it.
void print_predictions(const std::vector<Prediction>& asked, const std::map<std::string, double>& predicted,
                       const std::vector<nlohmann::json>& lines, const std::string& file);

}  // namespace workbook::cli
