// ddp.hpp — Chapter 3's API: a hand-written DistributedDataParallel, one
// process per rank, over the Communicator (workbook/communicator.hpp).
//
//   rank 0                 rank 1                 ...  rank N-1
//   model (seed 0)         model (seed 1)              model (seed N-1)
//      │   ex3.1 broadcast_model: everyone gets rank 0's model
//   shard 0 of the data    shard 1                     shard N-1     ex3.2 DistributedSampler
//   forward, backward      forward, backward           forward, backward
//      └───────── all_reduce_gradients (given): one all-reduce, the mean ───────┘
//   optimizer step         optimizer step              optimizer step  (identical: same grads)
//   ex3.3 replicas_disagree checks that they are; ex3.4 ddp_train_step is one
//   such step; ex3.5 evaluate_distributed counts every test sample once;
//   ex3.6 checkpoints survive a crash at any moment.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch03 {

// ---- ex3.1: one model on every rank --------------------------------------------

// Every rank's `model` becomes `root`'s: afterwards it computes, in training
// and in evaluation, bit for bit what root's computes, because everything it
// holds is root's. Collective: every rank calls it. Training goes on from it:
// an optimizer built over `model` before the call trains the broadcast model.
void broadcast_model(torch::nn::Module& model, workbook::Communicator& comm, int root = 0);

// ---- ex3.2: a shard of the data per rank ---------------------------------------

// As PyTorch's torch.utils.data.DistributedSampler defines it (the tests
// compare with PyTorch's own answers):
//  * The epoch's order: a permutation of 0..dataset_size-1 from a generator
//    seeded with seed + epoch (shuffle), or 0, 1, 2, ... (no shuffle). Every
//    rank computes the same order without communicating. (A generator of
//    your own: at::make_generator<at::CPUGeneratorImpl>, from
//    <ATen/CPUGeneratorImpl.h>; torch::randperm takes one.)
//  * Every rank gets the same number of indices. Without drop_last some
//    samples appear twice in an epoch so that every sample appears; with
//    drop_last none appears twice and a few are left out.
//  * Example, 10 samples, 4 replicas, order 7 2 9 0 5 1 8 3 6 4:
//      ranks 0..3 get  7 5 6 | 2 1 4 | 9 8 7 | 0 3 2
//      with drop_last  7 5   | 2 1   | 9 8   | 0 3
//    Any dataset_size >= 0 and num_replicas >= 1 must work, more replicas
//    than samples included.
class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  // Another epoch, another order (the same on every rank): call before each epoch.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // Samples this rank gets each epoch (every rank the same).
  int64_t num_samples() const;
  int64_t total_size() const { return num_samples() * num_replicas_; }  // over all ranks
  // This rank's sample indices for the current epoch: int64 [num_samples()].
  torch::Tensor indices() const;

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
};

// ---- averaging gradients (given; ex3.3 until 2026-11-30) ----------------------

// The gradients of every parameter that requires one, averaged over ranks,
// with ONE collective call per step however many parameters the model has
// (each call pays the link's latency once): the gradients copied into one
// flat buffer, all-reduced, copied back. A parameter that requires a
// gradient but got none this step counts as zeros (every rank must hand the
// collective the same elements); frozen parameters (requires_grad false) are
// left alone.
void all_reduce_gradients(torch::nn::Module& model, workbook::Communicator& comm);

// The same, with one all-reduce per parameter (the lesson measures both).
void all_reduce_gradients_per_parameter(torch::nn::Module& model, workbook::Communicator& comm);

// ---- ex3.3: do the replicas agree? ---------------------------------------------

// DDP rests on the invariant in the picture above: every rank holds the same
// model after every step. Nothing enforces it. A rank that missed a
// broadcast, loaded another checkpoint or ran a kernel that is not
// deterministic trains on, and its loss looks like the others'.
//
//   rank 0:  conv1.weight  conv1.bias  bn1.weight  ...  bn1.running_mean  ...
//   rank 1:  conv1.weight  conv1.bias  bn1.weight  ...  bn1.running_mean' ...
//   both return {"bn1.running_mean"}
//
// Returns the names (as named_parameters() and named_buffers() give them) of
// the tensors that are not the same on every rank of `comm`: the parameters
// first (frozen ones too), then the buffers, each in the model's order. Empty
// when the replicas agree.
// - Every rank returns the same list, so that the ranks can act on it together.
// - "The same" means bit for bit: 0.0 and -0.0 differ, and a NaN agrees with
//   the same NaN. A check that a difference can pass only by chance, once in
//   2^64 or less, counts as exact.
// - A fixed number of collective calls, whatever the number of tensors, each
//   carrying a few numbers per tensor and never the tensors themselves:
//   checking a billion weights moves no more than checking a thousand.
// - Collective: every rank calls it, with models of the same tensors (names,
//   shapes, dtypes) in the same order. Gradients and optimizer state are not
//   checked.
// BEGIN SOLUTION NOTE ex3.3
// Each tensor's bytes hashed to 64 bits; one all-reduce (Max) of the hashes
// and their complements gives every rank each tensor's largest and smallest
// hash: the ranks agree where the two are equal.
// END SOLUTION NOTE
std::vector<std::string> replicas_disagree(torch::nn::Module& model, workbook::Communicator& comm);

// ---- ex3.4: the DDP train step -------------------------------------------------

struct Batch {
  torch::Tensor images;     // [B, 1, 28, 28]: this rank's part of the global batch (B may be 0)
  torch::Tensor labels;     // [B] int64
  int64_t global_size = 0;  // samples in the global batch, over every rank; 0: every rank's B is this one's
};

// The samples `indices[first .. first + count)` of a dataset, as a batch (given).
Batch gather_batch(const torch::Tensor& images, const torch::Tensor& labels, const torch::Tensor& indices,
                   int64_t first, int64_t count);

// One data-parallel training step on this rank's batch, with the loss the
// workbook trains on (the mean cross-entropy over the batch). The ranks'
// batches may differ in size, and a rank's may be empty; together they are
// the global batch of global_size samples. What must hold afterwards: every
// rank's parameters are equal, and equal to what one process would have
// after one step of the same optimizer on the global batch, step after
// step. One collective call per step. Returns this rank's mean
// cross-entropy on its own batch (0 for an empty one), with no graph
// attached.
// BEGIN SOLUTION NOTE ex3.4
// Zero the gradients; forward and the summed cross-entropy, back-propagated
// times ranks / global_size (an empty part skips both); average the
// gradients over ranks (all_reduce_gradients); step. The average's division
// by ranks then leaves the sum over every sample over global_size.
// END SOLUTION NOTE
torch::Tensor ddp_train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                             const Batch& local_batch, workbook::Communicator& comm);

// ---- ex3.5: exact distributed evaluation ---------------------------------------

struct EvalResult {
  int64_t correct = 0;     // over the whole set, every sample counted once
  int64_t total = 0;       // = the number of samples in the set
  double mean_loss = 0.0;  // cross-entropy summed over all samples / total
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total); }
};

// Evaluates `model` (eval mode, no autograd; its mode restored afterwards)
// on the whole of images/labels, each rank on its own share — every sample
// on exactly one rank, no padding (a padded sampler would count some twice)
// — in batches of `batch_size`, then sums the counts over ranks. Every rank
// returns the same result, exactly the single-process one. More ranks than
// samples must work: a rank with no samples still joins the sums.
EvalResult evaluate_distributed(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                                int64_t batch_size, workbook::Communicator& comm);

// ---- ex3.6: checkpoints --------------------------------------------------------

// Saves the model (all it holds), the optimizer state and `epochs_done` to
// `path`, one file (LibTorch's torch::serialize::OutputArchive holds tensors
// and nested archives by name; modules and optimizers save into one).
// Every rank holds the same state; rank 0 alone writes to the file system,
// and the other ranks' `path` may be one they cannot write. Collective.
//  * At every moment, whatever stops the program (a crash, a killed job, a
//    full disk), `path` holds a whole checkpoint: the one it held before, or
//    the new one; never a mixture or a part.
//  * When it returns on any rank, every rank can load the new checkpoint,
//    and nothing but it is left of the save in `path`'s directory.
void save_checkpoint(const std::filesystem::path& path, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                     int64_t epochs_done, workbook::Communicator& comm);

// Reads a checkpoint written by save_checkpoint into `model` and `optimizer`
// (same architecture, same optimizer type); returns its epochs_done. A missing
// or unreadable file is a UserError naming it. Not collective.
int64_t load_checkpoint(const std::filesystem::path& path, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer);

}  // namespace ch03
