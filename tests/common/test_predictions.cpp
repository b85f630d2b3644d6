// test_predictions.cpp — predictions.txt read strictly, and each prediction
// matched to the summary line that holds its measurement.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "catch2_compat.hpp"
#include "predictions.hpp"
#include "workbook/errors.hpp"

using Catch::Matchers::ContainsSubstring;
using workbook::cli::Prediction;

namespace {

std::vector<Prediction> asked() {
  return {{"busbw_4k", "busbw at 4 KiB", "x", 0, {{"type", "bench_bandwidth"}, {"size", 4096}}, "vs_library"},
          {"overlap_ms", "overlap's step", "ms", 1, {{"type", "bench_row"}, {"variant", "overlap"}, {"ranks", 2}}, "ms"}};
}

std::filesystem::path write(const std::string& text) {
  const auto file = std::filesystem::temp_directory_path() / "workbook-test-predictions.txt";
  std::ofstream(file) << text;
  return file;
}

}  // namespace

TEST_CASE("predictions.txt: numbers read, empty ones not yet predicted, mistakes named by line", "[predictions]") {
  auto read = [](const std::string& text) { return workbook::cli::read_predictions(write(text), asked(), "ch04"); };
  const auto p = read("# a comment\nbusbw_4k = 0.8   # ratio\noverlap_ms =\n\n");
  REQUIRE(p.size() == 1);
  REQUIRE(p.at("busbw_4k") == 0.8);
  REQUIRE(workbook::cli::read_predictions("/nonexistent/predictions.txt", asked(), "ch04").empty());
  REQUIRE_THROWS_WITH(read("busbw_4k = fast\n"), ContainsSubstring(":1:") && ContainsSubstring("not a number"));
  REQUIRE_THROWS_WITH(read("\nbusbw_4k = 3 ms\n"), ContainsSubstring(":2:") && ContainsSubstring("id = number"));
  REQUIRE_THROWS_WITH(read("busbw = 3\n"), ContainsSubstring("no prediction called 'busbw'"));
}

TEST_CASE("a prediction's measurement: the first summary line of its part that matches", "[predictions]") {
  const std::vector<nlohmann::json> lines = {
      {{"type", "bench_bandwidth"}, {"part", 0}, {"size", 1024}, {"vs_library", 0.5}},
      {{"type", "bench_bandwidth"}, {"part", 0}, {"size", 4096}, {"vs_library", 0.75}},
      {{"type", "bench_row"}, {"part", 0}, {"variant", "overlap"}, {"ranks", "2"}, {"ms", 99.0}},  // another part
      {{"type", "bench_row"}, {"part", 1}, {"variant", "overlap"}, {"ranks", "2"}, {"ms", 41.0}}};  // keys as text
  REQUIRE(workbook::cli::measured_value(asked()[0], lines) == 0.75);
  REQUIRE(workbook::cli::measured_value(asked()[1], lines) == 41.0);
  REQUIRE(std::isnan(workbook::cli::measured_value(asked()[0], {lines[0]})));
}
