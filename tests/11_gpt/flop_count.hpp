// flop_count.hpp — the floating-point operations of the matrix products that
// `work` runs on this thread, as LibTorch's profiler counts them (a
// multiply-add counts 2): the tests' oracle for ex11.6's step_flops,
// measured, not derived from the sizes.
#pragma once
#include <functional>
#include <string>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

namespace gpt_parts {

inline double matrix_product_flops(const std::function<void()>& work) {
  namespace profiler = torch::autograd::profiler;
  const profiler::ProfilerConfig config(profiler::ProfilerState::CPU, /*report_input_shapes=*/true,
                                        /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/true);
  profiler::enableProfilerLegacy(config);
  try {
    work();
  } catch (...) {
    profiler::disableProfilerLegacy();
    throw;
  }
  double flops = 0.0;
  for (const auto& events : profiler::disableProfilerLegacy())
    for (const profiler::LegacyEvent& event : events) {
      const std::string name = event.name();
      // The products themselves: matmul and linear call these, and are not counted twice.
      if (name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" || name == "aten::baddbmm")
        flops += static_cast<double>(const_cast<profiler::LegacyEvent&>(event).flops());
    }
  return flops;
}

}  // namespace gpt_parts
