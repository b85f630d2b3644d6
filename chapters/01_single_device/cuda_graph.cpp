// cuda_graph.cpp — the device-resident Adam and the captured train step
// (cuda_graph.hpp). Given code.
#include "cuda_graph.hpp"

#include <memory>
#include <optional>

#include "workbook/errors.hpp"

#ifdef WORKBOOK_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ch01 {

DeviceAdam::DeviceAdam(std::vector<torch::Tensor> parameters, double lr)
    : torch::optim::Optimizer(std::move(parameters), std::make_unique<torch::optim::AdamOptions>(lr)), lr_(lr) {}

torch::Tensor DeviceAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = closure ? closure() : torch::Tensor();
  const std::vector<torch::Tensor>& all = param_groups_.at(0).params();
  if (exp_avg_.empty())
    for (const torch::Tensor& p : all) {  // the first step (before any capture) makes the state
      exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      step_count_.push_back(torch::zeros({}, p.options().dtype(torch::kFloat32)));
    }
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq, step_count;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i].grad().defined()) continue;
    params.push_back(all[i]);
    grads.push_back(all[i].grad());
    exp_avg.push_back(exp_avg_[i]);
    exp_avg_sq.push_back(exp_avg_sq_[i]);
    step_count.push_back(step_count_[i]);
  }
  if (params.empty()) return loss;
  // The fused kernel reads the step count; counting is the caller's part (as
  // in PyTorch's own Adam(fused=True)), here a kernel too.
  torch::_foreach_add_(step_count, 1);
  const auto& options = static_cast<const torch::optim::AdamOptions&>(param_groups_.at(0).options());
  const auto [beta1, beta2] = options.betas();
  torch::_fused_adam_(params, grads, exp_avg, exp_avg_sq, /*max_exp_avg_sqs=*/{}, step_count, lr_, beta1, beta2,
                      options.weight_decay(), options.eps(), /*amsgrad=*/false, /*maximize=*/false);
  return loss;
}

#ifdef WORKBOOK_TORCH_CUDA

namespace {

struct Captured {
  StepFn eager_step;
  int64_t batch_size;
  int64_t eager_left;
  std::optional<c10::cuda::CUDAStream> side;
  std::unique_ptr<at::cuda::CUDAGraph> graph;  // made at the capture
  Batch input;          // the graph's own input: each batch is copied here
  torch::Tensor loss;   // the graph's own output

  // Runs `work` on the side stream, ordered after everything queued on the
  // current stream so far and before everything queued on it afterwards.
  template <class Work>
  void on_side_stream(c10::cuda::CUDAStream current, Work&& work) {
    at::cuda::CUDAEvent before, after;
    before.record(current);
    before.block(*side);
    {
      c10::cuda::CUDAStreamGuard guard(*side);
      work();
    }
    after.record(*side);
    after.block(current);
  }

  torch::Tensor operator()(const Batch& batch) {
    WB_CHECK(batch.images.is_cuda(), "--cuda-graph: the batches must be on a GPU (run with --device cuda)");
    if (batch.labels.size(0) != batch_size) return eager_step(batch);
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(batch.images.device().index());
    if (!side) side = c10::cuda::getStreamFromPool(false, batch.images.device().index());
    if (eager_left > 0) {
      --eager_left;
      torch::Tensor out;
      on_side_stream(current, [&] { out = eager_step(batch); });
      return out;
    }
    if (!graph) {
      input = {batch.images.clone(), batch.labels.clone()};
      graph = std::make_unique<at::cuda::CUDAGraph>();
      on_side_stream(current, [&] {
        graph->capture_begin();  // records, does not run: the replay below runs this batch's step
        loss = eager_step(input);
        graph->capture_end();
      });
    } else {
      input.images.copy_(batch.images);
      input.labels.copy_(batch.labels);
    }
    graph->replay();  // on the current stream, after the copies
    return loss.clone();
  }
};

}  // namespace

StepFn captured_step(StepFn eager_step, int64_t batch_size, int64_t eager_steps) {
  WB_CHECK(batch_size > 0 && eager_steps >= 1, "captured_step: batch_size and eager_steps must be positive");
  auto captured = std::make_shared<Captured>();
  captured->eager_step = std::move(eager_step);
  captured->batch_size = batch_size;
  captured->eager_left = eager_steps;
  return [captured](const Batch& batch) { return (*captured)(batch); };
}

#else

StepFn captured_step(StepFn, int64_t, int64_t) {
  throw workbook::UserError("--cuda-graph needs a CUDA build of LibTorch (the cuda preset) and --device cuda");
}

#endif

}  // namespace ch01
