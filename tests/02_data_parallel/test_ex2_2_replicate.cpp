// Tests for ex2.2: replicate. The replicas' forwards run here one after
// another on this thread, so these tests need only replicate itself.
#include "catch2_compat.hpp"

#include "data_parallel.hpp"
#include "oracles.hpp"
#include "workbook/errors.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

const std::vector<torch::Device> kThreeCpus(3, torch::kCPU);

// A FashionCNN whose BatchNorm running statistics are far from a fresh one's:
// a replica that skipped the buffers would compute something else in eval mode.
std::shared_ptr<workbook::FashionCNN> trained_looking_cnn() {
  auto model = std::make_shared<workbook::FashionCNN>();
  torch::NoGradGuard no_grad;
  for (auto& buffer : model->named_buffers())
    if (buffer.key().find("running") != std::string::npos) buffer.value().uniform_(0.5, 1.5);
  return model;
}

}  // namespace

TEST_CASE("ex2.2 replicas compute what the original computes, in its mode", "[ex2.2]") {
  torch::manual_seed(21);
  auto model = trained_looking_cnn();
  model->eval();
  const torch::Tensor images = torch::rand({5, 1, 28, 28});
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = model->forward(images);
  }
  std::vector<workbook::ClassifierPtr> replicas = ch02::replicate(*model, kThreeCpus);
  REQUIRE(replicas.size() == 3);
  for (size_t i = 0; i < replicas.size(); ++i) {
    CAPTURE(i);
    {
      INFO("a replica must be in the original's mode (eval here: BatchNorm uses its running statistics)");
      REQUIRE_FALSE(replicas[i]->is_training());
    }
    torch::NoGradGuard no_grad;
    INFO("the replica's output on the same images differs from the original's: a replica must compute what the "
         "original computes, with every parameter and buffer at the original's values");
    REQUIRE(torch::allclose(replicas[i]->forward(images), expected, 1e-5, 1e-6));
  }
  model->train();
  REQUIRE(ch02::replicate(*model, {torch::kCPU})[0]->is_training());
}

TEST_CASE("ex2.2 a replica's parameters are copies joined to the original by a gradient edge", "[ex2.2]") {
  torch::manual_seed(22);
  auto model = std::make_shared<workbook::TinyNet>(8);
  std::vector<workbook::ClassifierPtr> replicas = ch02::replicate(*model, kThreeCpus);
  auto originals = model->named_parameters();
  for (size_t i = 0; i < replicas.size(); ++i) {
    for (const auto& p : replicas[i]->named_parameters()) {
      CAPTURE(i, p.key());
      const torch::Tensor& original = originals[p.key()];
      REQUIRE(torch::equal(p.value(), original));
      {
        INFO("each replica holds its own copy: sharing the original's storage is not a replica");
        REQUIRE(p.value().data_ptr() != original.data_ptr());
      }
      INFO("this replica parameter is a leaf (no grad_fn): autograd has no path from it back to the original's "
           "parameter, so a gradient computed on the replica cannot reach the original");
      REQUIRE_FALSE(p.value().is_leaf());
      REQUIRE(p.value().grad_fn() != nullptr);
    }
  }
}

TEST_CASE("ex2.2 gradients computed on the replicas sum into the original's .grad", "[ex2.2]") {
  torch::manual_seed(23);
  auto model = std::make_shared<workbook::TinyNet>(16);  // with BatchNorm: its weight and bias get gradients too
  auto reference = oracle::copy_of(*model);
  const torch::Tensor images = torch::rand({12, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {12}, torch::kInt64);
  const std::vector<int64_t> sizes = {5, 4, 3};

  // Oracle: the same per-chunk losses on one model, summed, differentiated.
  torch::Tensor oracle_loss = torch::zeros({});
  std::vector<torch::Tensor> replica_losses;
  std::vector<workbook::ClassifierPtr> replicas = ch02::replicate(*model, kThreeCpus);
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const torch::Tensor x = images.narrow(0, start, sizes[i]), y = labels.narrow(0, start, sizes[i]);
    oracle_loss = oracle_loss + torch::nn::functional::cross_entropy(reference->forward(x), y);
    replica_losses.push_back(torch::nn::functional::cross_entropy(replicas[i]->forward(x), y));
    start += sizes[i];
  }
  std::vector<torch::Tensor> expected = torch::autograd::grad({oracle_loss}, reference->parameters());
  torch::stack(replica_losses).sum().backward();

  auto params = model->named_parameters();
  auto reference_names = reference->named_parameters();
  size_t index = 0;
  for (const auto& p : params) {
    CAPTURE(p.key());
    {
      INFO("after backward through the replicas' losses the original's parameter has no .grad: gradients computed on "
           "the replicas must flow back into the original's parameters");
      REQUIRE(p.value().grad().defined());
    }
    INFO("the original's gradient must be the sum over the replicas");
    REQUIRE(torch::allclose(p.value().grad(), expected[index], 1e-5, 1e-6));
    ++index;
  }
}

TEST_CASE("ex2.2 replica 0 shares the original's buffers, the others hold copies", "[ex2.2]") {
  torch::manual_seed(24);
  auto model = trained_looking_cnn();
  const torch::Tensor mean_before = model->named_buffers()["bn1.running_mean"].clone();
  std::vector<workbook::ClassifierPtr> replicas = ch02::replicate(*model, kThreeCpus);
  auto originals = model->named_buffers();
  for (size_t i = 0; i < replicas.size(); ++i) {
    for (const auto& b : replicas[i]->named_buffers()) {
      CAPTURE(i, b.key());
      REQUIRE(torch::equal(b.value(), originals[b.key()]));
      const bool shares = b.value().data_ptr() == originals[b.key()].data_ptr();
      INFO("this replica's buffer " << (shares ? "shares" : "does not share") << " the original's storage; the "
           "contract: replica 0's buffers are the original's own tensors, every other replica's are separate copies");
      REQUIRE(shares == (i == 0));
    }
  }
  // A train-mode forward on replica 1 leaves the model's statistics alone;
  // one on replica 0 updates them, as PyTorch's DataParallel does.
  const torch::Tensor images = torch::rand({6, 1, 28, 28});
  replicas[1]->forward(images);
  REQUIRE(torch::equal(model->named_buffers()["bn1.running_mean"], mean_before));
  replicas[0]->forward(images);
  INFO("replica 0's BatchNorm must update the model's running statistics");
  REQUIRE_FALSE(torch::equal(model->named_buffers()["bn1.running_mean"], mean_before));
}

TEST_CASE("ex2.2 replicate rejects mismatched and empty device lists", "[ex2.2]") {
  workbook::TinyNet model(8);
  REQUIRE_THROWS_AS(ch02::replicate(model, {}), workbook::UserError);
  INFO("CPU mixed with CUDA must be refused with a message that says so");
  REQUIRE_THROWS_WITH(ch02::replicate(model, {torch::kCPU, torch::Device(torch::kCUDA, 0)}), ContainsSubstring("mismatched"));
  REQUIRE_THROWS_AS(ch02::replicate(model, {torch::kCPU, torch::Device(torch::kCUDA, 0)}), workbook::UserError);
}
