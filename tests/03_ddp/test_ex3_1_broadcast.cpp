// Tests for ex3.1: broadcast_model makes every rank's model the root's.
#include "catch2_compat.hpp"

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

// What `model` holds, flattened into one float64 tensor.
torch::Tensor flat_state(torch::nn::Module& model) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : model.parameters()) parts.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
  for (const auto& t : model.buffers()) parts.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
  return torch::cat(parts);
}

// A FashionCNN that differs on every rank: built from a per-rank seed, then
// run forward in training mode on a few batches of its own, as a rank that
// trained apart would have been.
std::shared_ptr<workbook::FashionCNN> model_for_rank(int rank) {
  torch::manual_seed(1000 + static_cast<uint64_t>(rank));
  auto model = std::make_shared<workbook::FashionCNN>();
  torch::NoGradGuard no_grad;
  model->train();
  for (int batch = 0; batch < 3; ++batch) model->forward(torch::randn({8, 1, 28, 28}) * (1.0 + rank));
  return model;
}

// The name of the first tensor the model holds that differs from `other`'s, or "".
std::string first_difference(torch::nn::Module& model, torch::nn::Module& other) {
  auto mine = model.named_parameters();
  auto theirs = other.named_parameters();
  for (const auto& item : mine)
    if (!torch::equal(item.value(), theirs[item.key()])) return item.key();
  auto my_buffers = model.named_buffers();
  auto their_buffers = other.named_buffers();
  for (const auto& item : my_buffers)
    if (!torch::equal(item.value(), their_buffers[item.key()])) return item.key();
  return "";
}

// One SGD step on a fixed batch, dropout drawn from a fixed seed.
void train_one_step(workbook::FashionCNN& model, torch::optim::Optimizer& optimizer) {
  torch::manual_seed(77);
  const torch::Tensor images = torch::randn({8, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {8});
  model.train();
  optimizer.zero_grad();
  torch::nn::functional::cross_entropy(model.forward(images), labels).backward();
  optimizer.step();
}

}  // namespace

TEST_CASE("ex3.1 after broadcast_model every rank's model is the root's", "[ex3.1][np3]") {
  auto comm = mpi_test::communicator();
  const torch::Tensor images = torch::randn({16, 1, 28, 28}, torch::TensorOptions().dtype(torch::kFloat32));
  for (int root : {0, comm->size() - 1}) {
    CAPTURE(root);
    auto model = model_for_rank(comm->rank());
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));  // built before the call
    auto roots = model_for_rank(root);
    torch::optim::SGD roots_optimizer(roots->parameters(), torch::optim::SGDOptions(0.1));
    ch03::broadcast_model(*model, *comm, root);

    const std::string differs = first_difference(*model, *roots);
    INFO("after broadcast_model(root " << root << "), this rank's model holds a tensor that differs from the "
         "root's: '" << differs << "'");
    REQUIRE(mpi_test::all_ranks(differs.empty()));

    model->eval();
    roots->eval();
    torch::NoGradGuard no_grad_for_evaluation;
    const bool same_in_evaluation = torch::equal(model->forward(images), roots->forward(images));
    INFO("after broadcast_model(root " << root << "), this rank's model in eval mode computes something other "
         "than the root's");
    REQUIRE(mpi_test::all_ranks(same_in_evaluation));
  }
}

TEST_CASE("ex3.1 an optimizer built before broadcast_model trains the broadcast model", "[ex3.1][np3]") {
  auto comm = mpi_test::communicator();
  const int root = comm->size() - 1;
  auto model = model_for_rank(comm->rank());
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  ch03::broadcast_model(*model, *comm, root);
  bool every_parameter_trains = true;
  for (const auto& p : model->parameters()) every_parameter_trains = every_parameter_trains && p.requires_grad();
  INFO("after broadcast_model, a parameter of the model no longer requires a gradient: training would not move it");
  REQUIRE(mpi_test::all_ranks(every_parameter_trains));

  // The root's model, trained by its own optimizer: what every rank's step must give.
  auto roots = model_for_rank(root);
  torch::optim::SGD roots_optimizer(roots->parameters(), torch::optim::SGDOptions(0.1));
  train_one_step(*roots, roots_optimizer);
  train_one_step(*model, optimizer);
  const std::string differs = first_difference(*model, *roots);
  INFO("after broadcast_model and one step of an optimizer built before it, the model differs from the root's "
       "model after the same step ('" << differs << "'): the step did not train the broadcast model");
  REQUIRE(mpi_test::all_ranks(differs.empty()));
}

TEST_CASE("ex3.1 ranks seeded differently really differ before the broadcast", "[ex3.1]") {
  // The test above would prove nothing if every rank built the same model.
  auto comm = mpi_test::communicator();
  auto model = model_for_rank(comm->rank());
  const torch::Tensor mine = flat_state(*model);
  const torch::Tensor all = comm->all_gather(mine);
  if (comm->size() > 1) REQUIRE_FALSE(torch::equal(all[0], all[1]));
  ch03::broadcast_model(*model, *comm, 0);
  REQUIRE(mpi_test::all_ranks(torch::equal(flat_state(*model), all[0])));
}
