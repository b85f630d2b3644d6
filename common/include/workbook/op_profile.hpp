// op_profile.hpp — where a step's time goes, operation by operation:
// LibTorch's profiler on this thread while an OpProfile lives, its events
// summed by name. The same lines as the PyTorch baselines' --profile
// (chapters/11_gpt/pytorch_gpt_baseline.py), so that one renderer
// (chapters/11_gpt/profile_table.py) puts both side by side.
//
//   workbook::OpProfile profile(file);                 // the file opened: a bad path fails here
//   if (step == first_timed) profile.start();          // the profiler on
//   ...
//   profile.write("reference", timed_steps, their_seconds);  // off, summed, written
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
#include <fstream>
#include <string>

namespace workbook {

class OpProfile {
 public:
  // Opens `file` for writing (a UserError naming it if it cannot), before
  // any work is done; the profiler is not on yet.
  explicit OpProfile(const std::filesystem::path& file);
  void start();  // starts LibTorch's (legacy) profiler: one at a time
  ~OpProfile();  // stops it, if write() did not
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  // Stops the profiler and writes one JSON line per (name, root, backward):
  // {"type": "op", "impl", "name", "root", "backward", "calls", "self_us"},
  // after {"type": "profile", "impl", "steps", "steps_s"}: the steps profiled
  // and their time, timed as the program times them. A UserError if it cannot.
  void write(const std::string& impl, int64_t steps, double steps_s);

 private:
  std::filesystem::path file_;
  std::ofstream out_;
  bool on_ = false;
};

}  // namespace workbook
