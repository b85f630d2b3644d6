// errors.cpp — the message a learner sees for an exercise not written yet.
#include "workbook/errors.hpp"

#include <string_view>

#include "workbook/config.hpp"

namespace workbook {

std::string relative_to_source(const std::string& path) {
  const std::string_view root = config::source_dir;
  if (path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/')
    return path.substr(root.size() + 1);
  return path;
}

NotImplemented::NotImplemented(const std::string& exercise, const char* file, int line)
    : std::logic_error(fmt::format(
          "{} is not implemented yet: replace the WB_NOT_IMPLEMENTED(\"{}\") at {}:{} with your code "
          "(the lesson explains it; `workbook hint {}` gives a hint)",
          exercise, exercise, relative_to_source(file), line, exercise)),
      exercise_(exercise) {}

}  // namespace workbook
