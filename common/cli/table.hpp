// table.hpp — the one way the CLI prints a table of numbers: its columns are
// described once, and the heading and every row are printed through them, as
// nccl-tests prints all its tables through one printer.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace workbook::cli {

struct Column {
  Column(std::vector<std::string> heading, int width, bool left = false, std::string gap = " ", std::string group = "")
      : heading(std::move(heading)), width(width), left(left), gap(std::move(gap)), group(std::move(group)) {}
  std::vector<std::string> heading;  // its text on each heading line, the top one first
  int width;                         // a longer text widens its cell, never gets cut
  bool left;                         // left-aligned (names); otherwise right-aligned (numbers)
  std::string gap;                   // what separates it from the column before: " ", or " | " between groups
  // On the top heading line, consecutive columns of one group share a title,
  // centered over them (nccl-tests' "out-of-place" over time, algbw, busbw).
  std::string group;
};

// The heading lines: as many as the longest heading has.
void print_heading(const std::vector<Column>& columns);

// One line: the cells in the first cells.size() columns, then `after` as it
// is (a failed row's reason, the formula of a number).
void print_row(const std::vector<Column>& columns, const std::vector<std::string>& cells,
               const std::string& after = "");

std::string format_mib(double bytes);  // "12.3 MiB"
std::string format_bytes(double bytes);  // in the largest binary unit it reaches: "512 B", "64 KiB", "1.5 MiB"

}  // namespace workbook::cli
