// op_profile.cpp — OpProfile (op_profile.hpp): LibTorch's legacy profiler,
// its push/pop events folded into self times.
#include "workbook/op_profile.hpp"

#include <map>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>

#include "workbook/errors.hpp"

namespace workbook {
namespace profiler = torch::autograd::profiler;

OpProfile::OpProfile(const std::filesystem::path& file) : file_(file), out_(file) {
  WB_CHECK(out_.is_open(), "--profile {}: cannot open it for writing", file.string());
}

void OpProfile::start() {
  profiler::enableProfilerLegacy(profiler::ProfilerConfig(profiler::ProfilerState::CPU));
  on_ = true;
}

OpProfile::~OpProfile() {
  if (on_) profiler::disableProfilerLegacy();
}

void OpProfile::write(const std::string& impl, int64_t steps, double steps_s) {
  WB_CHECK(on_, "--profile {}: the profiler was not started, or was written already", file_.string());
  const profiler::thread_event_lists threads = profiler::disableProfilerLegacy();
  on_ = false;
  struct Open {
    const profiler::LegacyEvent* push;
    double children_us = 0;
    bool backward;
  };
  struct Sum {
    int64_t calls = 0;
    double self_us = 0;
  };
  std::map<std::tuple<std::string, std::string, bool>, Sum> sums;  // (name, root, backward)
  for (const auto& events : threads) {
    std::vector<Open> open;
    for (const profiler::LegacyEvent& event : events) {
      const std::string kind = event.kindStr();
      if (kind == "push") {
        const bool backward = (!open.empty() && open.back().backward) ||
                              std::string(event.name()).rfind("autograd::engine::evaluate_function", 0) == 0;
        open.push_back({&event, 0.0, backward});
      } else if (kind == "pop" && !open.empty()) {
        const Open done = open.back();
        open.pop_back();
        const double elapsed = done.push->cpuElapsedUs(event);
        if (!open.empty()) open.back().children_us += elapsed;
        const std::string root = open.empty() ? done.push->name() : open.front().push->name();
        Sum& sum = sums[{done.push->name(), root, done.backward}];
        sum.calls += 1;
        sum.self_us += elapsed - done.children_us;
      }
    }
  }
  out_ << nlohmann::json{{"type", "profile"}, {"impl", impl}, {"steps", steps}, {"steps_s", steps_s}}.dump() << "\n";
  for (const auto& [key, sum] : sums) {
    const auto& [name, root, backward] = key;
    out_ << nlohmann::json{{"type", "op"},         {"impl", impl},         {"name", name},
                          {"root", root},         {"backward", backward}, {"calls", sum.calls},
                          {"self_us", sum.self_us}}
               .dump()
        << "\n";
  }
  out_.flush();
  WB_CHECK(out_.good(), "--profile {}: writing it failed", file_.string());
}

}  // namespace workbook
