// catch2_compat.hpp — Catch2 2 (Debian 12's 2.13) and Catch2 3 (Debian 13's 3.7)
// behind one include. Every test file includes this, never Catch2's own header;
// what differs between the two versions is here and nowhere else.
//
// CMake defines WORKBOOK_CATCH2_MAJOR (2 or 3). In Catch2 2, a file that
// defines CATCH_CONFIG_RUNNER before this include holds the runner; in
// Catch2 3 the runner is any file with a main() (the define is ignored).
#pragma once
#include <string>
#include <vector>

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
// Where the default reporter writes, set after the command line is applied.
inline void set_report_file(Catch::Session& session, const std::string& path) {
  session.configData().defaultOutputFilename = path;
}
// A filter that selects nothing (a chapter without [np3] tests, say) is no failure, as in Catch2 2.
inline void allow_no_tests(Catch::Session& session) { session.configData().allowZeroTests = true; }
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
#ifdef CATCH_CONFIG_RUNNER  // Catch2 2 declares its runner's types in the runner's file only
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
inline void set_report_file(Catch::Session& session, const std::string& path) {
  session.configData().outputFilename = path;
}
inline void allow_no_tests(Catch::Session&) {}
#endif
}  // namespace catch2_compat
#endif
