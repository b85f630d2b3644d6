// Tests for ex3.1: broadcast_model makes every rank's model the root's.
#include "catch2_compat.hpp"

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

// Every parameter and buffer of `model`, flattened into one float64 tensor.
torch::Tensor flat_state(torch::nn::Module& model) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : model.parameters()) parts.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
  for (const auto& t : model.buffers()) parts.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
  return torch::cat(parts);
}

// A FashionCNN that differs on every rank: weights from a per-rank seed, and
// BatchNorm running statistics that say which rank they came from.
std::shared_ptr<workbook::FashionCNN> model_for_rank(int rank) {
  torch::manual_seed(1000 + static_cast<uint64_t>(rank));
  auto model = std::make_shared<workbook::FashionCNN>();
  torch::NoGradGuard no_grad;
  model->named_buffers()["bn1.running_mean"].fill_(static_cast<double>(rank) + 0.5);
  model->named_buffers()["bn2.running_var"].fill_(static_cast<double>(rank) + 2.0);
  return model;
}

}  // namespace

TEST_CASE("ex3.1 broadcast_model gives every rank the root's parameters and buffers", "[ex3.1][np3]") {
  auto comm = mpi_test::communicator();
  for (int root : {0, comm->size() - 1}) {
    CAPTURE(root);
    auto model = model_for_rank(comm->rank());
    std::vector<torch::Tensor> held_by_optimizer = model->parameters();  // the same tensors must be updated
    const torch::Tensor root_state = flat_state(*model_for_rank(root));
    ch03::broadcast_model(*model, *comm, root);
    const torch::Tensor after = flat_state(*model);
    INFO("after broadcast_model(root " << root << "), every parameter and buffer must equal the root's, exactly");
    REQUIRE(after.numel() == root_state.numel());
    REQUIRE(mpi_test::all_ranks(torch::equal(after, root_state)));
    INFO("the broadcast is in place: the parameters the optimizer holds are the ones updated");
    REQUIRE(torch::equal(held_by_optimizer[0], model->parameters()[0]));
    REQUIRE(held_by_optimizer[0].data_ptr() == model->parameters()[0].data_ptr());
    REQUIRE(model->parameters()[0].requires_grad());
  }
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
