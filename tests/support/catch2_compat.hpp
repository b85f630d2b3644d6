// catch2_compat.hpp — Catch2 2 (Debian 12's 2.13) and Catch2 3 (Debian 13's 3.7)
// behind one include. Every test file includes this, never Catch2's own header;
// what differs between the two versions is here and nowhere else.
//
// CMake defines WORKBOOK_CATCH2_MAJOR (2 or 3). The two runners (catch_main.cpp,
// mpi_main.cpp) define CATCH_CONFIG_EXTERNAL_INTERFACES before this include:
// Catch2 2 declares a listener's types only then (Catch2 3 always does).
//
// Note: [Catch2 compiled once] Catch2 2 is one header whose implementation
// is compiled in the file that defines CATCH_CONFIG_RUNNER, and only there
// is its Session declared. Each runner once defined it, so the build compiled
// Catch2 twice, at -O3: the two runners took 64 s and 40 s in ninja's log of
// a whole -O3 build. Now catch2_session.cpp alone holds the implementation,
// at -O0 (a runner's speed is not what a test measures), and the runners
// start a session through run_session() below: 15, 8 and 14 s in the next
// whole -O3 build (2-core EPYC, 2026-11-29).
#pragma once
#include <string>
#include <vector>

namespace catch2_compat {
// Runs Catch2 on the command line, as Catch::Session does; a filter that
// selects nothing is no failure. The default reporter writes to report_file
// ("": standard output). Returns Catch2's exit status.
int run_session(int argc, char** argv, const std::string& report_file = "");
}  // namespace catch2_compat

#if WORKBOOK_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>

using Catch::Approx;  // global in Catch2 2

namespace catch2_compat {
using ListenerConfig = const Catch::IConfig*;  // what a listener's constructor takes
// A listener's base: it overrides assertion_ended(), which Catch2 3's
// assertionEnded (void) and Catch2 2's (bool: "keep going") both call.
class ListenerBase : public Catch::EventListenerBase {  // TestEventListenerBase in Catch2 2
 public:
  explicit ListenerBase(ListenerConfig config) : Catch::EventListenerBase(config) {}
  virtual void assertion_ended(const Catch::AssertionStats&) {}
  void assertionEnded(const Catch::AssertionStats& stats) final { assertion_ended(stats); }
};
inline std::vector<std::string> tags(const Catch::TestCaseInfo& info) {
  std::vector<std::string> names;
  for (const Catch::Tag& tag : info.tags) names.emplace_back(tag.original.data(), tag.original.size());
  return names;
}
}  // namespace catch2_compat

#else
#include <catch2/catch.hpp>

namespace Catch::Matchers {
// Catch2 3's name for the substring matcher (Contains in Catch2 2, where Catch2 3's Contains is for ranges).
inline StdString::ContainsMatcher ContainsSubstring(const std::string& text,
                                                    CaseSensitive::Choice sensitivity = CaseSensitive::Yes) {
  return Contains(text, sensitivity);
}
}  // namespace Catch::Matchers

namespace catch2_compat {
inline std::vector<std::string> tags(const Catch::TestCaseInfo& info) { return info.tags; }
#ifdef CATCH_CONFIG_EXTERNAL_INTERFACES  // Catch2 2 declares a listener's types only then
using ListenerConfig = const Catch::ReporterConfig&;
class ListenerBase : public Catch::TestEventListenerBase {  // the same as Catch2 3's above
 public:
  explicit ListenerBase(ListenerConfig config) : Catch::TestEventListenerBase(config) {}
  virtual void assertion_ended(const Catch::AssertionStats&) {}
  bool assertionEnded(const Catch::AssertionStats& stats) final {
    assertion_ended(stats);
    return true;
  }
};
#endif
}  // namespace catch2_compat
#endif
