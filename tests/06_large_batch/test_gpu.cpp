// The GPU path ([gpu]: run where CUDA is, skipped with a warning elsewhere):
// LARS and LAMB on CUDA tensors equal the same steps on the CPU, and an
// accumulated step over NCCL (world size 1) equals one step on the whole batch.
#include "catch2_compat.hpp"

#include "accumulation.hpp"
#include "accumulation_data.hpp"
#include "gpu_tests.hpp"
#include "mpi_test.hpp"
#include "optimizers.hpp"

namespace {

// Three steps of `make`'s optimizer on a TinyNet on `device`, from the same
// weights and batches; the parameters afterwards, on the CPU.
template <typename Make>
std::vector<torch::Tensor> three_steps(const Make& make, const torch::Device& device) {
  auto model = accumulation_data::toy_model();
  model->to(device);
  auto optimizer = make(*model);
  for (const ch03::Batch& batch : accumulation_data::global_batches(3, 16, 81)) {
    optimizer->zero_grad();
    torch::nn::functional::cross_entropy(model->forward(batch.images.to(device)), batch.labels.to(device)).backward();
    optimizer->step();
  }
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : model->parameters()) params.push_back(p.detach().cpu());
  return params;
}

template <typename Make>
double cpu_gpu_difference(const Make& make) {
  const std::vector<torch::Tensor> cpu = three_steps(make, torch::kCPU), gpu = three_steps(make, torch::Device(torch::kCUDA));
  double worst = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) worst = std::max(worst, (cpu[i] - gpu[i]).abs().max().item<double>());
  return worst;
}

}  // namespace

TEST_CASE("ex6.2 LARS on the GPU equals LARS on the CPU", "[ex6.2][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  const double difference = cpu_gpu_difference([](torch::nn::Module& model) {
    const auto options = ch06::LarsOptions(0.5).trust_coefficient(0.02);
    return std::make_unique<ch06::Lars>(ch06::layer_adaptation_groups(model, options), options);
  });
  INFO("largest parameter difference after 3 steps: " << difference);
  REQUIRE(difference <= 1e-5);
}

TEST_CASE("ex6.3 LAMB on the GPU equals LAMB on the CPU", "[ex6.3][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  const double difference = cpu_gpu_difference([](torch::nn::Module& model) {
    const auto options = ch06::LambOptions(0.01);
    return std::make_unique<ch06::Lamb>(ch06::layer_adaptation_groups(model, options), options);
  });
  INFO("largest parameter difference after 3 steps: " << difference);
  REQUIRE(difference <= 1e-5);
}

TEST_CASE("ex6.4 an accumulated step over NCCL equals one step on the whole batch", "[ex6.4][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                          workbook::CommunicatorOptions::from_environment());
  const torch::Device device = comm->device();
  const int ranks = comm->size();
  const int64_t micro = 4, k = 3;
  const ch03::Batch global = accumulation_data::global_batches(1, micro * k * ranks, 82)[0];
  auto model = accumulation_data::toy_model();
  auto reference = oracle::copy_of(*model);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  const ch03::Batch mine = accumulation_data::share(global, comm->rank(), ranks);
  const int64_t calls_before = comm->stats().collectives();
  ch06::accumulated_train_step(*model, optimizer,
                               ch06::split_batch({mine.images.to(device), mine.labels.to(device)}, micro), *comm);
  REQUIRE(comm->stats().collectives() - calls_before == 1);
  oracle::sgd_step(*reference, global.images, global.labels, 0.5);
  model->to(torch::kCPU);
  REQUIRE(oracle::max_parameter_difference(*model, *reference) <= 1e-5);
}
