// Tests for ex9.3: master weights. The oracles: the model's own float32
// weights before conversion (bit for bit), rounding done by LibTorch's
// .to(), and float32 training of the same model from the same weights.
#include "catch2_compat.hpp"

#include "block_mlp.hpp"
#include "precision.hpp"

namespace {

std::shared_ptr<ch09::BlockMlp> small_mlp(uint64_t seed) {
  torch::manual_seed(seed);
  ch09::BlockMlpOptions options;
  options.blocks = 2;
  options.width = 32;
  options.dropout = 0.0;
  return std::make_shared<ch09::BlockMlp>(options);
}

std::vector<torch::Tensor> detached_copies(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const torch::Tensor& t : tensors) copies.push_back(t.detach().clone());
  return copies;
}

}  // namespace

TEST_CASE("ex9.3 the masters are the float32 weights bit for bit; the model becomes 16-bit", "[ex9.3]") {
  for (torch::ScalarType compute : {torch::kBFloat16, torch::kFloat16}) {
    CAPTURE(c10::toString(compute));
    auto model = small_mlp(3);
    const std::vector<torch::Tensor> original = detached_copies(model->parameters());
    ch09::MasterWeights masters(*model, compute);
    REQUIRE(masters.masters().size() == original.size());
    for (size_t i = 0; i < original.size(); ++i) {
      CAPTURE(i);
      const torch::Tensor& master = masters.masters()[i];
      INFO("master " << i << ": float32, a leaf that requires grad, equal to the original weight bit for bit (copied "
           "BEFORE the model was rounded to 16 bits)");
      REQUIRE(master.scalar_type() == torch::kFloat32);
      REQUIRE(master.is_leaf());
      REQUIRE(master.requires_grad());
      REQUIRE(torch::equal(master.detach(), original[i]));
      INFO("the model's parameter: 16-bit, the original rounded, and not the master's storage");
      REQUIRE(model->parameters()[i].scalar_type() == compute);
      REQUIRE(torch::equal(model->parameters()[i].detach(), original[i].to(compute)));
      REQUIRE(model->parameters()[i].data_ptr() != master.data_ptr());
    }
  }
}

TEST_CASE("ex9.3 gradients go to the masters in float32; the masters come back rounded, into the same tensors",
          "[ex9.3]") {
  auto model = small_mlp(4);
  ch09::MasterWeights masters(*model, torch::kBFloat16);
  const torch::Tensor images = torch::rand({8, 1, 28, 28});
  torch::nn::functional::cross_entropy(model->forward(images), torch::arange(8) % 10).backward();
  masters.gradients_to_masters();
  for (size_t i = 0; i < masters.masters().size(); ++i) {
    CAPTURE(i);
    INFO("master.grad: the model parameter's gradient, widened to float32");
    REQUIRE(masters.masters()[i].grad().scalar_type() == torch::kFloat32);
    REQUIRE(torch::equal(masters.masters()[i].grad(), model->parameters()[i].grad().to(torch::kFloat32)));
  }
  // The next step, the first parameter gets no gradient (set to none, as zero_grad does).
  model->parameters()[0].mutable_grad() = torch::Tensor();
  masters.gradients_to_masters();
  INFO("a parameter without a gradient: its master's gradient must be undefined too, not the last step's (the "
       "optimizer would step with it again)");
  REQUIRE_FALSE(masters.masters()[0].grad().defined());
  std::vector<void*> storage;
  for (const torch::Tensor& p : model->parameters()) storage.push_back(p.data_ptr());
  {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& m : masters.masters()) m.add_(0.3);
  }
  masters.masters_to_model();
  for (size_t i = 0; i < masters.masters().size(); ++i) {
    CAPTURE(i);
    INFO("the model's parameter: its master rounded to bfloat16, written into the same storage");
    REQUIRE(torch::equal(model->parameters()[i].detach(), masters.masters()[i].detach().to(torch::kBFloat16)));
    REQUIRE(model->parameters()[i].data_ptr() == storage[i]);
  }
}

TEST_CASE("ex9.3 updates smaller than half a bfloat16 ulp move the masters, and the model once they add up",
          "[ex9.3]") {
  auto model = small_mlp(5);
  {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : model->parameters()) p.fill_(1.0);
  }
  ch09::MasterWeights masters(*model, torch::kBFloat16);
  torch::optim::SGD sgd(masters.masters(), torch::optim::SGDOptions(1e-3));
  // bfloat16's ulp at 1 is 2^-7 (0.0078; 2^-8 below 1): a step of 0.001 rounds back to 1.
  for (int step = 1; step <= 20; ++step) {
    for (const torch::Tensor& p : model->parameters()) p.mutable_grad() = torch::ones_like(p);
    masters.gradients_to_masters();
    sgd.step();
    masters.masters_to_model();
    if (step == 1) {
      INFO("after one step of 0.001: the float32 master is 0.999, the bfloat16 weight still 1");
      REQUIRE(masters.masters()[0].detach().max().item<float>() == Approx(0.999f).epsilon(1e-6));
      REQUIRE(model->parameters()[0].detach().max().item<float>() == 1.0f);
    }
  }
  INFO("after 20 steps the masters are at 0.98 (a 16-bit master would still be at 1), and the model at 0.98 "
       "rounded to bfloat16");
  REQUIRE(masters.masters()[0].detach().max().item<float>() == Approx(0.98f).epsilon(1e-5));
  REQUIRE(model->parameters()[0].detach().max().item<float>() == c10::BFloat16(masters.masters()[0].detach().max().item<float>()));
}

TEST_CASE("ex9.3 training with bfloat16 compute and float32 masters follows float32 training", "[ex9.3]") {
  auto reference = small_mlp(6);  // float32 throughout: the oracle
  auto model = small_mlp(6);      // the same weights
  std::vector<torch::Tensor> initial = detached_copies(reference->parameters());
  ch09::MasterWeights masters(*model, torch::kBFloat16);
  // SGD: an update proportional to the gradient, so that the gradient's
  // rounding shows in the weights in proportion (Adam's would hide it).
  torch::optim::SGD reference_sgd(reference->parameters(), torch::optim::SGDOptions(0.02));
  torch::optim::SGD sgd(masters.masters(), torch::optim::SGDOptions(0.02));
  torch::manual_seed(60);
  const torch::Tensor images = torch::rand({64, 1, 28, 28});
  const torch::Tensor labels = torch::randint(10, {64});
  for (int step = 0; step < 10; ++step) {
    reference_sgd.zero_grad();
    torch::nn::functional::cross_entropy(reference->forward(images), labels).backward();
    reference_sgd.step();
    model->zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images), labels).backward();
    masters.gradients_to_masters();
    sgd.step();
    masters.masters_to_model();
  }
  double travelled = 0.0, apart = 0.0;
  for (size_t i = 0; i < initial.size(); ++i) {
    travelled += (reference->parameters()[i].detach() - initial[i]).pow(2).sum().item<double>();
    apart += (masters.masters()[i].detach() - reference->parameters()[i].detach()).pow(2).sum().item<double>();
  }
  travelled = std::sqrt(travelled);
  apart = std::sqrt(apart);
  INFO("after 10 SGD steps the float32 weights moved " << travelled << " (L2) from the start; the masters are "
       << apart << " from them: within 10% of the way (measured: 4.7%; bfloat16 rounds each product to 3 digits)");
  REQUIRE(travelled > 0.1);
  REQUIRE(apart < 0.1 * travelled);
}

TEST_CASE("ex9.3 the masters equal a float32 model stepped with the gradients of its bfloat16 copy, bit for bit",
          "[ex9.3]") {
  // The oracle casts around a float32 model: each step, a bfloat16 copy of
  // it computes the gradients, which are widened and given to the float32
  // model's own Adam. The same arithmetic in the same order: equal.
  auto reference = small_mlp(7);
  auto model = small_mlp(7);
  ch09::MasterWeights masters(*model, torch::kBFloat16);
  torch::optim::Adam reference_adam(reference->parameters(), torch::optim::AdamOptions(1e-2));
  torch::optim::Adam adam(masters.masters(), torch::optim::AdamOptions(1e-2));
  torch::manual_seed(70);
  const torch::Tensor images = torch::rand({32, 1, 28, 28});
  const torch::Tensor labels = torch::randint(10, {32});
  for (int step = 0; step < 5; ++step) {
    auto copy = std::dynamic_pointer_cast<ch09::BlockMlp>(reference->clone());
    copy->to(torch::kBFloat16);
    torch::nn::functional::cross_entropy(copy->forward(images), labels).backward();
    for (size_t i = 0; i < copy->parameters().size(); ++i)
      reference->parameters()[i].mutable_grad() = copy->parameters()[i].grad().to(torch::kFloat32);
    reference_adam.step();

    model->zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images), labels).backward();
    masters.gradients_to_masters();
    adam.step();
    masters.masters_to_model();
  }
  for (size_t i = 0; i < masters.masters().size(); ++i) {
    CAPTURE(i);
    INFO("after 5 Adam steps, master " << i << " equals the oracle's float32 weight");
    REQUIRE(torch::equal(masters.masters()[i].detach(), reference->parameters()[i].detach()));
    REQUIRE(torch::equal(model->parameters()[i].detach(), reference->parameters()[i].detach().to(torch::kBFloat16)));
  }
}
