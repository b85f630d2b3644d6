// skeleton.cpp — generating chapters/ from solutions/.
#include "skeleton.hpp"

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace workbook::skeleton {

Skeleton make_skeleton(const std::string& solution_text, const std::string& file_name) {
  static const std::regex begin_re(R"(^(\s*)// BEGIN SOLUTION(?:\s+(\S+))?\s*$)");
  static const std::regex end_re(R"(^\s*// END SOLUTION\s*$)");
  static const std::regex exercise_re(R"(ex\d+\.\d+)");
  // Note: [solution notes] A header's or lesson-facing comment that says how
  // an exercise is done (a schedule's indices, an update rule) stays in the
  // solution and is cut from the skeleton, with nothing in its place.
  static const std::regex note_begin_re(R"(^\s*// BEGIN SOLUTION NOTE(?:\s+(\S+))?\s*$)");
  static const std::regex note_end_re(R"(^\s*// END SOLUTION NOTE\s*$)");
  Skeleton out;
  int note_open = 0;  // the line of an open SOLUTION NOTE, or 0
  std::istringstream in(solution_text);
  std::string line;
  int number = 0;
  bool inside = false;
  Region open{};
  while (std::getline(in, line)) {
    ++number;
    std::smatch m;
    if (std::regex_match(line, m, note_begin_re)) {
      if (inside || note_open)
        throw RegionError(fmt::format("{}:{}: BEGIN SOLUTION NOTE inside a region opened at line {}", file_name,
                                      number, inside ? open.begin_line : note_open));
      if (!std::regex_match(m[1].str(), exercise_re))
        throw RegionError(fmt::format("{}:{}: BEGIN SOLUTION NOTE needs an exercise id like ex1.2, got '{}'",
                                      file_name, number, m[1].str()));
      note_open = number;
    } else if (std::regex_match(line, note_end_re)) {
      if (!note_open)
        throw RegionError(fmt::format("{}:{}: END SOLUTION NOTE without BEGIN SOLUTION NOTE", file_name, number));
      note_open = 0;
    } else if (note_open) {
      // cut from the skeleton
    } else if (std::regex_match(line, m, begin_re)) {
      if (inside)
        throw RegionError(fmt::format("{}:{}: BEGIN SOLUTION inside the region opened at line {}", file_name, number,
                                      open.begin_line));
      const std::string exercise = m[2].str();
      if (!std::regex_match(exercise, exercise_re))
        throw RegionError(fmt::format("{}:{}: BEGIN SOLUTION needs an exercise id like ex1.2, got '{}'", file_name,
                                      number, exercise));
      inside = true;
      open = {exercise, number, 0};
      out.text += fmt::format("{}WB_NOT_IMPLEMENTED(\"{}\");  // TODO({}): your code here\n", m[1].str(), exercise,
                              exercise);
    } else if (std::regex_match(line, end_re)) {
      if (!inside) throw RegionError(fmt::format("{}:{}: END SOLUTION without BEGIN SOLUTION", file_name, number));
      inside = false;
      open.end_line = number;
      out.regions.push_back(open);
    } else if (!inside) {
      out.text += line + "\n";
    }
  }
  if (note_open)
    throw RegionError(fmt::format("{}:{}: BEGIN SOLUTION NOTE is never closed", file_name, note_open));
  if (inside)
    throw RegionError(fmt::format("{}:{}: BEGIN SOLUTION {} is never closed", file_name, open.begin_line,
                                  open.exercise));
  if (!out.regions.empty() && solution_text.find("#include \"workbook/errors.hpp\"") == std::string::npos)
    throw RegionError(fmt::format("{}: has solution regions but does not include \"workbook/errors.hpp\" "
                                  "(the skeleton's WB_NOT_IMPLEMENTED needs it)",
                                  file_name));
  return out;
}

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool is_code(const fs::path& path) {
  static const std::set<std::string> extensions = {".cpp", ".hpp", ".h", ".cu", ".cuh"};
  return extensions.count(path.extension().string()) > 0;
}

}  // namespace

std::vector<FileStatus> scan(const fs::path& source_dir) {
  std::vector<FileStatus> files;
  const fs::path solutions = source_dir / "solutions";
  if (!fs::exists(solutions)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(solutions)) {
    if (!entry.is_regular_file()) continue;
    const fs::path relative = fs::relative(entry.path(), solutions);
    FileStatus status;
    status.solution = entry.path();
    status.skeleton = source_dir / "chapters" / relative;
    Skeleton skeleton = make_skeleton(read_text(entry.path()), fs::relative(entry.path(), source_dir).string());
    status.regions = skeleton.regions;
    status.expected = skeleton.text;
    status.up_to_date = fs::exists(status.skeleton) && read_text(status.skeleton) == status.expected;
    files.push_back(std::move(status));
  }
  std::sort(files.begin(), files.end(), [](const FileStatus& a, const FileStatus& b) { return a.solution < b.solution; });
  return files;
}

std::vector<fs::path> orphans(const fs::path& source_dir) {
  std::vector<fs::path> found;
  const fs::path chapters = source_dir / "chapters";
  if (!fs::exists(chapters)) return found;
  for (const auto& entry : fs::recursive_directory_iterator(chapters)) {
    if (!entry.is_regular_file() || !is_code(entry.path())) continue;
    const fs::path relative = fs::relative(entry.path(), chapters);
    if (!fs::exists(source_dir / "solutions" / relative)) found.push_back(entry.path());
  }
  return found;
}

}  // namespace workbook::skeleton
