// errors.cpp — the message a learner sees for an exercise not written yet,
// and the one message of a program that failed.
#include "workbook/errors.hpp"

#include <cstdio>
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

ExitStatus report_failure(const std::exception& error, std::string_view context) {
  ExitStatus kind = ExitStatus::InternalError;
  if (dynamic_cast<const UserError*>(&error) != nullptr) kind = ExitStatus::UserError;
  if (dynamic_cast<const NotImplemented*>(&error) != nullptr) kind = ExitStatus::NotImplemented;
  fmt::print(stderr, "{}{}{}\n", failure_prefix(kind), context, error.what());
  return kind;
}

}  // namespace workbook
