// catch2_session.cpp — Catch2's implementation (Catch2 2) and the one
// function through which both runners start a session. Note [Catch2 compiled
// once] in catch2_compat.hpp.
#define CATCH_CONFIG_RUNNER
#include "catch2_compat.hpp"

namespace catch2_compat {

int run_session(int argc, char** argv, const std::string& report_file) {
  Catch::Session session;
  if (const int parse = session.applyCommandLine(argc, argv); parse != 0) return parse;
#if WORKBOOK_CATCH2_MAJOR >= 3
  // A filter that selects nothing (a chapter without [np3] tests, say) is no failure, as in Catch2 2.
  session.configData().allowZeroTests = true;
  if (!report_file.empty()) session.configData().defaultOutputFilename = report_file;
#else
  if (!report_file.empty()) session.configData().outputFilename = report_file;
#endif
  return session.run();
}

}  // namespace catch2_compat
