// catch_main.cpp — the Catch2 runner every test binary shares.
//
// Besides Catch2's own report, it writes one JSON record per test case to the
// file named by $WORKBOOK_RESULTS (when set): name, tags, passed, and the first
// failed assertion (file, line, expression with values, message). The
// `workbook` CLI reads it to tell a learner which exercise is not started,
// failing or done, and to show the first failure.
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // a listener's types (catch2_compat.hpp)
#include "catch2_compat.hpp"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_record.hpp"
#include "workbook/allocator.hpp"
#include "workbook/device.hpp"

namespace {

class ResultsListener : public catch2_compat::ListenerBase {
 public:
  using catch2_compat::ListenerBase::ListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override { current_ = test_record::start(info); }

  void assertion_ended(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk() && !current_.contains("failure")) current_["failure"] = test_record::failure(stats);
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    current_["passed"] = stats.totals.assertions.failed == 0;
    records_.push_back(current_);
  }

  void testRunEnded(const Catch::TestRunStats&) override {
    const char* path = std::getenv("WORKBOOK_RESULTS");
    if (path == nullptr || *path == '\0') return;
    std::ofstream out(path);
    out << records_.dump(1) << "\n";
  }

 private:
  nlohmann::json current_;
  nlohmann::json records_ = nlohmann::json::array();
};

}  // namespace

CATCH_REGISTER_LISTENER(ResultsListener)

int main(int argc, char** argv) {
  // LibTorch may start with one intra-op thread: use the cores we may run on.
  workbook::tune_cpu_allocator();
  workbook::set_threads(workbook::available_cores());
  return catch2_compat::run_session(argc, argv);
}
