// flat_group.hpp — Chapter 7: where a group of parameters lies in one flat,
// padded buffer and which part of it a rank owns (ex7.1), and the given
// FlatGroup that makes the parameters views into that buffer.
//
// One flat buffer per group of parameters, padded to a multiple of N, cut
// into N contiguous shards of equal length:
//
//   flat   [ conv1.weight | conv1.bias | ... | fc1.weight .......... | fc3.bias | pad ]
//          [      rank 0's shard       |      rank 1's shard        ]
//                                          fc1.weight is split: two ranks hold a piece each
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

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
  int64_t padded_numel = 0;      // the buffer's length: world_size equal shards hold every
                                 // element, with as little padding as can be
  int64_t shard_numel = 0;       // every shard's length
  // The parameters' parts in this rank's shard [rank x shard_numel, (rank + 1) x shard_numel),
  // in order; padding is in no piece. A rank whose shard is all padding has none.
  std::vector<ShardPiece> pieces;

  int64_t shard_begin() const { return rank * shard_numel; }
  // The elements of this rank's shard that are parameters, not padding: they
  // come first in the shard (padding is only at the end of the flat buffer).
  int64_t owned_numel() const;
};

// ex7.1: the layout of parameters with these element counts, in this order,
// for `rank` of `world_size` (no elements: no padding either). The tests try 1 to 5 ranks with a
// count they do not divide, a parameter split across every shard, an empty
// parameter, no parameters at all, and fewer elements than ranks (shards that
// are all padding).
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

}  // namespace ch07
