// table.cpp — the one table printer (table.hpp).
#include "table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace workbook::cli {
namespace {

std::string aligned(const std::string& text, const Column& column) {
  return column.left ? fmt::format("{:<{}}", text, column.width) : fmt::format("{:>{}}", text, column.width);
}

// The gap before the first column is never printed: a table starts at the margin.
const std::string& gap_before(const std::vector<Column>& columns, size_t i) {
  static const std::string none;
  return i == 0 ? none : columns[i].gap;
}

}  // namespace

void print_heading(const std::vector<Column>& columns) {
  size_t lines = 0;
  for (const Column& c : columns) lines = std::max(lines, c.heading.size());
  for (size_t line = 0; line < lines; ++line) {
    std::string text;
    for (size_t i = 0; i < columns.size(); ++i) {
      const Column& c = columns[i];
      if (line == 0 && !c.group.empty()) {
        // The group's title spans its columns and the gaps between them.
        size_t end = i + 1, span = static_cast<size_t>(c.width);
        for (; end < columns.size() && columns[end].group == c.group; ++end)
          span += columns[end].gap.size() + static_cast<size_t>(columns[end].width);
        text += gap_before(columns, i) + fmt::format("{:^{}}", c.group, span);
        i = end - 1;
        continue;
      }
      text += gap_before(columns, i) + aligned(line < c.heading.size() ? c.heading[line] : "", c);
    }
    fmt::print("{}\n", text);
  }
}

void print_row(const std::vector<Column>& columns, const std::vector<std::string>& cells, const std::string& after) {
  std::string text;
  for (size_t i = 0; i < cells.size() && i < columns.size(); ++i)
    text += gap_before(columns, i) + aligned(cells[i], columns[i]);
  fmt::print("{}{}\n", text, after);
}

std::string format_mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }

std::string format_bytes(double bytes) {
  const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  for (; unit + 1 < std::size(units) && bytes >= 1024.0; ++unit) bytes /= 1024.0;
  return bytes == std::floor(bytes) ? fmt::format("{:.0f} {}", bytes, units[unit])
                                    : fmt::format("{:.1f} {}", bytes, units[unit]);
}

}  // namespace workbook::cli
