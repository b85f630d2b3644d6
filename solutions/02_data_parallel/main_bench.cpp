// main_bench.cpp — ch02_bench: does DataParallel make inference faster? And
// what share of a training step goes to rebuilding the replicas?
//
//   ch02_bench [--replicas 1,2,4] [--batches 32,128,512,2048,4096]
//              [--step-batch 256] [--min-time 0.5] [--device cpu|cuda]
//              [--threads N] [--json FILE]
//
// For every (replicas, batch): milliseconds per forward pass of FashionCNN in
// eval mode without autograd, for
//   self           this build's ch02::data_parallel_forward (yours, or the reference)
//   libtorch       LibTorch's own DataParallel (below)
//   single-module  one model, one forward, every thread (no DataParallel)
// then for each replica count one training step at --step-batch: ms per step
// and the share of it spent in replicate(). `workbook bench ch02` runs the
// student's and the reference build of this program side by side.
#include <fmt/format.h>

#include <algorithm>

#ifdef WORKBOOK_TORCH_CUDA
#include <torch/nn/parallel/data_parallel.h>  // includes CUDA headers: only in CUDA builds of LibTorch
#endif

#include "data_parallel.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"
#include "workbook/program.hpp"

namespace {

using workbook::median;

// LibTorch's own DataParallel, where it exists.
// Note: torch/nn/parallel/data_parallel.h includes CUDA headers, and its
// scatter and gather are autograd functions compiled only into CUDA builds of
// LibTorch, so a CPU-only LibTorch (Debian's) has no DataParallel to compare
// with. In a CUDA build: data_parallel() on GPUs, and on the CPU its
// replicate() (clone() plus ReduceAdd gradient edges) and parallel_apply()
// (at::parallel_for: one OpenMP thread per replica) between a split and a cat.
// Its OpenMP threads do not inherit the caller's NoGradGuard, so on the CPU
// those rows build autograd graphs that this chapter's parallel_apply does not.
#ifdef WORKBOOK_TORCH_CUDA
constexpr bool kHaveLibTorchDataParallel = true;
torch::Tensor libtorch_forward(const std::shared_ptr<workbook::FashionCNN>& model, const torch::Tensor& images,
                               const std::vector<torch::Device>& devices) {
  if (devices[0].is_cuda()) return torch::nn::parallel::data_parallel(model, images, devices, devices[0]);
  if (devices.size() == 1) return model->forward(images);  // as data_parallel() does
  std::vector<int64_t> sizes = ch02::chunk_sizes(images.size(0), static_cast<int64_t>(devices.size()));
  std::vector<torch::Tensor> chunks = images.split_with_sizes(sizes);
  auto replicas = torch::nn::parallel::replicate(model, devices);
  std::vector<torch::Tensor> outputs = torch::nn::parallel::parallel_apply(replicas, chunks, devices);
  return torch::cat(outputs, 0);
}
#else
constexpr bool kHaveLibTorchDataParallel = false;
torch::Tensor libtorch_forward(const std::shared_ptr<workbook::FashionCNN>&, const torch::Tensor&,
                               const std::vector<torch::Device>&) {
  throw std::logic_error("LibTorch's DataParallel needs a CUDA build of LibTorch");
}
#endif

// Runs every function in `candidates` once per round, interleaved, until each
// has run `min_rounds` times and `min_seconds` have passed; median ms of each.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& candidates,
                                     const std::vector<torch::Device>& devices, double min_seconds, int min_rounds) {
  std::vector<std::vector<double>> ms(candidates.size());
  for (int i = 0; i < 3; ++i)
    for (const auto& run : candidates) run();  // warm-up: first-call allocations, kernel selection, thread pools
  const double begin = workbook::now_seconds();
  for (int round = 0; round < min_rounds || workbook::now_seconds() - begin < min_seconds; ++round) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      workbook::synchronize(devices);
      const double start = workbook::now_seconds();
      candidates[i]();
      workbook::synchronize(devices);
      ms[i].push_back(1000.0 * (workbook::now_seconds() - start));
    }
  }
  std::vector<double> medians;
  for (auto& m : ms) medians.push_back(median(m));
  return medians;
}

int bench(workbook::Program& program) {
  std::vector<int> replica_counts = {1, 2, 4};
  std::vector<int64_t> batches = {32, 128, 512, 2048, 4096};
  int64_t step_batch = 256;
  double min_time = 0.5;
  CLI::App& app = program.cli();
  app.add_option("--replicas", replica_counts, "replica counts to measure")->delimiter(',')->check(CLI::Range(1, 64));
  app.add_option("--batches", batches, "batch sizes to measure")->delimiter(',')->check(CLI::Range(1, 1 << 20));
  app.add_option("--step-batch", step_batch, "batch of the training steps")->check(CLI::Range(1, 1 << 20));
  app.add_option("--min-time", min_time, "seconds to measure each point for (at least 3 rounds)")
      ->check(CLI::Range(0.0, 600.0));
  const workbook::TrainFlags& flags = program.parse();
  const torch::Device device = program.device();
  WB_CHECK(*std::max_element(replica_counts.begin(), replica_counts.end()) <=
               *std::min_element(batches.begin(), batches.end()),
           "every batch needs at least one sample per replica: the smallest --batches is below the largest --replicas");

  torch::manual_seed(flags.seed);
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  workbook::JsonLines& json = program.json();
  workbook::Table table({{"measure", 7}, {"replicas", 8}, {"batch", 6}, {"impl", 13}, {"ms", 9}, {"samples/s", 10},
                         {"replicate", 9}});
  fmt::print("ch02_bench: FashionCNN on {}, {} thread(s); median ms per call over >= {:.1f} s of interleaved rounds\n",
             device.str(), flags.threads, min_time);
  if (!kHaveLibTorchDataParallel)
    fmt::print("(no libtorch rows: LibTorch's DataParallel exists only in CUDA builds of LibTorch, and this one is "
               "CPU-only)\n");
  fmt::print("{}\n", table.header());
  auto emit = [&](const std::string& measure, int replicas, int64_t batch, const std::string& impl, double ms,
                  double replicate_share) {
    fmt::print("{}\n", table.row({measure, fmt::format("{}", replicas), fmt::format("{}", batch), impl,
                                  fmt::format("{:.3f}", ms), fmt::format("{:.0f}", 1000.0 * batch / ms),
                                  replicate_share < 0 ? "-" : fmt::format("{:.1f}%", 100.0 * replicate_share)}));
    std::fflush(stdout);
    nlohmann::json row = {{"type", "row"}, {"measure", measure}, {"replicas", replicas}, {"batch", batch},
                          {"impl", impl}, {"ms", ms}};
    if (replicate_share >= 0) row["replicate_share"] = replicate_share;
    json.write(row);
  };

  // Inference: eval mode (running statistics), no autograd graph.
  model->eval();
  for (int64_t batch : batches) {
    torch::NoGradGuard no_grad;
    const torch::Tensor images = torch::rand({batch, 1, 28, 28}).to(device);
    for (int replicas : replica_counts) {
      const std::vector<torch::Device> devices = workbook::replica_devices(device, replicas);
      const int per_replica = workbook::threads_per_replica(flags.threads, replicas);
      std::vector<std::function<void()>> candidates = {
          [&] { ch02::data_parallel_forward(*model, images, devices, per_replica); }};
      const bool single = replicas == replica_counts.front();
      if (single) candidates.push_back([&] { model->forward(images); });
      if (kHaveLibTorchDataParallel) candidates.push_back([&] { libtorch_forward(model, images, devices); });
      const std::vector<double> ms = time_interleaved(candidates, devices, min_time, 3);
      if (single) emit("forward", 1, batch, "single-module", ms[1], -1);
      emit("forward", replicas, batch, "self", ms[0], -1);
      if (kHaveLibTorchDataParallel) emit("forward", replicas, batch, "libtorch", ms.back(), -1);
    }
  }

  // Training: where a step's time goes. The model trains on random data;
  // only the time matters here.
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  const torch::Tensor images = torch::rand({step_batch, 1, 28, 28}).to(device);
  const torch::Tensor labels = torch::randint(0, 10, {step_batch}, torch::kInt64).to(device);
  // Every replica count takes a step in each round (interleaved, like the
  // forward passes), so a slow spell of the machine hits them all alike.
  std::vector<int> step_counts;
  for (int replicas : replica_counts)
    if (replicas <= step_batch) step_counts.push_back(replicas);
  std::vector<std::vector<double>> step_ms(step_counts.size());
  std::vector<double> replicate_s(step_counts.size(), 0.0), step_s(step_counts.size(), 0.0);
  auto step_with = [&](size_t c, ch02::StepTimes* times) {
    const std::vector<torch::Device> devices = workbook::replica_devices(device, step_counts[c]);
    ch02::data_parallel_step(*model, optimizer, images, labels, devices,
                             workbook::threads_per_replica(flags.threads, step_counts[c]), times);
  };
  // The baseline: Chapter 1's step, one model on the caller's thread.
  auto single_module_step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images), labels).backward();
    optimizer.step();
  };
  std::vector<double> single_ms;
  for (size_t c = 0; c < step_counts.size(); ++c) step_with(c, nullptr);  // warm-up
  single_module_step();
  const double begin = workbook::now_seconds();
  for (int round = 0; round < 5 || workbook::now_seconds() - begin < min_time * step_counts.size(); ++round) {
    workbook::synchronize(device);
    const double start = workbook::now_seconds();
    single_module_step();
    workbook::synchronize(device);
    single_ms.push_back(1000.0 * (workbook::now_seconds() - start));
    for (size_t c = 0; c < step_counts.size(); ++c) {
      ch02::StepTimes times;
      step_with(c, &times);
      step_ms[c].push_back(1000.0 * times.total());
      replicate_s[c] += times.replicate_s;
      step_s[c] += times.total();
    }
  }
  emit("step", 1, step_batch, "single-module", median(single_ms), -1);
  for (size_t c = 0; c < step_counts.size(); ++c)
    emit("step", step_counts[c], step_batch, "self", median(step_ms[c]), replicate_s[c] / step_s[c]);
  program.finish(workbook::BenchResult{});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::single_process_main(
      argc, argv,
      {"ch02_bench", "Chapter 2 benchmark: DataParallel forward time by replicas and batch; replicate's share of a step"},
      bench);
}
