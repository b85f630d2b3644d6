// The GPU path ([gpu]: run where CUDA is, skipped with a warning elsewhere):
// over NCCL, with as many ranks as GPUs (one on a one-GPU machine), the
// tensor-parallel model, a pipeline and a group split from the job train
// what the whole model trains on the GPU.
#include "catch2_compat.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "gpu_tests.hpp"
#include "hybrid.hpp"
#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

namespace {
std::unique_ptr<workbook::Communicator> nccl() {
  return workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                     workbook::CommunicatorOptions::from_environment());
}
}  // namespace

TEST_CASE("ex8.4 the tensor-parallel FashionCNN over NCCL gives the whole model's logits and gradients",
          "[ex8.4][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = nccl();
  const torch::Device device = comm->device();
  torch::manual_seed(7);
  auto whole = std::make_shared<workbook::FashionCNN>();
  whole->to(device, torch::kFloat64);
  // Without dropout: how a split model draws its masks is ex8.4's to decide,
  // and test_ex8_4_classifier.cpp checks it against the same model on one rank.
  ch08::TensorParallelFashionCNN model(*whole, *comm, /*dropout_p=*/0.0);
  torch::manual_seed(8);
  const torch::Tensor images = torch::rand({6, 1, 28, 28}, torch::kFloat64).to(device);
  const torch::Tensor labels = torch::arange(6, torch::kInt64).to(device);
  const torch::Tensor whole_logits = tp_oracle::fashion_cnn_forward(*whole, images, torch::Tensor());
  torch::nn::functional::cross_entropy(whole_logits, labels).backward();
  const torch::Tensor logits = model.forward(images);
  torch::nn::functional::cross_entropy(logits, labels).backward();
  const int n = comm->size(), rank = comm->rank();
  INFO("on " << device.str() << ", " << n << " rank(s)");
  REQUIRE(tp_oracle::max_difference(logits, whole_logits) < 1e-9);
  REQUIRE(tp_oracle::max_difference(model.fc1->weight.grad(), tp_oracle::rows_of(whole->fc1->weight.grad(), rank, n)) < 1e-9);
}

TEST_CASE("ex8.7 a 1F1B pipeline over NCCL trains the whole model's weights", "[ex8.7][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = nccl();
  const torch::Device device = comm->device();
  if (comm->size() > ch08::kBlocks) return;
  auto whole = pipeline_oracle::whole_model(9);
  whole->to(device);
  ch08::PipelineStage stage(*whole, *comm, pipeline_oracle::kDropoutSeed);
  torch::Generator masks = at::make_generator<at::CPUGeneratorImpl>(pipeline_oracle::kDropoutSeed);
  const torch::Tensor images = pipeline_oracle::images_for(0, 8).to(device);
  const torch::Tensor labels = pipeline_oracle::labels_for(0, 8).to(device);
  pipeline_oracle::accumulate_step(*whole, masks, images, labels, 4);
  const ch08::StageStepStats stats = ch08::pipeline_step(stage, ch08::Schedule::OneFOneB, images, labels, 4);
  const double difference = pipeline_oracle::stage_difference(stage, *whole, /*gradients=*/true);
  INFO("stage " << stage.stage() << " on " << device.str() << ": gradients differ by " << difference);
  REQUIRE(difference >= 0.0);
  REQUIRE(difference < 1e-5);  // cuDNN's convolutions need not repeat their sums in one order
  REQUIRE(stats.peak_held <= comm->size() - stage.stage());
}

TEST_CASE("ex8.8 groups split from an NCCL communicator reduce among their members", "[ex8.8][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = nccl();
  ch08::HybridGroups groups = ch08::make_hybrid_groups(*comm, comm->size(), ch08::TensorGroups::Consecutive);
  REQUIRE(groups.tensor->device() == comm->device());
  torch::Tensor ones = torch::ones({3}, torch::TensorOptions().device(comm->device()));
  groups.tensor->all_reduce(ones, workbook::ReduceOp::Sum);
  REQUIRE(torch::equal(ones.cpu(), torch::full({3}, static_cast<float>(comm->size()))));
  groups.data->all_reduce(ones, workbook::ReduceOp::Sum);  // the data group is this rank alone
  REQUIRE(torch::equal(ones.cpu(), torch::full({3}, static_cast<float>(comm->size()))));
}
