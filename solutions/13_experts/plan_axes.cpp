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
  // BEGIN SOLUTION ex13.4
  constexpr int64_t kFloat = 4;
  const int64_t cp = layout.context, ep = layout.experts;
  const int64_t tokens = workload.sequences * gpt.context / cp;  // the positions this rank holds
  const int64_t w = gpt.width, layers = gpt.layers;
  // Note: [a block is k and v] One block is N·T/cp·w elements of k and as
  // many of v; forward sends one cp − 1 times, backward the block again cp −
  // 1 times and its gradient cp times.
  const int64_t block = 2 * tokens * w * kFloat;
  plan.ring_bytes = cp == 1 ? 0 : layers * block * ((cp - 1) + (cp - 1) + cp);
  // Note: [four crossings a layer] A rank's tokens make k·tokens rows, a
  // share (ep − 1)/ep of them for other ranks' experts when the routing is
  // even; as many come back, and backward sends both again.
  plan.all_to_all_bytes = 4 * layers * (workload.moe.top_k * tokens * (ep - 1) / ep) * w * kFloat;
  // Note: [what a block keeps, per position] Counted from what each
  // operation saves for its backward, in floats per position: LayerNorm its
  // input (w) and two statistics, twice; the qkv product its input (w);
  // attention q, k, v and its output (4w) and a log-sum-exp per head; the
  // projection its input, the heads put back together (w); the MLP's
  // product its input (w), GELU its input (4w), the second product GELU's
  // output (4w); and the block's output, the next block's input, is the
  // next LayerNorm's. Then the last LayerNorm (w + 2), the logits' product
  // its input (w), and the loss its log-softmax (V).
  const int64_t per_block = 17 * w + 4 + gpt.heads;
  const int64_t ends = 2 * w + 2 + gpt.vocabulary;
  plan.kept_bytes = tokens * (layers * per_block + ends) * kFloat;
  // END SOLUTION
  return plan;
}

}  // namespace ch13
