// main_bench.cpp — ch09_bench: what each way of moving fewer bytes keeps,
// sends and costs per step, measured in one run.
//
//   mpirun -n 2 ch09_bench --measure checkpoint|precision|wire [--batch 256] [--blocks 8] [--width 1024]
//                          [--steps 3] [--rounds 3] [--threads N] [--json FILE]
//   workbook bench ch09 [--ranks N] [--nodes 2]
//
// Chapter 9's BlockMlp on random data, Adam; --batch is the global batch.
//   checkpoint  no checkpoint, then one every k blocks for k = 1, 2, 4, ... up
//               to --blocks: kept_mib, the bytes the forward pass left for
//               backward, and peak_mib, the most forward and backward held
//               above what was held when forward began (the activations and
//               the new gradients; both counted from the tensors, tensor_bytes.hpp)
//   precision   fp32; bf16 and fp16 under autocast; bf16 and fp16 as a 16-bit
//               model with float32 master weights (fp16 with the loss scaler)
//   wire        float32 gradients averaged by Chapter 4's reducer in fp32,
//               bf16 and fp16 on the wire (ex9.4): sent_mib per step, counted
//               by the Communicator
// The variants take turns within each round, so a busy spell of the machine
// falls on all alike; step_ms is the median over rounds of the mean step.
#include <fmt/format.h>

#include <optional>

#include "block_mlp.hpp"
#include "ddp.hpp"
#include "precision.hpp"
#include "reducer.hpp"
#include "wire16.hpp"
#include "workbook/autocast.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"
#include "workbook/tensor_bytes.hpp"
#include "workbook/timing.hpp"

namespace {

// One configuration, its model and optimizer, and what it measured.
struct Variant {
  std::string name;
  std::shared_ptr<ch09::BlockMlp> model;
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::optional<ch09::MasterWeights> masters;
  std::optional<ch09::DynamicLossScaler> scaler;
  std::unique_ptr<ch04::BucketReducer> reducer;
  torch::ScalarType autocast = torch::kFloat32;  // kFloat32: off
  std::vector<double> step_ms;
  int64_t kept_bytes = 0, peak_bytes = 0, bytes_sent = 0;
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

int bench(workbook::Program& program) {
  std::string measure = "checkpoint";
  int64_t steps = 3;
  int rounds = 3;
  ch09::BlockMlpOptions model_options;
  model_options.width = 1024;
  program.flags().batch = 256;
  CLI::App& app = program.cli();
  app.add_option("--measure", measure, "checkpoint, precision or wire")
      ->check(CLI::IsMember({"checkpoint", "precision", "wire"}))
      ->capture_default_str();
  app.add_option("--steps", steps, "steps per measurement")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--rounds", rounds, "rounds; each measures every variant once")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--blocks", model_options.blocks, "residual blocks")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--width", model_options.width, "the blocks' width")->check(CLI::PositiveNumber)->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int64_t local_batch = program.local_batch(flags.batch);
  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const int ranks = program.ranks();

  torch::manual_seed(flags.seed + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const auto options = torch::TensorOptions().device(device);
  const torch::Tensor images = torch::rand({local_batch, 1, 28, 28}, options);
  const torch::Tensor labels = torch::randint(0, 10, {local_batch}, options.dtype(torch::kInt64));

  std::vector<Variant> variants;
  auto add = [&](std::string name, int64_t checkpoint_every, torch::ScalarType compute, bool master_weights,
                 std::optional<torch::ScalarType> wire) {
    Variant v;
    v.name = std::move(name);
    torch::manual_seed(flags.seed);
    v.model = std::make_shared<ch09::BlockMlp>(model_options);
    v.model->checkpoint_every(checkpoint_every);
    v.model->to(device);
    if (master_weights) v.masters.emplace(*v.model, compute);
    else v.autocast = compute;
    if (compute == torch::kFloat16) v.scaler.emplace();
    v.optimizer = std::make_unique<torch::optim::Adam>(v.masters ? v.masters->masters() : v.model->parameters(),
                                                       torch::optim::AdamOptions(flags.lr));
    if (wire) {
      ch04::ReducerOptions reducer_options;
      if (*wire != torch::kFloat32) reducer_options.all_reduce = ch09::average_in_16_bits_hook(*wire);
      v.reducer = std::make_unique<ch04::BucketReducer>(v.model->parameters(), comm, reducer_options);
    }
    variants.push_back(std::move(v));
  };
  if (measure == "checkpoint") {
    add("none", 0, torch::kFloat32, false, std::nullopt);
    for (int64_t k = 1; k <= model_options.blocks; k *= 2) add(fmt::format("every {}", k), k, torch::kFloat32, false, std::nullopt);
  } else if (measure == "precision") {
    add("fp32", 0, torch::kFloat32, false, std::nullopt);
    for (const char* name : {"bf16", "fp16"}) {
      const torch::ScalarType compute = ch09::dtype_named(name);
      ch09::check_device_computes(device, compute);
      add(fmt::format("{} autocast", name), 0, compute, false, std::nullopt);
      add(fmt::format("{} master weights", name), 0, compute, true, std::nullopt);
    }
  } else {
    for (const char* name : {"fp32", "bf16", "fp16"})
      add(fmt::format("{} on the wire", name), 0, torch::kFloat32, false, ch09::dtype_named(name));
  }

  // One training step of a variant, with the bytes its forward pass kept.
  auto step = [&](Variant& v) {
    v.model->zero_grad();
    v.optimizer->zero_grad();
    const int64_t before = workbook::tensor_bytes(device).current;  // the gradients freed, the step not begun
    workbook::reset_peak_tensor_bytes(device);
    torch::Tensor loss;
    {
      std::optional<workbook::AutocastGuard> autocast;
      if (v.autocast != torch::kFloat32) autocast.emplace(device.type(), v.autocast);
      loss = torch::nn::functional::cross_entropy(v.model->forward(images), labels);
    }
    v.kept_bytes = workbook::tensor_bytes(device).current - before;
    (v.scaler ? v.scaler->scale(loss) : loss).backward();
    if (v.reducer) v.reducer->finish();
    v.peak_bytes = std::max(v.peak_bytes, workbook::tensor_bytes(device).peak - before);
    if (v.masters) v.masters->gradients_to_masters();
    const std::vector<torch::Tensor> stepped = v.masters ? v.masters->masters() : v.model->parameters();
    const bool taken = v.scaler ? ch09::scaled_step(*v.scaler, *v.optimizer, stepped, nullptr, comm)
                                : (v.optimizer->step(), true);
    if (taken && v.masters) v.masters->masters_to_model();
  };
  for (Variant& v : variants) step(v);  // warm-up: the optimizers' state exists from here
  for (int round = 0; round < rounds; ++round) {
    for (Variant& v : variants) {
      comm.barrier();
      const int64_t sent_before = comm.stats().bytes_sent();
      workbook::Stopwatch clock(device);
      clock.start();
      for (int64_t i = 0; i < steps; ++i) step(v);
      comm.barrier();
      v.step_ms.push_back(1000.0 * clock.stop() / static_cast<double>(steps));
      v.bytes_sent = (comm.stats().bytes_sent() - sent_before) / steps;
    }
  }

  workbook::JsonLines& json = program.json();
  program.say("ch09_bench --measure {}: BlockMlp ({} blocks of {}), Adam, {} rank(s), global batch {} = {} x {}, "
              "{} thread(s) per rank, device {}; {} rounds of {} steps per variant, medians",
              measure, model_options.blocks, model_options.width, ranks, flags.batch, ranks, local_batch,
              flags.threads, device.str(), rounds, steps);
  workbook::Table table({{"variant", 20}, {"step_ms", 8}, {"vs first", 8}, {"kept_MiB", 8}, {"peak_MiB", 8},
                         {"sent_MiB", 8}});
  program.say("{}", table.header());
  const double first_ms = workbook::median(variants.front().step_ms);
  nlohmann::json headline = {{"measure", measure}};
  for (Variant& v : variants) {
    const double ms = workbook::median(v.step_ms);
    program.say("{}", table.row({v.name, fmt::format("{:.1f}", ms), fmt::format("{:.2f}x", ms / first_ms),
                                 fmt::format("{:.2f}", mib(v.kept_bytes)), fmt::format("{:.2f}", mib(v.peak_bytes)),
                                 fmt::format("{:.2f}", mib(v.bytes_sent))}));
    json.write({{"type", "row"}, {"measure", measure}, {"variant", v.name}, {"ranks", ranks}, {"step_ms", ms},
                {"vs_first", ms / first_ms}, {"kept_mib", mib(v.kept_bytes)}, {"peak_mib", mib(v.peak_bytes)},
                {"sent_mib", mib(v.bytes_sent)},
                {"skipped_steps", v.scaler ? v.scaler->skipped_steps() : 0}});
    headline[v.name + " step_ms"] = ms;
  }
  program.say("kept: bytes the forward pass left for backward; peak: the most forward and backward held above "
              "what was held when forward began (both counted from the tensors); sent: bytes each rank sent per step (counted)");
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch09_bench", "Chapter 9: bytes kept, sent and step time of checkpointing, 16-bit compute and 16-bit gradients"},
      bench);
}
