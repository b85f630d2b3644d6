// results.cpp — JSON lines and fixed-column tables.
#include "workbook/results.hpp"

#include <fmt/format.h>

#include "workbook/errors.hpp"

namespace workbook {

void JsonLines::open(const std::optional<std::filesystem::path>& file) {
  WB_ASSERT(out_ == nullptr, "JsonLines opened twice");
  if (!file) return;
  if (file->string() == "-") {
    out_ = stdout;
    return;
  }
  out_ = std::fopen(file->c_str(), "w");
  WB_CHECK(out_ != nullptr, "--json {}: cannot open for writing", file->string());
  owned_ = true;
}

JsonLines::~JsonLines() {
  if (owned_) std::fclose(out_);
}

void JsonLines::write(const nlohmann::json& record) {
  if (out_ == nullptr) return;
  std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);  // a crash later must not lose the lines already written
}

std::string Table::cell(const Column& column, const std::string& text) {
  return column.left_aligned ? fmt::format(" {:<{}}", text, column.width) : fmt::format("{:>{}}", text, column.width + 1);
}

std::string Table::header() const {
  std::string line;
  for (const Column& c : columns_) line += cell(c, c.title);
  return line;
}

std::string Table::row(const std::vector<std::string>& cells) const {
  WB_ASSERT(cells.size() == columns_.size(), "{} cells for {} columns", cells.size(), columns_.size());
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += cell(columns_[i], cells[i]);
  return line;
}

}  // namespace workbook
