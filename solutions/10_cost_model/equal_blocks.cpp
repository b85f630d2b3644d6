// equal_blocks.cpp — given: the equal-block model, its pipeline and its
// tensor-parallel split (equal_blocks.hpp).
#include "equal_blocks.hpp"

#include <algorithm>
#include <map>

#include "pipeline.hpp"  // Chapter 8: Stage, gpipe, one_f_one_b
#include "workbook/errors.hpp"
#include "workbook/timing.hpp"

namespace ch10 {

EqualBlocks::EqualBlocks(EqualBlocksOptions options_) : options(options_) {
  WB_CHECK(options.blocks >= 1 && options.width >= 1, "EqualBlocks: {} blocks of width {}", options.blocks,
           options.width);
  for (int64_t b = 0; b < options.blocks; ++b) {
    up.push_back(register_module(fmt::format("up{}", b), torch::nn::Linear(options.width, 2 * options.width)));
    down.push_back(register_module(fmt::format("down{}", b), torch::nn::Linear(2 * options.width, options.width)));
  }
}

torch::Tensor EqualBlocks::forward(torch::Tensor x, int64_t first, int64_t last) {
  for (int64_t b = first; b < last; ++b) x = x + down[b]->forward(torch::relu(up[b]->forward(x)));
  return x;
}

torch::Tensor equal_blocks_loss(const torch::Tensor& output) { return output.square().mean(); }

const char* schedule_name(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::GPipe ? "gpipe" : "1f1b";
}

namespace {

std::pair<int64_t, int64_t> blocks_of(const EqualBlocks& model, int stage, int stages) {
  WB_CHECK(model.options.blocks % stages == 0, "a pipeline of {} equal stages needs a multiple of {} blocks, got {}",
           stages, stages, model.options.blocks);
  const int64_t per_stage = model.options.blocks / stages;
  return {stage * per_stage, (stage + 1) * per_stage};
}

// One stage's step: what Chapter 8's PipelineStage does for FashionCNN, for
// equal blocks, with the same neighbours' calls (a no-op where there is no
// neighbour) and the same exchange where both neighbours send (Note [an
// exchange where both neighbours send] in pipeline.hpp), run by Chapter 8's
// reference schedules.
class EqualBlocksStage : public ch08::Stage {
 public:
  EqualBlocksStage(EqualBlocks& model, workbook::Communicator& comm, const torch::Tensor& batch,
                   int64_t micro_batches)
      : model_(model), comm_(comm), s_(comm.rank()), p_(comm.size()), batch_(batch), m_(micro_batches) {
    WB_CHECK(m_ >= 1 && batch.size(0) % m_ == 0, "a batch of {} rows does not cut into {} equal micro-batches",
             batch.size(0), m_);
    std::tie(first_, last_) = blocks_of(model, s_, p_);
    rows_ = batch.size(0) / m_;
  }
  int stage() const override { return s_; }
  int stages() const override { return p_; }
  int64_t micro_batches() const override { return m_; }
  double busy_s() const { return busy_s_; }

  torch::Tensor forward(int64_t micro, const torch::Tensor& input) override {
    const double start = workbook::now_seconds();
    torch::Tensor in = input.detach().requires_grad_(s_ > 0);
    torch::Tensor out = model_.forward(in, first_, last_);
    if (s_ == p_ - 1) out = equal_blocks_loss(out) / m_;
    held_[micro] = {in, out};
    busy_s_ += workbook::now_seconds() - start;
    return out.detach();
  }
  torch::Tensor backward(int64_t micro, const torch::Tensor& output_grad) override {
    const double start = workbook::now_seconds();
    auto [in, out] = held_.at(micro);
    held_.erase(micro);
    if (output_grad.defined()) out.backward(output_grad); else out.backward();
    busy_s_ += workbook::now_seconds() - start;
    return s_ > 0 ? in.grad() : torch::Tensor();
  }

  torch::Tensor recv_forward(int64_t micro) override {
    if (s_ == 0) return batch_.narrow(0, micro * rows_, rows_);
    torch::Tensor activation = empty();
    comm_.recv(activation, s_ - 1);
    return activation;
  }
  void send_forward(const torch::Tensor& activation) override {
    if (s_ < p_ - 1) comm_.send(activation.contiguous(), s_ + 1);
  }
  torch::Tensor recv_backward() override {
    if (s_ == p_ - 1) return {};
    torch::Tensor grad = empty();
    comm_.recv(grad, s_ + 1);
    return grad;
  }
  void send_backward(const torch::Tensor& grad) override {
    if (s_ > 0) comm_.send(grad.contiguous(), s_ - 1);
  }
  torch::Tensor send_forward_recv_backward(const torch::Tensor& activation) override {
    if (s_ == p_ - 1) return {};
    torch::Tensor grad = empty();
    comm_.exchange(activation.contiguous(), s_ + 1, grad, s_ + 1);
    return grad;
  }
  torch::Tensor send_backward_recv_forward(const torch::Tensor& grad, int64_t micro) override {
    if (s_ == 0) return recv_forward(micro);
    torch::Tensor activation = empty();
    comm_.exchange(grad.contiguous(), s_ - 1, activation, s_ - 1);
    return activation;
  }

 private:
  torch::Tensor empty() const { return torch::empty({rows_, model_.options.width}, batch_.options()); }

  EqualBlocks& model_;
  workbook::Communicator& comm_;
  int s_, p_;
  torch::Tensor batch_;
  int64_t m_, rows_ = 0, first_ = 0, last_ = 0;
  std::map<int64_t, std::pair<torch::Tensor, torch::Tensor>> held_;  // micro-batch -> its input and output
  double busy_s_ = 0.0;
};

}  // namespace

std::vector<torch::Tensor> stage_parameters(EqualBlocks& model, int stage, int stages) {
  const auto [first, last] = blocks_of(model, stage, stages);
  std::vector<torch::Tensor> parameters;
  for (int64_t b = first; b < last; ++b)
    for (const auto& layer : {model.up[b]->parameters(), model.down[b]->parameters()})
      parameters.insert(parameters.end(), layer.begin(), layer.end());
  return parameters;
}

StageTimes pipeline_step(EqualBlocks& model, workbook::Communicator& comm, PipelineSchedule schedule,
                         const torch::Tensor& batch, int64_t micro_batches) {
  const double start = workbook::now_seconds();
  EqualBlocksStage stage(model, comm, batch, micro_batches);
  if (schedule == PipelineSchedule::GPipe) ch08::gpipe(stage);
  else ch08::one_f_one_b(stage);
  return {stage.busy_s(), workbook::now_seconds() - start};
}

TensorParallelBlocks::TensorParallelBlocks(const EqualBlocks& full, workbook::Communicator& comm) {
  for (size_t b = 0; b < full.up.size(); ++b) {
    up.push_back(register_module(fmt::format("up{}", b), ch08::ColumnParallelLinear(full.up[b], comm)));
    down.push_back(register_module(fmt::format("down{}", b), ch08::RowParallelLinear(full.down[b], comm)));
  }
}

torch::Tensor TensorParallelBlocks::forward(torch::Tensor x) {
  for (size_t b = 0; b < up.size(); ++b) x = x + down[b]->forward(torch::relu(up[b]->forward(x)));
  return x;
}

}  // namespace ch10
