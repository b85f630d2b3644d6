// gpipe.cpp — given: the GPipe schedule, the Stage calls at their plainest (ex8.7 reorders them).
#include "pipeline.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

void gpipe(Stage& stage) {
  const int64_t m = stage.micro_batches();
  // Every micro-batch forward: stage s works on micro-batch i while stage s+1
  // works on i-1. Sends go one way only, so blocking ones cannot deadlock.
  for (int64_t micro = 0; micro < m; ++micro) {
    const torch::Tensor input = stage.recv_forward(micro);
    stage.send_forward(stage.forward(micro, input));
  }
  // Then every backward. Any order works if every stage takes the same one
  // (a received gradient carries no micro-batch number); the GPipe paper
  // draws them last micro-batch first. Micro-batch order here: the gradients
  // add up in the order a single process accumulating micro-batches adds them.
  for (int64_t micro = 0; micro < m; ++micro) {
    const torch::Tensor output_grad = stage.recv_backward();
    stage.send_backward(stage.backward(micro, output_grad));
  }
}

}  // namespace ch08
