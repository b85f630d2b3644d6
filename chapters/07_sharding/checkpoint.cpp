// checkpoint.cpp — given: sharded optimizer state saved as one consolidated,
// stage- and world-size-independent checkpoint, and cut into shards again
// on load (Note [a checkpoint of shards is a checkpoint of DDP]).
#include "sharding.hpp"

#include <map>

#include "ddp.hpp"  // Chapter 3's reference: save_checkpoint, load_checkpoint
#include "workbook/errors.hpp"
#include "workbook/torch_compat.hpp"

namespace ch07 {
namespace {

workbook::torch_compat::OptimizerStateKey key_of(const torch::Tensor& tensor) {
  return workbook::torch_compat::optimizer_state_key(tensor);
}

// The tensors of a state this chapter's optimizers keep, in a fixed order,
// and its step count.
std::vector<torch::Tensor*> state_tensors(torch::optim::OptimizerParamState& state) {
  if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(&state)) {
    std::vector<torch::Tensor*> tensors = {&adam->exp_avg(), &adam->exp_avg_sq()};
    if (adam->max_exp_avg_sq().defined()) tensors.push_back(&adam->max_exp_avg_sq());
    return tensors;
  }
  if (auto* lamb = dynamic_cast<ch06::LambParamState*>(&state)) return {&lamb->exp_avg(), &lamb->exp_avg_sq()};
  WB_ASSERT(false, "an optimizer state this chapter does not know");
  return {};
}
int64_t step_of(torch::optim::OptimizerParamState& state) {
  if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(&state)) return adam->step();
  return dynamic_cast<ch06::LambParamState&>(state).step();
}

using States = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;  // LibTorch's own map

// For every parameter of every group: its state, cut out of the group's
// owned state gathered from every rank. Collective.
void consolidate(Sharding& sharding, States& full, workbook::Communicator& comm) {
  const std::vector<FlatGroup*> groups = sharding.groups();
  auto& owned = sharding.optimizer().param_groups()[0].params();
  WB_ASSERT(owned.size() == groups.size(), "one owned tensor per group");
  for (size_t g = 0; g < groups.size(); ++g) {
    const Partition& partition = groups[g]->partition();
    auto found = sharding.optimizer().state().find(key_of(owned[g]));
    // Every rank has stepped every group, or none has (a checkpoint before the first step).
    if (found == sharding.optimizer().state().end()) continue;
    torch::optim::OptimizerParamState& shard_state = *found->second;
    std::vector<torch::Tensor> gathered;
    for (torch::Tensor* tensor : state_tensors(shard_state)) {
      torch::Tensor padded = torch::zeros({partition.shard_numel}, tensor->options());
      padded.narrow(0, 0, tensor->numel()).copy_(*tensor);
      torch::Tensor everything = torch::empty({partition.padded_numel}, tensor->options());
      comm.all_gather(padded, everything);
      gathered.push_back(everything);
    }
    for (size_t i = 0; i < groups[g]->parameters().size(); ++i) {
      const torch::Tensor& p = groups[g]->parameters()[i];
      std::unique_ptr<torch::optim::OptimizerParamState> state = shard_state.clone();
      std::vector<torch::Tensor*> tensors = state_tensors(*state);
      for (size_t t = 0; t < tensors.size(); ++t)
        *tensors[t] = gathered[t].narrow(0, partition.offsets[i], partition.sizes[i]).view_as(p).clone();
      full[key_of(p)] = std::move(state);
    }
  }
}

// The reverse: each group's owned state, from the parameters' states.
// `full_parameters[i]` holds the state of the model's trainable parameter i.
// Decided from the whole group (the same file on every rank), so that every
// rank installs a state for every group, or none does: a rank whose shard
// is all padding gets an empty one, and consolidate() finds the same groups
// stepped on every rank.
void distribute(const States& full, Sharding& sharding, torch::nn::Module& model,
                const std::vector<torch::Tensor>& full_parameters) {
  std::map<const void*, size_t> index_in_model;
  for (const torch::Tensor& p : trainable_parameters(model)) index_in_model[p.unsafeGetTensorImpl()] = index_in_model.size();
  const std::vector<FlatGroup*> groups = sharding.groups();
  auto& owned = sharding.optimizer().param_groups()[0].params();
  for (size_t g = 0; g < groups.size(); ++g) {
    const Partition& partition = groups[g]->partition();
    std::vector<torch::optim::OptimizerParamState*> of_parameter;  // null: no state in the file
    torch::optim::OptimizerParamState* any = nullptr;
    for (const torch::Tensor& p : groups[g]->parameters()) {
      auto found = full.find(key_of(full_parameters[index_in_model.at(p.unsafeGetTensorImpl())]));
      of_parameter.push_back(found == full.end() ? nullptr : found->second.get());
      if (found != full.end()) {
        WB_CHECK(!any || step_of(*any) == step_of(*found->second),
                 "the checkpoint's parameters were stepped different numbers of times ({} and {}): a sharded "
                 "optimizer keeps one count per group", step_of(*any), step_of(*found->second));
        any = found->second.get();
      }
    }
    if (!any) continue;  // never stepped
    std::unique_ptr<torch::optim::OptimizerParamState> state = any->clone();
    std::vector<torch::Tensor*> tensors = state_tensors(*state);
    for (size_t t = 0; t < tensors.size(); ++t) {
      std::vector<torch::Tensor> pieces = {torch::zeros({0}, tensors[t]->options())};
      for (const ShardPiece& piece : partition.pieces) {
        torch::optim::OptimizerParamState* from = of_parameter[piece.parameter];
        pieces.push_back(from ? state_tensors(*from)[t]->reshape({-1}).narrow(0, piece.parameter_offset, piece.count)
                              : torch::zeros({piece.count}, tensors[t]->options()));  // never stepped: zeros
      }
      *tensors[t] = torch::cat(pieces).to(owned[g].device());
    }
    sharding.optimizer().state()[key_of(owned[g])] = std::move(state);
  }
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, workbook::Classifier& model, Sharding& sharding,
                     const MakeOptimizer& make_optimizer, int64_t epochs_done, workbook::Communicator& comm) {
  sharding.gather_full();  // stage 3: the whole model, to write it
  if (sharding.groups().empty()) {  // stage 0: the optimizer is already stage 0's
    ch03::save_checkpoint(path, model, sharding.optimizer(), epochs_done, comm);
  } else {
    const std::vector<torch::Tensor> parameters = trainable_parameters(model);
    std::unique_ptr<torch::optim::Optimizer> full = make_optimizer({}, parameters);
    consolidate(sharding, full->state(), comm);
    ch03::save_checkpoint(path, model, *full, epochs_done, comm);
  }
  sharding.release_full();
}

int64_t load_checkpoint(const std::filesystem::path& path, workbook::Classifier& model, Sharding& sharding,
                        const MakeOptimizer& make_optimizer, workbook::Communicator& comm) {
  // LibTorch's load replaces a parameter's storage (Tensor::set_), which
  // would cut the parameters loose from their flat buffer: load into a copy
  // of the model, then copy its values into the model's views.
  std::shared_ptr<workbook::Classifier> copy = model.fresh();
  copy->to(comm.device());
  auto mine = model.parameters();
  auto theirs = copy->parameters();
  for (size_t i = 0; i < mine.size(); ++i) theirs[i].set_requires_grad(mine[i].requires_grad());
  const std::vector<torch::Tensor> parameters = trainable_parameters(*copy);
  std::unique_ptr<torch::optim::Optimizer> full = make_optimizer({}, parameters);
  int64_t epochs_done = 0;
  try {
    epochs_done = ch03::load_checkpoint(path, *copy, *full);
  } catch (const workbook::UserError& e) {
    throw workbook::UserError(fmt::format("{}\n(a checkpoint of ch07_train holds the model and its optimizer's "
                                          "state: was it saved with another --optimizer?)", e.what()));
  }
  sharding.gather_full();
  workbook::copy_state(*copy, model);
  if (sharding.groups().empty()) {  // stage 0: the state of each parameter, as it is
    const std::vector<torch::Tensor> own = trainable_parameters(model);
    for (size_t i = 0; i < own.size(); ++i) {
      auto found = full->state().find(key_of(parameters[i]));
      if (found != full->state().end()) sharding.optimizer().state()[key_of(own[i])] = found->second->clone();
    }
  } else {
    distribute(full->state(), sharding, model, parameters);
    for (FlatGroup* group : sharding.groups())
      if (group->kept().defined()) group->keep_shard_only();  // stage 3: the loaded values become the kept shard
  }
  sharding.release_full();
  return epochs_done;
}

}  // namespace ch07
