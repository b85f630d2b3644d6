// sharding.hpp — Chapter 7's API: sharded data parallel (ZeRO), built from
// the two halves of Chapter 4's all-reduce, reduce-scatter and all-gather.
//
// DDP (Chapter 3) keeps everything on every rank and every rank runs the whole
// optimizer step. ZeRO gives each rank one shard of the flat parameter buffer
// and lets it keep, and step, only that shard's state:
//
//   P parameters, N ranks, Adam (2 values of state per parameter), float32
//
//                parameters    gradients          optimizer state   bytes per rank
//   stage 0 DDP  P             P                  2P                4P x 4
//   stage 1      P             P (+P/N shard)     2P / N            (2P + 3P/N) x 4
//   stage 2      P             P / N (+1 bucket)  2P / N            (P + 3P/N) x 4
//   stage 3      P / N (+1 layer, while in use)  P / N   2P / N     4P/N x 4
//
// One flat buffer per group of parameters, padded to a multiple of N, cut
// into N contiguous shards (ex7.1):
//
//   flat   [ conv1.weight | conv1.bias | ... | fc1.weight .......... | fc3.bias | pad ]
//          [      rank 0's shard       |      rank 1's shard        ]
//                                          fc1.weight is split: two ranks hold a piece each
//
// A stage-1 step (ex7.2), in place of Chapter 3's one all-reduce:
//
//   backward            every rank: the full gradient of its own batch
//   reduce-scatter      rank r gets shard r of the gradient, averaged over ranks
//   optimizer step      rank r steps shard r only: 1/N of the work and of the state
//   all-gather          every rank gets every updated shard: the whole model again
//
// reduce-scatter + all-gather is exactly what a ring all-reduce sends
// (Chapter 4): the same bytes as DDP, for 1/N of the optimizer's memory and time.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "optimizers.hpp"  // Chapter 6's reference: Lamb, LambOptions
#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch07 {

// ---- ex7.1: the partition ---------------------------------------------------------

// A run of one parameter's elements inside this rank's shard.
struct ShardPiece {
  size_t parameter = 0;          // index into the group's parameters
  int64_t parameter_offset = 0;  // first element of the run, within the parameter (flattened)
  int64_t shard_offset = 0;      // where the run starts, within the shard
  int64_t count = 0;             // elements in the run (> 0)
  bool operator==(const ShardPiece& other) const {
    return parameter == other.parameter && parameter_offset == other.parameter_offset &&
           shard_offset == other.shard_offset && count == other.count;
  }
};

// Where a group of parameters lies in its flat buffer, and what this rank owns.
struct Partition {
  int world_size = 1;
  int rank = 0;
  std::vector<int64_t> offsets;  // parameter i starts at offsets[i] in the flat buffer ...
  std::vector<int64_t> sizes;    // ... and has sizes[i] elements; parameters follow each other, no gaps
  int64_t numel = 0;             // the sum of sizes
  int64_t padded_numel = 0;      // numel rounded up to a multiple of world_size
  int64_t shard_numel = 0;       // padded_numel / world_size: every shard has this length
  // The parameters' parts in this rank's shard [rank x shard_numel, (rank + 1) x shard_numel),
  // in order; padding is in no piece. A rank whose shard is all padding has none.
  std::vector<ShardPiece> pieces;

  int64_t shard_begin() const { return rank * shard_numel; }
  // The elements of this rank's shard that are parameters, not padding: they
  // come first in the shard (padding is only at the end of the flat buffer).
  int64_t owned_numel() const;
};

// ex7.1: the layout of parameters with these element counts, in this order,
// for `rank` of `world_size`. padded_numel is the smallest multiple of
// world_size >= numel (0 when numel is 0).
Partition partition_parameters(const std::vector<int64_t>& parameter_sizes, int world_size, int rank);

// ---- a group of parameters in one flat buffer (given) --------------------------

// Note: [parameters as views] A FlatGroup copies its parameters into one
// padded buffer and makes each parameter a view into it (set_data: the
// parameter keeps its identity, its requires_grad and its place in the
// model; only its storage changes). Writing the buffer then writes the model:
// an all-gather into flat() updates every parameter at once, with no copy
// back. The optimizer is given owned(), a view of this rank's part of the
// same buffer, so its in-place step also writes the model.
using PartitionFn = std::function<Partition(const std::vector<int64_t>&, int, int)>;

class FlatGroup {
 public:
  // `parameters`: trainable, one dtype and device, not yet views of another
  // group. `partition`: ex7.1's (the tests of later exercises give their own,
  // so that they do not depend on ex7.1).
  FlatGroup(std::vector<torch::Tensor> parameters, int world_size, int rank,
            const PartitionFn& partition = partition_parameters);

  const Partition& partition() const { return partition_; }
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  torch::Tensor& flat() { return flat_; }               // [padded_numel]: every parameter of the group
  torch::Tensor shard() const;                          // [shard_numel]: this rank's shard of flat()
  torch::Tensor owned() const;                          // [owned_numel]: the shard without its padding
  torch::Tensor& shard_gradient() { return shard_gradient_; }  // [shard_numel]: the averaged gradient of shard()
  // The parameters' gradients laid out as flat() (zeros where a parameter has
  // none, and in the padding): a new [padded_numel] tensor.
  torch::Tensor gather_gradients() const;

  // Stage 3 (given). keep_shard_only() copies this rank's shard out of flat()
  // into kept() and frees flat()'s memory; gather() allocates it again and
  // all-gathers every rank's kept() into it; release() frees it again.
  // Note: [freeing a layer's parameters] The parameters stay views of
  // flat() for good; what is freed is the memory behind it (its storage
  // shrinks to 0 bytes, as PyTorch's FSDP does). So every view of it, the
  // ones autograd saved during forward included (Linear saves weight.t()),
  // sees the values again once gathered. Pointing the parameters at new
  // tensors (set_data) instead would leave autograd's saved views holding
  // the old buffer: nothing would be freed.
  void keep_shard_only();
  void gather(workbook::Communicator& comm);
  void release();
  bool gathered() const { return gathered_; }
  torch::Tensor& kept() { return kept_; }  // [shard_numel]: stage 3's copy of this rank's shard

 private:
  std::vector<torch::Tensor> parameters_;
  Partition partition_;
  torch::Tensor flat_;
  torch::Tensor shard_gradient_;
  torch::Tensor kept_;
  bool gathered_ = true;
};

// The trainable parameters of a model (requires_grad), in registration order.
std::vector<torch::Tensor> trainable_parameters(torch::nn::Module& model);

// ---- the stages -------------------------------------------------------------------

// What a rank holds, counted from the tensors: bytes of parameters, gradients
// and optimizer state (every defined tensor in the optimizer's state).
struct HeldBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t total() const { return parameters + gradients + optimizer_state; }
};

// The bytes of every tensor in an optimizer's state (LibTorch's Adam: exp_avg,
// exp_avg_sq, and max_exp_avg_sq with amsgrad; LAMB's moments).
int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer);

// A layer as stage 3 sees it: the parameters gathered around its use, and
// how to call it. Frozen parameters may be listed: they stay whole.
struct Layer {
  std::string name;
  std::vector<torch::Tensor> parameters;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

// FashionCNN::forward cut into its layers (given): conv1, bn1 (with ReLU and
// pooling), conv2, bn2 (and flatten), fc1 (with dropout), fc2, fc3. Calling
// them in order is model.forward, the same random numbers for dropout included.
std::vector<Layer> fashion_cnn_layers(workbook::FashionCNN& model);

struct ShardingOptions {
  PartitionFn partition = partition_parameters;
  // Stage 3's layers, for make_sharding; none: the model must be a
  // FashionCNN (fashion_cnn_layers).
  std::vector<Layer> layers;
  // Chapter 4's bucket limits: stage 2's groups.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // > 0: before every optimizer step, the averaged gradients are clipped to
  // this global norm (stage 0: torch::nn::utils::clip_grad_norm_; stages 1
  // to 3: ex7.4's clip_gradients_by_global_norm on the shards).
  double max_grad_norm = 0.0;
};

// Builds the optimizer for the tensors a stage hands it: the whole model's
// parameters (stage 0), or one tensor per group, this rank's unpadded part
// of it (stages 1 and 2: owned(); stage 3: a view of kept()).
using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<FlatGroup*>& groups,
                                                                             std::vector<torch::Tensor> tensors)>;

// Note: [one step with a Sharding]
//   sharding.zero_grad(); loss = criterion(model.forward(x)); loss.backward(); sharding.step();
// After step() every rank's model holds the same, updated parameters: the
// one that a single process would have after one step on the global batch.
class Sharding {
 public:
  virtual ~Sharding() = default;
  virtual void zero_grad() = 0;
  // After backward: average the gradients over ranks, step the optimizer,
  // bring every rank's parameters up to date. Collective.
  virtual void step() = 0;
  virtual HeldBytes held() const = 0;
  virtual torch::optim::Optimizer& optimizer() = 0;
  virtual std::vector<FlatGroup*> groups() { return {}; }
  // The model's forward. Stage 3: layer by layer, each gathered around its use.
  virtual torch::Tensor forward(workbook::Classifier& model, const torch::Tensor& images) {
    return model.forward(images);
  }
  // Stage 3 keeps only shards between steps: gather_full() brings every
  // parameter back (to evaluate, save or hash the model) until release_full().
  // Collective. The other stages hold every parameter: nothing to do.
  virtual void gather_full() {}
  virtual void release_full() {}
  // What the parameters took at most while training, so far (stage 3:
  // shards plus the layers gathered at the time, gather_full() not
  // counted); the other stages: held().parameters.
  virtual int64_t peak_parameter_bytes() const { return held().parameters; }

 protected:
  // Given: the optimizer's step, after clipping the shards' gradients when
  // ShardingOptions::max_grad_norm is set. The stages call it in place of
  // optimizer().step().
  void step_optimizer(workbook::Communicator& comm);

  int64_t frozen_parameter_bytes_ = 0;  // parameters no group holds: every rank keeps them whole
  double max_grad_norm_ = 0.0;          // ShardingOptions::max_grad_norm
};

// The bytes of `model`'s parameters that do not require a gradient.
int64_t frozen_parameter_bytes(torch::nn::Module& model);

// Stage 0: Chapter 3's DDP (the reference's all_reduce_gradients), the
// baseline every stage is compared with (given).
class ReplicatedOptimizer : public Sharding {
 public:
  ReplicatedOptimizer(torch::nn::Module& model, workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                      const ShardingOptions& options = {});
  void zero_grad() override { optimizer_->zero_grad(); }
  void step() override;
  HeldBytes held() const override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }

 private:
  torch::nn::Module& model_;
  workbook::Communicator& comm_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// ---- ex7.2: stage 1, the optimizer state sharded ----------------------------------

// One FlatGroup of every trainable parameter; the optimizer steps owned() only.
class OptimizerStateSharding : public Sharding {
 public:
  OptimizerStateSharding(torch::nn::Module& model, workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                         const ShardingOptions& options = {});
  void zero_grad() override;
  // ex7.2: reduce-scatter the gradients (averaged) into the group's
  // shard_gradient(), step the optimizer (step_optimizer(): it holds
  // owned(), whose .grad is a view of shard_gradient()), all-gather the
  // shards into flat(). Two collectives.
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
// own, padded and cut into N shards, so that its reduce-scatter can start the
// moment backward has produced its last gradient, and each rank keeps 1/N of
// each bucket. A bucket's full gradient lives only from its first hook to its
// reduce-scatter; then it is freed, and so is each parameter's .grad, which
// LibTorch fills beside it (1.13 has no hook after a gradient is accumulated
// into .grad: the .grad of a bucket's last parameter is freed with the next
// bucket, or in step()).
// Buckets are reduced strictly in index order, on every rank, as in Chapter 4.
class GradientSharding : public Sharding {
 public:
  GradientSharding(torch::nn::Module& model, workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                   const ShardingOptions& options = {});
  ~GradientSharding() override;
  void zero_grad() override;
  // ex7.3: called by parameter (bucket, index)'s hook with its gradient (tests
  // call it directly): copies it into the bucket's gradient buffer (allocated
  // at the bucket's first gradient); then reduces (reduce_bucket) every
  // complete bucket from next_to_reduce_ on, counting each in
  // reduced_from_hooks_, so that a bucket goes as soon as it and every bucket
  // before it are complete.
  void gradient_ready(size_t bucket, size_t index, const torch::Tensor& gradient);
  // ex7.3: reduces the buckets left (reduce_bucket: a parameter without a
  // gradient counts as zeros), steps the optimizer (step_optimizer()),
  // all-gathers every group's flat().
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
  // frees the buffer and the .grad of its parameters, advances next_to_reduce_.
  void reduce_bucket(size_t b);
  void note_gradient_bytes();  // tracks peak_gradient_bytes_

  void start_next_step();      // given: missing_, next_to_reduce_, the counters

  std::vector<std::unique_ptr<FlatGroup>> buckets_;
  workbook::Communicator& comm_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> owned_;           // bucket -> what the optimizer steps
  std::vector<torch::Tensor> buffers_;         // bucket -> its gradients as flat(), while it fills
  std::vector<size_t> missing_;                // bucket -> gradients still to arrive this step
  size_t next_to_reduce_ = 0;
  std::vector<std::pair<torch::Tensor, unsigned>> hooks_;  // (parameter, handle), removed on destruction
  size_t reduced_from_hooks_ = 0, last_reduced_from_hooks_ = 0;
  int64_t peak_gradient_bytes_ = 0;
};

// ---- ex7.5: stage 3, the parameters sharded too (FSDP) ------------------------------

// Note: [a stage-3 step] Between steps a rank keeps only its shard of each
// layer (kept()). In forward, each layer is gathered just before it runs and
// released right after; a hook on its output runs when backward reaches the
// layer (before the layer's own backward), and there the layers after it,
// whose backward is done, are finished (their gradients reduce-scattered,
// their memory released) and the layer is gathered again. step() finishes
// the first layer, and the optimizer steps kept(): nothing is all-gathered
// after the step, the next forward does it. Per step a rank sends 1.5 times
// what DDP sends: two all-gathers and a reduce-scatter, where DDP's ring is
// one of each.
// Note: [one order of collectives] Which collective comes next depends only
// on the layer backward has reached, never on which gradients arrived: a
// rank whose parameter got no gradient (a branch not taken) reduces zeros
// for it at the same point as a rank whose parameter did. Reducing a layer
// the moment its last gradient arrives would not be safe here, as it is in
// stage 2 (whose hooks only reduce-scatter): the all-gathers of the layers
// before it would interleave differently on different ranks. LibTorch runs
// a layer's AccumulateGrad steps (and so gradient_ready) before the next
// layer's backward, so the gradients of the layers after l have all arrived
// when layer l's hook runs. A parameter must belong to one layer, and be
// used only there.
class ParameterSharding : public Sharding {
 public:
  // `layers` in forward order; every trainable parameter of `model` in one of them.
  ParameterSharding(torch::nn::Module& model, std::vector<Layer> layers, workbook::Communicator& comm,
                    const MakeOptimizer& make_optimizer, const ShardingOptions& options = {});
  ~ParameterSharding() override;
  // ex7.5: for each layer in order: gather it, call it, release it, and (when
  // the output needs a gradient) hook its output: finish the layers after it,
  // then gather it again for its backward.
  torch::Tensor forward(workbook::Classifier& model, const torch::Tensor& images) override;
  // ex7.5: as stage 2's, with layers for buckets: copy the gradient into the
  // layer's buffer (created at its first gradient). No collective here:
  // Note [one order of collectives].
  void gradient_ready(size_t layer, size_t index, const torch::Tensor& gradient);
  // ex7.5: finish every layer left, step the optimizer (step_optimizer(comm_)).
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

// ---- ex7.4: norms of tensors that are split across ranks ---------------------------

// ex7.4: ‖·‖² of every parameter of a group, over all ranks: `owned` is this
// rank's owned() part of some per-element quantity laid out as flat() (the
// parameters, their gradients, an update); each rank sums the squares of its
// pieces, per parameter, and one all-reduce (sum) adds the ranks' partial
// sums. Returns float64 [number of parameters], the same on every rank.
// Collective.
torch::Tensor squared_norms_per_parameter(const Partition& partition, const torch::Tensor& owned,
                                          workbook::Communicator& comm);

// ex7.4: clipping by global norm, as torch::nn::utils::clip_grad_norm_ but on
// shards: ‖g‖ over every parameter of every group, from each rank's shard
// gradients; when it exceeds max_norm every shard gradient is scaled by
// max_norm / (‖g‖ + 1e-6). Returns ‖g‖ before clipping. Collective.
double clip_gradients_by_global_norm(const std::vector<FlatGroup*>& groups, double max_norm,
                                     workbook::Communicator& comm);

// LAMB (Chapter 6, ex6.3) on shards (given; uses ex7.4): the moments are
// kept for owned() only, and each parameter's trust ratio ‖w‖ / ‖u‖ comes from
// squared_norms_per_parameter, so a parameter split between ranks gets the
// ratio of the whole tensor. As Chapter 6's layer_adaptation_groups: tensors
// of one dimension get no weight decay and no trust ratio.
std::unique_ptr<torch::optim::Optimizer> make_sharded_lamb(const std::vector<FlatGroup*>& groups,
                                                           std::vector<torch::Tensor> owned,
                                                           workbook::Communicator& comm, ch06::LambOptions options);

// ---- for programs and tests (given) --------------------------------------------------

// Optimizers for any stage: Adam (LibTorch's own, on whatever tensors the
// stage hands it) and LAMB (Chapter 6's on the whole model at stage 0; on
// shards, make_sharded_lamb, at stages 1 to 3).
MakeOptimizer adam(double lr);
MakeOptimizer lamb(workbook::Communicator& comm, double lr);

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

// The elements each rank sends, had every collective been a ring
// (Chapter 4): all-reduce 2(N-1)/N per element, reduce-scatter and
// all-gather (N-1)/N of the full buffer each.
int64_t ring_elements_sent(const workbook::CommStats& stats, int world_size);

}  // namespace ch07
