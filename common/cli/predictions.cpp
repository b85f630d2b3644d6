// predictions.cpp — predictions.txt read, matched to a run's summary lines,
// and printed through the one table printer.
#include "predictions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <regex>

#include "table.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

// A field of a summary line against a value of `where`: equal as JSON, or as
// text (a rows part's keys are strings: "2" matches 2).
bool same(const nlohmann::json& field, const nlohmann::json& wanted) {
  if (field == wanted) return true;
  auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  return field.is_primitive() && wanted.is_primitive() && text(field) == text(wanted);
}

std::string number(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::abs(v);
  return a == 0 ? "0" : a >= 100 ? fmt::format("{:.1f}", v) : fmt::format("{:.3g}", v);
}

}  // namespace

std::map<std::string, double> read_predictions(const fs::path& file, const std::vector<Prediction>& asked,
                                               const std::string& chapter_id) {
  std::map<std::string, double> predicted;
  std::ifstream in(file);
  if (!in) return predicted;  // none written: every prediction is "not yet"
  static const std::regex line_re(R"(^\s*([A-Za-z0-9_.]+)\s*=\s*(\S*)\s*$)");
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_re))
      throw UserError(fmt::format("{}:{}: '{}' is not `id = number`", file.string(), number, line));
    const std::string id = m[1].str(), value = m[2].str();
    const bool known = std::any_of(asked.begin(), asked.end(), [&](const Prediction& p) { return p.id == id; });
    if (!known)
      throw UserError(fmt::format("{}:{}: {} asks for no prediction called '{}'", file.string(), number, chapter_id, id));
    if (value.empty()) continue;  // not predicted yet
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || !std::isfinite(v))
      throw UserError(fmt::format("{}:{}: '{}' is not a number (write 0.5, 12, 3e-4; no units)", file.string(), number,
                                  value));
    predicted[id] = v;
  }
  return predicted;
}

double measured_value(const Prediction& prediction, const std::vector<nlohmann::json>& lines) {
  for (const nlohmann::json& line : lines) {
    if (prediction.part && line.value("part", -1) != *prediction.part) continue;
    bool match = true;
    for (const auto& [key, wanted] : prediction.where.items())
      if (!line.contains(key) || !same(line.at(key), wanted)) {
        match = false;
        break;
      }
    if (match && line.contains(prediction.value) && line.at(prediction.value).is_number())
      return line.at(prediction.value).get<double>();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void print_predictions(const std::vector<Prediction>& asked, const std::map<std::string, double>& predicted,
                       const std::vector<nlohmann::json>& lines, const std::string& file) {
  if (asked.empty()) return;
  size_t id_width = 10;
  for (const Prediction& p : asked) id_width = std::max(id_width, p.id.size() + 1);
  const std::vector<Column> columns = {{{"prediction"}, static_cast<int>(id_width), /*left=*/true},
                                       {{"unit"}, 6},
                                       {{"predicted"}, 10},
                                       {{"measured"}, 10},
                                       {{"measured/predicted"}, 19}};
  fmt::print("\nPredict, then measure: your predictions ({}) beside this run's measurements\n\n", file);
  print_heading(columns);
  std::vector<const Prediction*> missing;
  for (const Prediction& p : asked) {
    const auto it = predicted.find(p.id);
    const double guess = it != predicted.end() ? it->second : std::nan("");
    const double measured = measured_value(p, lines);
    if (it == predicted.end()) missing.push_back(&p);
    const bool ratio = std::isfinite(guess) && guess != 0 && std::isfinite(measured);
    print_row(columns, {p.id, p.unit, it != predicted.end() ? number(guess) : "(none)", number(measured),
                        ratio ? fmt::format("{:.2f}", measured / guess) : "-"},
              std::isfinite(measured) ? "" : "  (this run did not measure it)");
  }
  if (!missing.empty()) {
    fmt::print("\nNot predicted yet: write each as `id = number` in {} before the next run:\n", file);
    for (const Prediction* p : missing) fmt::print("  {}: {} ({})\n", p->id, p->ask, p->unit);
  }
  fmt::print("\nThe lesson's questions ask you to explain each difference.\n");
}

}  // namespace workbook::cli
