// sharding_oracles.hpp — what Chapter 7's tests compare with: a partition
// computed element by element, a small model with a frozen and an unused
// parameter, and Chapter 3's DDP (stage 0) trained on the same batches.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "sharding.hpp"

namespace sharding_oracle {

// The partition, the slow way: every element of the padded buffer belongs
// to rank element / shard_numel; runs of one parameter's elements in this
// rank's shard become pieces. Independent of ex7.1, so the tests of ex7.2 to
// ex7.4 use it to build their groups.
inline ch07::Partition partition(const std::vector<int64_t>& sizes, int world_size, int rank) {
  ch07::Partition p;
  p.world_size = world_size;
  p.rank = rank;
  for (int64_t size : sizes) {
    p.offsets.push_back(p.numel);
    p.sizes.push_back(size);
    p.numel += size;
  }
  p.padded_numel = p.numel;
  while (p.padded_numel % world_size != 0) ++p.padded_numel;
  p.shard_numel = p.padded_numel / world_size;
  for (size_t i = 0; i < sizes.size(); ++i)
    for (int64_t e = 0; e < sizes[i]; ++e) {
      const int64_t flat = p.offsets[i] + e;
      if (flat / std::max<int64_t>(p.shard_numel, 1) != rank) continue;
      const int64_t in_shard = flat - p.shard_begin();
      if (!p.pieces.empty() && p.pieces.back().parameter == i &&
          p.pieces.back().shard_offset + p.pieces.back().count == in_shard)
        ++p.pieces.back().count;
      else
        p.pieces.push_back({i, e, in_shard, 1});
    }
  return p;
}

// Sharding options whose partition is the oracle's, not ex7.1's: for the
// tests of a later exercise, which must not depend on ex7.1.
inline ch07::ShardingOptions oracle_partition() {
  ch07::ShardingOptions options;
  options.partition = partition;
  return options;
}

// fc(784→12) → ReLU → fc(12→10), with fc1's bias frozen and a parameter
// `unused` (6 elements) that forward never touches: it gets no gradient.
// parameters() lists a module's own parameters before its children's, so
// the order is unused, fc1.weight, fc1.bias (frozen), fc2.weight, fc2.bias.
// Trainable: 9408 + 6 + 120 + 10 = 9544 elements: 2 ranks split fc1.weight
// (shards of 4772: fc1.weight's element 4766, in its row 6); 3 ranks do not divide it (9546 padded, shards of 3182).
struct ToyNet : workbook::Classifier {
  ToyNet() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 12));
    unused = register_parameter("unused", torch::randn({6}));
    fc2 = register_module("fc2", torch::nn::Linear(12, 10));
    fc1->bias.set_requires_grad(false);
  }
  torch::Tensor forward(torch::Tensor images) override {
    return fc2->forward(torch::relu(fc1->forward(images.reshape({images.size(0), -1}))));
  }
  std::shared_ptr<workbook::Classifier> fresh() const override { return std::make_shared<ToyNet>(); }
  // Stage 3's view of it: two layers; `unused` in the first.
  std::vector<ch07::Layer> layers() {
    return {{"fc1", {fc1->weight, fc1->bias, unused},
             [this](const torch::Tensor& x) { return torch::relu(fc1->forward(x.reshape({x.size(0), -1}))); }},
            {"fc2", fc2->parameters(), [this](const torch::Tensor& x) { return fc2->forward(x); }}};
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor unused;
};

// The same weights on every rank, and in every call.
inline std::shared_ptr<ToyNet> toy_model() {
  torch::manual_seed(11);
  return std::make_shared<ToyNet>();
}

struct Batches {
  std::vector<torch::Tensor> images, labels;  // global batches, the same on every rank
};
inline Batches global_batches(int steps, int64_t global_batch) {
  torch::manual_seed(2024);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    b.images.push_back(torch::rand({global_batch, 1, 28, 28}));
    b.labels.push_back(torch::randint(0, 10, {global_batch}, torch::kInt64));
  }
  return b;
}

// `steps` steps of `sharding` on this rank's slice of each global batch.
inline void train(ToyNet& model, ch07::Sharding& sharding, const Batches& batches, workbook::Communicator& comm) {
  for (size_t s = 0; s < batches.images.size(); ++s) {
    const int64_t local = batches.images[s].size(0) / comm.size();
    sharding.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        sharding.forward(model, batches.images[s].narrow(0, comm.rank() * local, local)),
        batches.labels[s].narrow(0, comm.rank() * local, local));
    loss.backward();
    sharding.step();
  }
}

inline ch07::MakeOptimizer sgd(double lr) {
  return [lr](const std::vector<ch07::FlatGroup*>&, std::vector<torch::Tensor> tensors) {
    return std::make_unique<torch::optim::SGD>(std::move(tensors), torch::optim::SGDOptions(lr));
  };
}

// Every parameter of `model`, flattened into one tensor.
inline torch::Tensor weights(torch::nn::Module& model) {
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& p : model.parameters()) flat.push_back(p.detach().reshape({-1}));
  return torch::cat(flat);
}

inline double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// The ranks' largest weight differences between two models, added up: 0
// only when every rank's models are equal, and below a tolerance only when
// every rank's difference is. The same on every rank. Collective.
inline double difference_on_all_ranks(torch::nn::Module& a, torch::nn::Module& b, workbook::Communicator& comm) {
  torch::Tensor difference = torch::full({1}, max_difference(weights(a), weights(b)), torch::kFloat64);
  comm.all_reduce(difference, workbook::ReduceOp::Sum);
  return difference.item<double>();
}

}  // namespace sharding_oracle
