// op_profile.hpp — where a step's time goes, operation by operation:
// LibTorch's profiler on this thread while an OpProfile lives, its events
// summed by name. The same lines as the PyTorch baselines' --profile
// (chapters/11_gpt/pytorch_gpt_baseline.py), so that one renderer
// (chapters/11_gpt/profile_table.py) puts both side by side.
//
//   std::optional<workbook::OpProfile> profile;
//   if (step == first_timed) profile.emplace();        // the profiler on
//   ...
//   profile->write(file, "reference", timed_steps, their_seconds);  // off, summed, written
//
// Note: [self time, by root] An operation's self time is its time less the
// operations it called (matmul's less the mm it calls), so the rows add up
// to the time spent in operations, and nothing twice. Each is kept under its
// outermost caller (its root: "aten::linear", or the optimizer's step) and
// whether it ran inside backward (autograd::engine::evaluate_function), the
// two things the renderer needs to tell the optimizer's arithmetic from the
// model's. The time between operations (the frontend's own work) is in no
// row: it is the step's time less their sum.
#pragma once
#include <filesystem>
#include <string>

namespace workbook {

class OpProfile {
 public:
  OpProfile();   // starts LibTorch's (legacy) profiler: one at a time
  ~OpProfile();  // stops it, if write() did not
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  // Stops the profiler and writes one JSON line per (name, root, backward):
  // {"type": "op", "impl", "name", "root", "backward", "calls", "self_us"},
  // after {"type": "profile", "impl", "steps", "steps_s"}: the steps profiled
  // and their time, timed as the program times them. A UserError if it cannot.
  void write(const std::filesystem::path& file, const std::string& impl, int64_t steps, double steps_s);

 private:
  bool on_ = false;
};

}  // namespace workbook
