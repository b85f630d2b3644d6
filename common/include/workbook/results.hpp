// results.hpp — what a run reports: JSON lines for machines, fixed-column
// tables for people (as nccl-tests prints them).
#pragma once
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace workbook {

// Appends one JSON object per line to a file ("-" is stdout). The last line a
// run writes is its result: {"type": "result", "chapter", "device", "ranks",
// "epochs", "test_accuracy" (a classifier's), "samples_per_s", "epoch_s", "peak_mem_bytes", ...}.
class JsonLines {
 public:
  JsonLines() = default;  // writes nothing until open()
  explicit JsonLines(const std::optional<std::filesystem::path>& file) { open(file); }
  void open(const std::optional<std::filesystem::path>& file);  // no file: writes nothing
  ~JsonLines();
  JsonLines(const JsonLines&) = delete;
  JsonLines& operator=(const JsonLines&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* out_ = nullptr;
  bool owned_ = false;
};

// A table with fixed-width columns, right-aligned numbers, printed row by row.
struct Column {
  std::string title;
  int width;
  bool left_aligned = false;  // for text: host names, paths
};
class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  std::string header() const;
  std::string row(const std::vector<std::string>& cells) const;

 private:
  static std::string cell(const Column& column, const std::string& text);
  std::vector<Column> columns_;
};

}  // namespace workbook
