// exit_status.hpp — how a workbook program ends, and how whoever ran it tells
// the three kinds of failure apart (errors.hpp names them).
//
// Note: [failures by exit status] A program's exit status says what kind of
// failure it was; its one message on stderr says what happened. Whoever ran
// it (the `workbook` CLI, the tests) classifies by the status, never by
// matching text: "internal error: " contains "error: ", and a message may
// quote anything. mpirun ends with the status of the first rank that failed,
// so the same holds for a distributed job.
#pragma once
#include <string_view>

namespace workbook {

enum class ExitStatus : int {
  Ok = 0,
  InternalError = 1,   // a broken invariant (WB_ASSERT), an exception nobody expected, or a crash
  UserError = 2,       // a mistake the user can fix (UserError, WB_CHECK, a bad flag)
  NotImplemented = 3,  // a skeleton exercise not written yet (WB_NOT_IMPLEMENTED)
};

constexpr int exit_code(ExitStatus status) { return static_cast<int>(status); }

// What a program's one failure message on stderr begins with.
constexpr std::string_view failure_prefix(ExitStatus status) {
  switch (status) {
    case ExitStatus::UserError: return "error: ";
    case ExitStatus::NotImplemented: return "not done yet: ";
    case ExitStatus::InternalError: return "internal error: ";
    case ExitStatus::Ok: break;
  }
  return "";
}

// The kind of failure an exit code stands for. Any code that is not one of
// ours (a signal, an abort, mpirun's own trouble) counts as internal.
constexpr ExitStatus exit_status_from_code(int code) {
  switch (code) {
    case 0: return ExitStatus::Ok;
    case 2: return ExitStatus::UserError;
    case 3: return ExitStatus::NotImplemented;
    default: return ExitStatus::InternalError;
  }
}

}  // namespace workbook
