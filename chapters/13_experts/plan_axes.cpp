// plan_axes.cpp — ex13.4: the context and expert axes' counts.
#include "plan_axes.hpp"

#include "workbook/errors.hpp"

namespace ch13 {

AxesPlan plan_axes(const AxesWorkload& workload, const AxesLayout& layout) {
  const workbook::GptOptions& gpt = workload.gpt;
  WB_CHECK(layout.context >= 1 && layout.experts >= 1, "plan_axes: cp {} and ep {} must be at least 1",
           layout.context, layout.experts);
  WB_CHECK(gpt.context % layout.context == 0, "plan_axes: a context of {} does not split into {} equal parts",
           gpt.context, layout.context);
  AxesPlan plan;
  WB_NOT_IMPLEMENTED("ex13.4");  // TODO(ex13.4): your code here
  return plan;
}

}  // namespace ch13
