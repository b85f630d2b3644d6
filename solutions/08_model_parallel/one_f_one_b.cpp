// one_f_one_b.cpp — ex8.7: the 1F1B schedule (PipeDream-Flush, as Megatron-LM
// runs it without interleaving).
#include <algorithm>

#include "pipeline.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

void one_f_one_b(Stage& stage) {
  [[maybe_unused]] const int64_t m = stage.micro_batches();
  // BEGIN SOLUTION ex8.7
  // Warm-up: stage s runs p − s − 1 forwards before its first backward; the
  // last stage none. Then each forward is followed by the oldest backward,
  // so at most p − s micro-batches are ever held.
  const int64_t warmup = std::min<int64_t>(stage.stages() - stage.stage() - 1, m);
  const int64_t steady = m - warmup;
  for (int64_t micro = 0; micro < warmup; ++micro) {
    const torch::Tensor input = stage.recv_forward(micro);
    stage.send_forward(stage.forward(micro, input));
  }
  torch::Tensor input;
  if (steady > 0) input = stage.recv_forward(warmup);
  for (int64_t i = 0; i < steady; ++i) {
    // Forward of micro-batch warmup + i, backward of micro-batch i. The next
    // stage is sending this one a gradient while this one sends it an
    // activation: one exchange each way (Note [an exchange where both
    // neighbours send]), and the same with the previous stage.
    const torch::Tensor output = stage.forward(warmup + i, input);
    const torch::Tensor output_grad = stage.send_forward_recv_backward(output);
    const torch::Tensor input_grad = stage.backward(i, output_grad);
    if (i == steady - 1) {
      stage.send_backward(input_grad);
    } else {
      input = stage.send_backward_recv_forward(input_grad, warmup + i + 1);
    }
  }
  // Cool-down: the backwards of the warm-up's micro-batches.
  for (int64_t micro = steady; micro < m; ++micro) {
    const torch::Tensor output_grad = stage.recv_backward();
    stage.send_backward(stage.backward(micro, output_grad));
  }
  // END SOLUTION
}

}  // namespace ch08
