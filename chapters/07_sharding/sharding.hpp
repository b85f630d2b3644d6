// sharding.hpp — Chapter 7's API: sharded data parallel (ZeRO), built from
// the two halves of Chapter 4's all-reduce, reduce-scatter and all-gather.
// flat_group.hpp has the layout (ex7.1), sharding_common.hpp the interface,
// stage 0 and the norms across shards (ex7.4); this file the stages 1 to 3.
//
// DDP (Chapter 3) keeps everything on every rank and every rank runs the whole
// optimizer step. ZeRO gives each rank one shard of the flat parameter buffer
// and lets it keep, and step, only that shard's state. What one rank holds
// between steps, for P parameters, N ranks, Adam (2 values of state per
// parameter), float32 (the README derives the bytes):
//
//                parameters                        gradients          optimizer state
//   stage 0 DDP  P                                 P                  2P
//   stage 1      P                                 P (+P/N shard)     2P / N
//   stage 2      P                                 P / N              2P / N
//   stage 3      P / N (+1 layer, while in use)    P / N              2P / N
//
// Whatever the stage, a step ends with every rank's model equal to the one
// a single process would have after one step on the global batch.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "flat_group.hpp"
#include "sharding_common.hpp"
#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch07 {

// ---- ex7.2: stage 1, the optimizer state sharded ----------------------------------

// One FlatGroup of every trainable parameter; the optimizer steps owned() only.
class OptimizerStateSharding : public Sharding {
 public:
  OptimizerStateSharding(torch::nn::Module& model, workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                         const ShardingOptions& options = {});
  void zero_grad() override;
  // ex7.2. Before: each rank's parameters' .grad hold the gradient of its own
  // batch. After: every rank's parameters are those a single process would
  // have after one optimizer step on the gradient averaged over ranks. The
  // optimizer holds owned() only (its state is 1/N of DDP's) and reads its
  // gradient from owned().grad, which the constructor made a view of
  // group_->shard_gradient(); step through step_optimizer() (it clips first
  // when asked). A rank sends per step what DDP's ring all-reduce sends, padding
  // aside, in at most two collective calls (the tests count both).
  void step() override;
  HeldBytes held() const override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  std::vector<FlatGroup*> groups() override { return {group_.get()}; }

 private:
  std::unique_ptr<FlatGroup> group_;
  workbook::Communicator& comm_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  torch::Tensor owned_;  // what the optimizer steps: group_->owned(), its .grad a view of shard_gradient()
};

// ---- ex7.3: stage 2, the gradients sharded too -------------------------------------

// Note: [buckets of stage 2] Chapter 4's buckets (reverse registration order,
// a small first bucket) become the groups: each bucket is a FlatGroup of its
// own, padded and cut into N shards, and each rank keeps 1/N of each bucket's
// averaged gradient. The point is memory: a bucket's full gradient may live
// only from its first gradient to its reduce-scatter, during backward, not
// until step(). Each parameter's .grad, which LibTorch fills beside it, is
// freed with it (reduce_bucket) -- all but the last: a hook registered with
// LibTorch's Tensor::register_hook runs with the gradient before it is
// accumulated into .grad, and LibTorch's C++ Tensor API has no hook that
// runs after (PyTorch's Python register_post_accumulate_grad_hook has no
// counterpart there).
// So the .grad of a bucket's last parameter is freed with the next bucket,
// or in step().
// Every rank must make the same collectives in the same order, whatever
// order its gradients arrive in (Chapter 4's reducer met the same problem).
class GradientSharding : public Sharding {
 public:
  GradientSharding(torch::nn::Module& model, workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                   const ShardingOptions& options = {});
  ~GradientSharding() override;
  void zero_grad() override;
  // ex7.3: called by parameter (bucket, index)'s hook with its gradient, once
  // per parameter that gets one, in whatever order backward produces them
  // (a test calls it directly, in another order on each rank). The bucket's
  // gradient buffer is laid out as its flat() (created at the bucket's first
  // gradient; missing_ counts what is still to come). A bucket must be
  // reduce-scattered (reduce_bucket) during backward, from a hook, as soon as
  // the rule above allows; count each bucket so reduced in
  // reduced_from_hooks_.
  void gradient_ready(size_t bucket, size_t index, const torch::Tensor& gradient);
  // ex7.3: after it, every bucket has been reduce-scattered exactly once (a
  // parameter without a gradient counts as zeros: reduce_bucket fills them),
  // the optimizer has stepped (step_optimizer()), and every rank holds every
  // updated parameter, as after stage 1.
  void step() override;
  HeldBytes held() const override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  std::vector<FlatGroup*> groups() override;
  // The most gradient bytes held at once during any backward so far:
  // buckets' buffers and parameters' .grad, not the shards.
  int64_t peak_gradient_bytes() const { return peak_gradient_bytes_; }
  // Buckets reduced from the hooks during the last backward (not in step()).
  size_t reduced_from_hooks() const { return last_reduced_from_hooks_; }

 private:
  // Given: reduce-scatters bucket b (its buffer, zeros where nothing arrived),
  // frees the buffer and the .grad of its parameters and of bucket b - 1's.
  void reduce_bucket(size_t b);
  void note_gradient_bytes();  // tracks peak_gradient_bytes_

  void start_next_step();      // given: missing_, next_to_reduce_, the counters

  std::vector<std::unique_ptr<FlatGroup>> buckets_;
  workbook::Communicator& comm_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> owned_;           // bucket -> what the optimizer steps
  std::vector<torch::Tensor> buffers_;         // bucket -> its gradients as flat(), while it fills
  std::vector<size_t> missing_;                // bucket -> gradients still to arrive this step
  size_t next_to_reduce_ = 0;                  // yours to use (start_next_step sets it to 0)
  std::vector<std::pair<torch::Tensor, unsigned>> hooks_;  // (parameter, handle), removed on destruction
  size_t reduced_from_hooks_ = 0, last_reduced_from_hooks_ = 0;
  int64_t peak_gradient_bytes_ = 0;
};

// ---- ex7.5: stage 3, the parameters sharded too (FSDP) ------------------------------

// Note: [a stage-3 step] What must hold, on every rank:
// - Between steps a rank keeps only its shard of each layer (kept()): no
//   layer gathered, no gradient buffer, no .grad.
// - During forward and backward at most one layer's trainable parameters are
//   whole at any moment (peak_parameter_bytes() <= the shards + the largest
//   layer), and a layer is whole whenever autograd computes with its
//   parameters: its forward, and its backward, which reads the views saved in
//   forward (Note [freeing a layer's parameters]).
// - A layer's full gradient lives only while backward fills it: every layer
//   but the first is reduce-scattered into shard_gradient() (its buffer
//   freed) during backward, before step(); the first, in step().
// - Per step a rank all-gathers each layer twice and reduce-scatters it once
//   (1.5 times what DDP's ring sends); nothing is all-gathered after the
//   optimizer's step.
// Note: [one order of collectives] Which collective comes next must depend
// only on how far backward has got, never on which gradients arrived: a rank
// whose parameter got no gradient (a branch not taken) must reduce zeros for
// it at the same point as a rank whose parameter did. Stage 2 may reduce in
// the hook of a bucket's last gradient because its hooks make no other
// collective; here the all-gathers of the layers before it would then
// interleave differently on different ranks. A parameter must belong to one
// layer, and be used only there.
class ParameterSharding : public Sharding {
 public:
  // `layers` in forward order; every trainable parameter of `model` in one of them.
  ParameterSharding(torch::nn::Module& model, std::vector<Layer> layers, workbook::Communicator& comm,
                    const MakeOptimizer& make_optimizer, const ShardingOptions& options = {});
  ~ParameterSharding() override;
  // ex7.5: the layers' forwards in order on `images`: the output, and the
  // gradients that flow from it, are model.forward's, within Note [a stage-3
  // step] and Note [one order of collectives].
  torch::Tensor forward(workbook::Classifier& model, const torch::Tensor& images) override;
  // ex7.5: as stage 2's, with layers for buckets: the gradient goes into the
  // layer's buffer, laid out as its flat() (created at its first gradient).
  // No collective here: Note [one order of collectives].
  void gradient_ready(size_t layer, size_t index, const torch::Tensor& gradient);
  // ex7.5: whatever backward left unfinished, then the optimizer
  // (step_optimizer(comm_)); after it, Note [a stage-3 step]'s "between steps".
  void step() override;
  void zero_grad() override;
  HeldBytes held() const override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  std::vector<FlatGroup*> groups() override;
  void gather_full() override;
  void release_full() override;
  int64_t peak_parameter_bytes() const override { return peak_parameter_bytes_; }
  // Layers reduce-scattered during the last backward (not in step()).
  size_t reduced_in_backward() const { return last_reduced_in_backward_; }

 private:
  // Given. gather(l)/release(l): layer l's parameters (a layer without
  // trainable parameters: nothing), counted for peak_parameter_bytes.
  // finish_layers_after(l): every layer after l not finished yet, from the
  // last down: its buffer (zeros where no gradient came) reduce-scattered
  // into shard_gradient() and freed, the layer released, its .grad freed.
  // l = -1: every layer not finished yet.
  void gather(size_t l);
  void release(size_t l);
  void finish_layers_after(int64_t l);
  void start_next_step();
  int64_t gathered_parameter_bytes() const;

  std::vector<Layer> layers_;
  std::vector<std::unique_ptr<FlatGroup>> groups_;  // layer -> its trainable parameters (null: none)
  workbook::Communicator& comm_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> kept_views_;           // what the optimizer steps: each layer's kept(), unpadded
  std::vector<torch::Tensor> buffers_;              // layer -> its gradients, while they arrive
  int64_t unfinished_ = -1;                         // the layers 0..unfinished_ are not finished yet
  bool in_step_ = false;
  size_t reduced_in_backward_ = 0, last_reduced_in_backward_ = 0;
  std::vector<std::pair<torch::Tensor, unsigned>> hooks_;
  int64_t peak_parameter_bytes_ = 0;
};

// ---- for programs and tests (given) --------------------------------------------------

// The stage: 0 (DDP), 1, 2 or 3.
std::unique_ptr<Sharding> make_sharding(int stage, torch::nn::Module& model, workbook::Communicator& comm,
                                        const MakeOptimizer& make_optimizer, const ShardingOptions& options = {});

// ---- checkpoints (given) ------------------------------------------------------------

// Note: [a checkpoint of shards is a checkpoint of DDP] save_checkpoint
// consolidates: it all-gathers each group's optimizer state and writes,
// through Chapter 3's save_checkpoint (rank 0, atomically), the model and
// the optimizer state stage 0 would have, per parameter. So the file does
// not depend on the stage or the world size: load_checkpoint cuts it into
// the shards of whatever stage and world size reads it (resharding), and
// ch03_train reads an Adam one. The price is a full copy of the optimizer
// state on every rank while saving, as PyTorch's
// ZeroRedundancyOptimizer.consolidate_state_dict needs one on its root.
// `make_optimizer` must be the one the Sharding was built with.
void save_checkpoint(const std::filesystem::path& path, workbook::Classifier& model, Sharding& sharding,
                     const MakeOptimizer& make_optimizer, int64_t epochs_done, workbook::Communicator& comm);
// Returns the epochs done. Collective (stage 3 gathers its layers). A file
// that is missing, unreadable, or written with another optimizer: a UserError.
int64_t load_checkpoint(const std::filesystem::path& path, workbook::Classifier& model, Sharding& sharding,
                        const MakeOptimizer& make_optimizer, workbook::Communicator& comm);

}  // namespace ch07
