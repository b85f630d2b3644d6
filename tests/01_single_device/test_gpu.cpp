// Chapter 1 on a CUDA device: the same answers as on the CPU. Tagged [gpu]:
// run by `ctest --preset cuda` on a machine with a GPU, skipped elsewhere.
#include "catch2_compat.hpp"

#include "cuda_graph.hpp"
#include "gpu_tests.hpp"
#include "oracles.hpp"
#include "single_device.hpp"

#if defined(WORKBOOK_TORCH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#endif

using gpu_tests::have_gpu;

#if defined(WORKBOOK_TORCH_CUDA)
namespace {

// Counts, while it lives, the calls that make the host wait for the GPU:
// c10's sync debug mode, set to warn, reports each one as a warning.
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : mode_before_(c10::cuda::warning_state().get_sync_debug_mode()), handler_guard_(this) {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  }
  ~SyncCounter() override { c10::cuda::warning_state().set_sync_debug_mode(mode_before_); }
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchronizing CUDA operation") != std::string::npos) ++syncs;
  }
  int64_t syncs = 0;

 private:
  c10::cuda::SyncDebugMode mode_before_;
  c10::WarningUtils::WarningHandlerGuard handler_guard_;
};

}  // namespace
#endif

TEST_CASE("ex1.1 make_batch delivers batches to the GPU, from CPU or GPU data", "[ex1.1][gpu]") {
  if (!have_gpu()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  auto [images, labels] = oracle::indexed_samples(30);
  torch::Tensor order = torch::randperm(30, torch::kInt64);
  for (bool data_on_gpu : {false, true}) {
    CAPTURE(data_on_gpu);
    torch::Tensor x = data_on_gpu ? images.to(gpu) : images, y = data_on_gpu ? labels.to(gpu) : labels;
    ch01::Batch batch = ch01::make_batch(x, y, order, 1, 8, gpu);
    REQUIRE(batch.images.device() == gpu);
    REQUIRE(batch.labels.device() == gpu);
    REQUIRE(torch::equal(batch.labels.cpu(), labels.index_select(0, order.slice(0, 8, 16))));
  }
}

TEST_CASE("ex1.2 ex1.3 ex1.4 on the GPU match the CPU", "[ex1.4][gpu]") {
  if (!have_gpu()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  torch::manual_seed(6);
  const int64_t n = 64;
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);
  torch::Tensor order = torch::randperm(n, torch::kInt64);
  auto on_cpu = std::make_shared<workbook::TinyNet>(16, 0.0);
  auto on_gpu = oracle::copy_of(*on_cpu);
  on_gpu->to(gpu);
  torch::optim::SGD cpu_sgd(on_cpu->parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::SGD gpu_sgd(on_gpu->parameters(), torch::optim::SGDOptions(0.05));
  auto cpu_stats = ch01::train_epoch(*on_cpu, cpu_sgd, images, labels, order, 16, torch::kCPU, 1);
  auto gpu_stats = ch01::train_epoch(*on_gpu, gpu_sgd, images.to(gpu), labels.to(gpu), order, 16, gpu, 1);
  REQUIRE(gpu_stats.mean_loss == Approx(cpu_stats.mean_loss).epsilon(1e-4));
  REQUIRE(gpu_stats.timed_seconds > 0);
  for (const auto& p : on_gpu->parameters()) REQUIRE(p.device() == gpu);
  auto cpu_eval = ch01::evaluate(*on_cpu, images, labels, 10, torch::kCPU);
  auto gpu_eval = ch01::evaluate(*on_gpu, images.to(gpu), labels.to(gpu), 10, gpu);
  REQUIRE(gpu_eval.total == cpu_eval.total);
  REQUIRE(gpu_eval.mean_loss == Approx(cpu_eval.mean_loss).epsilon(1e-4));
}

TEST_CASE("ex1.3 ex1.4 wait for the GPU once per epoch, not once per step", "[ex1.4][gpu]") {
  if (!have_gpu()) return;
#if defined(WORKBOOK_TORCH_CUDA)
  const torch::Device gpu(torch::kCUDA, 0);
  torch::manual_seed(8);
  for (bool data_on_gpu : {true, false}) {
    CAPTURE(data_on_gpu);
    auto data = [&](int64_t n) {
      torch::Tensor images = torch::rand({n, 1, 28, 28}), labels = torch::randint(0, 10, {n}, torch::kInt64);
      return data_on_gpu ? std::pair{images.to(gpu), labels.to(gpu)} : std::pair{images, labels};
    };
    auto syncs_in_epoch_of = [&](int64_t steps) {
      auto [images, labels] = data(steps * 4);
      auto model = std::make_shared<workbook::TinyNet>(8, 0.0);
      model->to(gpu);
      torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
      SyncCounter counter;
      ch01::train_epoch(*model, optimizer, images, labels, torch::arange(steps * 4, torch::kInt64), 4, gpu, 1);
      return counter.syncs;
    };
    const int64_t train_3 = syncs_in_epoch_of(3), train_9 = syncs_in_epoch_of(9);
    INFO("train_epoch made the host wait for the GPU " << train_3 << " times in 3 steps and " << train_9
         << " in 9: something in the loop synchronizes (item(), a blocking copy of the order or of the loss)");
    REQUIRE(train_9 == train_3);

    auto syncs_in_evaluation_of = [&](int64_t batches) {
      auto [images, labels] = data(batches * 4);
      auto model = std::make_shared<workbook::TinyNet>(8, 0.0);
      model->to(gpu);
      SyncCounter counter;
      ch01::evaluate(*model, images, labels, 4, gpu);
      return counter.syncs;
    };
    const int64_t eval_3 = syncs_in_evaluation_of(3), eval_9 = syncs_in_evaluation_of(9);
    INFO("evaluate made the host wait for the GPU " << eval_3 << " times for 3 batches and " << eval_9 << " for 9");
    REQUIRE(eval_9 == eval_3);
  }
#else
  WARN("a CUDA device, but this LibTorch was built without CUDA: skipped");
#endif
}

TEST_CASE("ch01 the step captured as a CUDA graph trains as the eager step does", "[ch01][gpu]") {
  if (!have_gpu()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  torch::manual_seed(12);
  const int64_t n = 70, batch_size = 16;  // 4 full batches and a short one (eager) per epoch
  torch::Tensor images = torch::rand({n, 1, 28, 28}).to(gpu);
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64).to(gpu);
  // No BatchNorm (see test_cuda_graph.cpp): ch01_train's own runs check the
  // FashionCNN's accuracy with and without the graph.
  auto eager = std::make_shared<workbook::TinyNet>(16, 0.0, /*batch_norm=*/false);
  eager->to(gpu);
  auto graphed = oracle::copy_of(*eager);
  graphed->to(gpu);
  ch01::DeviceAdam eager_adam(eager->parameters(), 1e-2), graphed_adam(graphed->parameters(), 1e-2);
  const ch01::StepFn eager_step = [&](const ch01::Batch& b) { return ch01::train_step(*eager, eager_adam, b); };
  const ch01::StepFn graph_step = ch01::captured_step(
      [&](const ch01::Batch& b) { return ch01::train_step(*graphed, graphed_adam, b); }, batch_size, 2);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {  // 2 eager steps, the capture, then replays
    CAPTURE(epoch);
    torch::Tensor order = torch::randperm(n, torch::kInt64);
    auto a = ch01::train_epoch(*eager, eager_step, images, labels, order, batch_size, gpu, 1);
    auto b = ch01::train_epoch(*graphed, graph_step, images, labels, order, batch_size, gpu, 1);
    REQUIRE(b.mean_loss == Approx(a.mean_loss).epsilon(1e-5));
    const auto mine = graphed->parameters(), theirs = eager->parameters();
    for (size_t i = 0; i < mine.size(); ++i) REQUIRE(torch::allclose(mine[i], theirs[i], 1e-5, 1e-6));
  }
}
