// errors.cpp — the message a learner sees for an exercise not written yet.
#include "workbook/errors.hpp"

#include <string_view>

#include "workbook/config.hpp"

namespace workbook {
namespace {
// Paths relative to the repository read better: chapters/01_single_device/x.cpp:12.
std::string relative_to_source(std::string_view path) {
  std::string_view root = config::source_dir;
  if (path.substr(0, root.size()) == root && path.size() > root.size() + 1) path.remove_prefix(root.size() + 1);
  return std::string(path);
}
}  // namespace

NotImplemented::NotImplemented(const std::string& exercise, const char* file, int line)
    : std::logic_error(fmt::format(
          "{} is not implemented yet: replace the WB_NOT_IMPLEMENTED(\"{}\") at {}:{} with your code "
          "(the lesson explains it; `workbook hint {}` gives a hint)",
          exercise, exercise, relative_to_source(file), line, exercise)),
      exercise_(exercise) {}

}  // namespace workbook
