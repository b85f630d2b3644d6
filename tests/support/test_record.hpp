// test_record.hpp — the JSON a test runner writes for each test case and its
// first failed assertion ($WORKBOOK_RESULTS), shared by the single-process
// runner (catch_main.cpp) and the multi-process one (mpi_main.cpp).
#pragma once
#include "catch2_compat.hpp"
#include <nlohmann/json.hpp>

namespace test_record {

// What a LibTorch error says, without the backtrace it carries after its
// message (40 lines of frames that bury the message).
inline std::string without_backtrace(std::string message) {
  return message.substr(0, message.find("\nException raised from"));
}

// {"name", "tags", "file", "line", "passed": true}, before the test runs.
inline nlohmann::json start(const Catch::TestCaseInfo& info) {
  return {{"name", info.name}, {"tags", catch2_compat::tags(info)}, {"file", info.lineInfo.file},
          {"line", info.lineInfo.line}, {"passed", true}};
}

// A failed assertion: where, the expression with its values, the message
// (without LibTorch's backtrace, which is noise here) and the INFO messages.
inline nlohmann::json failure(const Catch::AssertionStats& stats) {
  const Catch::AssertionResult& result = stats.assertionResult;
  std::string messages;
  nlohmann::json each = nlohmann::json::array();  // one entry an INFO or CAPTURE, whatever lines it spans
  for (const auto& info : stats.infoMessages) {
    messages += info.message + "\n";
    each.push_back(info.message);
  }
  std::string message(result.getMessage());  // a StringRef in Catch2 3
  message = without_backtrace(message);
  return {{"file", result.getSourceInfo().file},
          {"line", result.getSourceInfo().line},
          {"macro", std::string(result.getTestMacroName())},
          {"expression", result.hasExpression() ? result.getExpressionInMacro() : ""},
          {"expanded", result.hasExpression() ? result.getExpandedExpression() : ""},
          {"message", message},
          {"info", messages},
          {"infos", each}};
}

}  // namespace test_record

// An exception a test did not expect is reported by its message only, in
// Catch2's report as in the record. (Included by one runner per binary.)
CATCH_TRANSLATE_EXCEPTION(const std::exception& error) { return test_record::without_backtrace(error.what()); }
