// equal_blocks.hpp — given: a model of equal blocks, for the two layouts
// whose predictions assume equal shares: a pipeline of p equal stages (its
// bubble, (p − 1)/(m + p − 1)) and a tensor-parallel group of T ranks.
//
//   x [N, W] → blocks × L:  x + down(relu(up(x)))      up: W → 2W, down: 2W → W
//   → loss: the mean of the output's squares
//
// A block is Megatron-LM's MLP. In a pipeline, stage s of p holds blocks
// [s·L/p, (s+1)·L/p): every stage does the same work. Tensor parallel over
// T ranks splits every block: up column-parallel, down row-parallel
// (Chapter 8's layers); an [N, W] activation goes into and out of each block.
// BEGIN SOLUTION NOTE ex10.6
// Each rank computes 1/T of every block, and each block all-reduces an
// [N, W] activation once in forward (g, after down) and once in backward
// (f, before up).
// END SOLUTION NOTE
//
// Chapter 9's BlockMlp would not do: its input and output layers make the
// first and last stages longer, and each of its blocks needs a whole
// activation between two Linear layers, which tensor parallelism splits.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "tensor_parallel.hpp"
#include "workbook/communicator.hpp"

namespace ch10 {

struct EqualBlocksOptions {
  int64_t blocks = 8;
  int64_t width = 512;  // W; the hidden width is 2W
};

class EqualBlocks : public torch::nn::Module {
 public:
  explicit EqualBlocks(EqualBlocksOptions options);
  torch::Tensor forward(torch::Tensor x, int64_t first, int64_t last);  // blocks [first, last) on x [N, W]
  torch::Tensor forward(torch::Tensor x) { return forward(std::move(x), 0, options.blocks); }

  EqualBlocksOptions options;
  std::vector<torch::nn::Linear> up, down;
};

torch::Tensor equal_blocks_loss(const torch::Tensor& output);  // the mean of the squares

// ---- a pipeline of equal stages ------------------------------------------------------
enum class PipelineSchedule { GPipe, OneFOneB };  // Chapter 8's two schedules
const char* schedule_name(PipelineSchedule schedule);  // "gpipe", "1f1b"

// The parameters of stage `stage` of `stages`: its blocks'.
std::vector<torch::Tensor> stage_parameters(EqualBlocks& model, int stage, int stages);

// What one stage did in one step.
struct StageTimes {
  double busy_s = 0.0;  // inside its forwards and backwards
  double step_s = 0.0;  // from the step's start to its last backward's gradient sent on
};

// One step of the pipeline on stage comm.rank() of comm.size() (the blocks
// a multiple of the stages): `batch` [N, W] (the first stage feeds it; every
// stage passes the same shape) cut into `micro_batches` equal parts, each
// forward and backward through every stage in `schedule`'s order.
// Gradients accumulate in the stage's parameters.
StageTimes pipeline_step(EqualBlocks& model, workbook::Communicator& comm, PipelineSchedule schedule,
                         const torch::Tensor& batch, int64_t micro_batches);

// ---- tensor parallel -----------------------------------------------------------------
// Every block of `full` split over comm's ranks (each keeps copies of its
// parts). forward: x [N, W], the same on every rank, gives the same result
// on every rank.
class TensorParallelBlocks : public torch::nn::Module {
 public:
  TensorParallelBlocks(const EqualBlocks& full, workbook::Communicator& comm);
  torch::Tensor forward(torch::Tensor x);

  std::vector<ch08::ColumnParallelLinear> up;
  std::vector<ch08::RowParallelLinear> down;
};

}  // namespace ch10
