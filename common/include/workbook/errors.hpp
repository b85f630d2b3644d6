// errors.hpp — the three kinds of failure: a user's mistake (UserError, WB_CHECK),
// a broken invariant (WB_ASSERT), and an exercise not written yet (NotImplemented).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "workbook/exit_status.hpp"

namespace workbook {

// A mistake the user can fix: missing data, a corrupt file, a wrong flag.
// Programs catch it in main(), print its message once, and exit with status 2.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bug in the workbook (or in an exercise's answer): an invariant that failed.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Thrown by every skeleton exercise until the learner replaces it with code.
// The message names the exercise, the file and line, and the next step.
class NotImplemented : public std::logic_error {
 public:
  NotImplemented(const std::string& exercise, const char* file, int line);
  const std::string& exercise() const { return exercise_; }

 private:
  std::string exercise_;
};

// The one message a program prints for an exception that ended it, on
// stderr: failure_prefix(kind) + context + what(), e.g. "error: rank 1 of 2:
// --batch 101 ...". Returns the kind, whose exit code the program then
// returns (exit_status.hpp): every entry point ends through this one ladder.
ExitStatus report_failure(const std::exception& error, std::string_view context = "");

// A path inside the repository, shown relative to its root
// ("chapters/01_single_device/batches.cpp"); other paths unchanged.
std::string relative_to_source(const std::string& path);

}  // namespace workbook

// WB_CHECK(condition, "format {}", args...): a user error when condition is false.
#define WB_CHECK(condition, ...)                                       \
  do {                                                                 \
    if (!(condition)) throw ::workbook::UserError(fmt::format(__VA_ARGS__)); \
  } while (0)

// WB_ASSERT(condition, "format {}", args...): an internal error when false.
#define WB_ASSERT(condition, ...)                                                 \
  do {                                                                            \
    if (!(condition))                                                             \
      throw ::workbook::InternalError(fmt::format("{}:{}: assertion `{}` failed: {}", \
                                                  __FILE__, __LINE__, #condition, \
                                                  fmt::format(__VA_ARGS__)));     \
  } while (0)

// What a skeleton has where the learner's code goes.
#define WB_NOT_IMPLEMENTED(exercise) throw ::workbook::NotImplemented(exercise, __FILE__, __LINE__)
