// flat_group.cpp — given: a group of parameters in one flat buffer, stage 0
// (Chapter 3's DDP, the baseline), and what the stages count.
#include "sharding.hpp"

#include "ddp.hpp"  // Chapter 3's reference: all_reduce_gradients
#include "workbook/errors.hpp"

namespace ch07 {

FlatGroup::FlatGroup(std::vector<torch::Tensor> parameters, int world_size, int rank, const PartitionFn& partition)
    : parameters_(std::move(parameters)) {
  WB_ASSERT(!parameters_.empty(), "a FlatGroup needs parameters");
  std::vector<int64_t> sizes;
  for (const torch::Tensor& p : parameters_) {
    WB_ASSERT(p.requires_grad(), "a FlatGroup holds trainable parameters only");
    WB_ASSERT(p.scalar_type() == parameters_[0].scalar_type() && p.device() == parameters_[0].device(),
              "every parameter of a FlatGroup must share one dtype and device");
    sizes.push_back(p.numel());
  }
  partition_ = partition(sizes, world_size, rank);
  WB_ASSERT(partition_.sizes == sizes && partition_.padded_numel == partition_.shard_numel * world_size &&
                partition_.padded_numel >= partition_.numel,
            "the partition does not describe these {} parameters on {} ranks", sizes.size(), world_size);
  const torch::TensorOptions options = torch::TensorOptions().dtype(parameters_[0].dtype()).device(parameters_[0].device());
  flat_ = torch::zeros({partition_.padded_numel}, options);
  shard_gradient_ = torch::zeros({partition_.shard_numel}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor view = flat_.narrow(0, partition_.offsets[i], partition_.sizes[i]);
    view.copy_(parameters_[i].reshape({-1}));
    parameters_[i].set_data(view.view_as(parameters_[i]));  // Note: [parameters as views]
  }
}

namespace {

// Note: [freeing a layer's parameters] (sharding.hpp): the storage keeps its
// identity, and with it every view of it; only its memory goes and comes back.
void resize_storage(const torch::Tensor& tensor, int64_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(static_cast<size_t>(bytes)));
  storage->set_nbytes(static_cast<size_t>(bytes));
}

}  // namespace

void FlatGroup::keep_shard_only() {
  WB_ASSERT(gathered_, "keep_shard_only() reads flat(): gather() first");
  if (kept_.defined())
    kept_.copy_(shard());  // in place: the optimizer holds a view of it
  else
    kept_ = shard().clone();
  release();
}

void FlatGroup::gather(workbook::Communicator& comm) {
  WB_ASSERT(kept_.defined(), "gather() before keep_shard_only()");
  if (gathered_) return;
  resize_storage(flat_, flat_.numel() * flat_.element_size());
  comm.all_gather(kept_, flat_);
  gathered_ = true;
}

void FlatGroup::release() {
  WB_ASSERT(kept_.defined(), "release() before keep_shard_only()");
  if (!gathered_) return;
  resize_storage(flat_, 0);
  gathered_ = false;
}

torch::Tensor FlatGroup::shard() const { return flat_.narrow(0, partition_.shard_begin(), partition_.shard_numel); }

torch::Tensor FlatGroup::owned() const { return flat_.narrow(0, partition_.shard_begin(), partition_.owned_numel()); }

// Note: [the gradients copied in one call] One _foreach_copy_ for all of
// them, not a copy_ each: on a GPU, where each copy_ is a kernel launched
// (52 a step in Chapter 11's GPT, chapters/11_gpt/results_bench.md), ATen copies
// a list of same-typed tensors with multi-tensor kernels, each launch
// covering many; on a CPU it makes the same copies one by one. Not yet
// measured on a GPU.
torch::Tensor FlatGroup::gather_gradients() const {
  torch::Tensor gradients = torch::zeros_like(flat_);
  std::vector<torch::Tensor> into, from;
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (parameters_[i].grad().defined()) {
      into.push_back(gradients.narrow(0, partition_.offsets[i], partition_.sizes[i]));
      from.push_back(parameters_[i].grad().reshape({-1}));
    }
  if (!into.empty()) at::_foreach_copy_(into, from);
  return gradients;
}

std::vector<torch::Tensor> trainable_parameters(torch::nn::Module& model) {
  std::vector<torch::Tensor> trainable;
  for (const torch::Tensor& p : model.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  return trainable;
}

int64_t frozen_parameter_bytes(torch::nn::Module& model) {
  int64_t bytes = 0;
  for (const torch::Tensor& p : model.parameters())
    if (!p.requires_grad()) bytes += p.numel() * p.element_size();
  return bytes;
}

int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state.get())) {
      for (const torch::Tensor& t : {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()})
        if (t.defined()) bytes += t.numel() * t.element_size();
    } else if (auto* lamb = dynamic_cast<ch06::LambParamState*>(state.get())) {
      for (const torch::Tensor& t : {lamb->exp_avg(), lamb->exp_avg_sq()})
        if (t.defined()) bytes += t.numel() * t.element_size();
    } else {
      WB_ASSERT(false, "optimizer_state_bytes: an optimizer state this chapter does not know");
    }
  }
  return bytes;
}

int64_t ring_elements_sent(const workbook::CommStats& stats, int world_size) {
  using workbook::CommOp;
  const int64_t n = world_size;
  // all_reduce counts the buffer; reduce_scatter and all_gather count one rank's chunk.
  return 2 * (n - 1) * stats.elements[static_cast<int>(CommOp::AllReduce)] / n +
         (n - 1) * (stats.elements[static_cast<int>(CommOp::ReduceScatter)] +
                    stats.elements[static_cast<int>(CommOp::AllGather)]);
}

namespace {
int64_t bytes_of(const torch::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }
}  // namespace

// ---- stage 0 -----------------------------------------------------------------------

ReplicatedOptimizer::ReplicatedOptimizer(torch::nn::Module& model, workbook::Communicator& comm,
                                         const MakeOptimizer& make_optimizer, const ShardingOptions& options)
    : model_(model), comm_(comm), parameters_(trainable_parameters(model)),
      optimizer_(make_optimizer({}, parameters_)) {
  max_grad_norm_ = options.max_grad_norm;
}

void ReplicatedOptimizer::step() {
  ch03::all_reduce_gradients(model_, comm_);
  if (max_grad_norm_ > 0) torch::nn::utils::clip_grad_norm_(parameters_, max_grad_norm_);
  optimizer_->step();
}

void Sharding::step_optimizer(workbook::Communicator& comm) {
  if (max_grad_norm_ > 0) clip_gradients_by_global_norm(groups(), max_grad_norm_, comm);
  optimizer().step();
}

HeldBytes ReplicatedOptimizer::held() const {
  HeldBytes held;
  for (const torch::Tensor& p : model_.parameters()) {
    held.parameters += bytes_of(p);
    held.gradients += bytes_of(p.grad());
  }
  held.optimizer_state = optimizer_state_bytes(*optimizer_);
  return held;
}

std::vector<Layer> fashion_cnn_layers(workbook::FashionCNN& model) {
  workbook::FashionCNN* m = &model;
  const auto children = model.named_children();
  auto forward_of = [](auto call) { return std::function<torch::Tensor(const torch::Tensor&)>(call); };
  return {
      {"conv1", m->conv1->parameters(), forward_of([m](const torch::Tensor& x) { return m->conv1(x); })},
      {"bn1", children["bn1"]->parameters(), forward_of([m](const torch::Tensor& x) {
         return torch::max_pool2d(torch::relu(m->normalize("bn1", x)), 2);
       })},
      {"conv2", m->conv2->parameters(), forward_of([m](const torch::Tensor& x) { return m->conv2(x); })},
      {"bn2", children["bn2"]->parameters(), forward_of([m](const torch::Tensor& x) {
         return torch::max_pool2d(torch::relu(m->normalize("bn2", x)), 2).flatten(1);
       })},
      {"fc1", m->fc1->parameters(), forward_of([m](const torch::Tensor& x) { return m->dropout(m->fc1(x)); })},
      {"fc2", m->fc2->parameters(), forward_of([m](const torch::Tensor& x) { return m->fc2(x); })},
      {"fc3", m->fc3->parameters(), forward_of([m](const torch::Tensor& x) { return m->fc3(x); })},
  };
}

// ---- for programs and tests ---------------------------------------------------------

MakeOptimizer adam(double lr) {
  return [lr](const std::vector<FlatGroup*>&, std::vector<torch::Tensor> tensors) {
    return std::make_unique<torch::optim::Adam>(std::move(tensors), torch::optim::AdamOptions(lr));
  };
}

MakeOptimizer lamb(workbook::Communicator& comm, double lr) {
  return [&comm, lr](const std::vector<FlatGroup*>& groups,
                     std::vector<torch::Tensor> tensors) -> std::unique_ptr<torch::optim::Optimizer> {
    if (groups.empty()) {  // stage 0: whole tensors, grouped as Chapter 6's layer_adaptation_groups does
      std::vector<torch::Tensor> adapted, excluded;
      for (const torch::Tensor& p : tensors) (p.dim() > 1 ? adapted : excluded).push_back(p);
      ch06::LambOptions excluded_options(lr);
      excluded_options.weight_decay(0.0).adapt(false);
      std::vector<torch::optim::OptimizerParamGroup> param_groups;
      if (!adapted.empty()) param_groups.emplace_back(adapted, std::make_unique<ch06::LambOptions>(lr));
      if (!excluded.empty()) param_groups.emplace_back(excluded, std::make_unique<ch06::LambOptions>(excluded_options));
      return std::make_unique<ch06::Lamb>(std::move(param_groups), ch06::LambOptions(lr));
    }
    return make_sharded_lamb(groups, std::move(tensors), comm, ch06::LambOptions(lr));
  };
}

std::unique_ptr<Sharding> make_sharding(int stage, torch::nn::Module& model, workbook::Communicator& comm,
                                        const MakeOptimizer& make_optimizer, const ShardingOptions& options) {
  switch (stage) {
    case 0: return std::make_unique<ReplicatedOptimizer>(model, comm, make_optimizer, options);
    case 1: return std::make_unique<OptimizerStateSharding>(model, comm, make_optimizer, options);
    case 2: return std::make_unique<GradientSharding>(model, comm, make_optimizer, options);
    case 3: {
      std::vector<Layer> layers = options.layers;
      if (layers.empty()) {
        auto* cnn = dynamic_cast<workbook::FashionCNN*>(&model);
        WB_CHECK(cnn, "stage 3 needs the model's layers (ShardingOptions::layers): only FashionCNN's are known");
        layers = fashion_cnn_layers(*cnn);
      }
      return std::make_unique<ParameterSharding>(model, std::move(layers), comm, make_optimizer, options);
    }
  }
  throw workbook::UserError(fmt::format("--stage {}: the stages are 0 (DDP), 1, 2 and 3", stage));
}

}  // namespace ch07
