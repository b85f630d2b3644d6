// main_train.cpp — ch09_train: Chapter 9's model trained by Chapter 4's DDP,
// with fewer bytes: 16-bit compute, 16-bit gradients on the wire, and
// activation checkpointing, each chosen by a flag.
//
//   mpirun -n 2 ch09_train [--precision fp32|bf16|fp16] [--master-weights] [--wire fp32|bf16|fp16]
//                          [--checkpoint-every K] [--blocks 8] [--width 512] [--dropout 0.1]
//                          [--epochs 1] [--batch 100] [--lr 1e-3] [--threads N] [--json FILE] ...
//   workbook run ch09 --ranks 2 [--solution] -- ARGS
//
// --precision bf16|fp16: autocast (the weights float32, the matrix products
// in 16 bits); with --master-weights the model itself is 16-bit and the
// optimizer updates float32 masters (ex9.3). fp16 adds the loss scaler
// (ex9.2). --wire bf16|fp16: float32 gradients averaged with 16 bits on the
// wire (ex9.4); a 16-bit model's gradients are 16-bit already. The result
// line reports the bytes each rank sent per step (counted by the
// Communicator) and the bytes the first step's forward kept for backward
// (counted from the tensors, tensor_bytes.hpp).
#include <fmt/format.h>

#include <optional>

#include "block_mlp.hpp"
#include "checkpoint.hpp"
#include "ddp.hpp"  // Chapter 3's reference: broadcast_model, DistributedSampler, gather_batch, evaluate_distributed
#include "precision.hpp"
#include "reducer.hpp"  // Chapter 4's reference: BucketReducer
#include "wire16.hpp"
#include "workbook/autocast.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/tensor_bytes.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;
constexpr int64_t kEvalBatch = 1000;

int train(workbook::Program& program) {
  std::string precision = "fp32", wire = "fp32";
  bool master_weights = false;
  int64_t checkpoint_every = 0;
  ch09::BlockMlpOptions model_options;
  CLI::App& cli = program.cli();
  cli.add_option("--precision", precision, "fp32, or bf16/fp16: the matrix products in 16 bits (autocast)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  cli.add_flag("--master-weights", master_weights,
               "with bf16/fp16: the model itself in 16 bits, the optimizer on float32 masters (ex9.3)");
  cli.add_option("--wire", wire, "the dtype float32 gradients travel in (ex9.4)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  cli.add_option("--checkpoint-every", checkpoint_every, "blocks per checkpointed segment (ex9.5); 0: none")
      ->capture_default_str();
  cli.add_option("--blocks", model_options.blocks, "residual blocks")->capture_default_str();
  cli.add_option("--width", model_options.width, "the blocks' width")->capture_default_str();
  cli.add_option("--dropout", model_options.dropout, "dropout after each block")->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const torch::ScalarType compute = ch09::dtype_named(precision);
  WB_CHECK(!master_weights || compute != torch::kFloat32, "--master-weights needs --precision bf16 or fp16");
  WB_CHECK(!master_weights || wire == "fp32",
           "with --master-weights the gradients are {} already: leave --wire out", precision);
  const int64_t local_batch = program.local_batch(flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  if (compute != torch::kFloat32) ch09::check_device_computes(device, compute);
  const workbook::FashionMnist data = program.load_data();

  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto model = std::make_shared<ch09::BlockMlp>(model_options);
  model->checkpoint_every(checkpoint_every);
  model->to(device);
  ch03::broadcast_model(*model, comm, 0);
  std::optional<ch09::MasterWeights> masters;
  if (master_weights) masters.emplace(*model, compute);
  torch::optim::Adam optimizer(masters ? masters->masters() : model->parameters(), torch::optim::AdamOptions(flags.lr));
  // The loss scaler where float16 computes; bfloat16 has float32's range.
  std::optional<ch09::DynamicLossScaler> scaler;
  if (compute == torch::kFloat16) scaler.emplace();

  ch04::ReducerOptions reducer_options;
  if (wire != "fp32") {
    reducer_options.all_reduce = ch09::average_in_16_bits_hook(ch09::dtype_named(wire));
  } else if (master_weights) {
    // 16-bit gradients: divided before the ring's 16-bit sum (Note [divide first] in wire16.hpp).
    reducer_options.all_reduce = [](torch::Tensor& flat, workbook::Communicator& c) {
      flat.div_(c.size());
      ch04::ring_all_reduce(flat, workbook::ReduceOp::Sum, c);
    };
  }
  ch04::BucketReducer reducer(model->parameters(), comm, reducer_options);
  const std::vector<torch::Tensor> stepped = masters ? masters->masters() : model->parameters();

  ch03::DistributedSampler sampler(data.train.size(), program.ranks(), comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + local_batch - 1) / local_batch;
  program.say("ch09_train: BlockMlp ({} blocks of {}, dropout {}), {} rank(s) ({}), global batch {} = {} x {}, "
              "{} train / {} test samples, Adam lr {}, device {}, {} thread(s) per rank; compute {}{}{}, "
              "gradients on the wire {}, {}",
              model_options.blocks, model_options.width, model_options.dropout, program.ranks(),
              program.env().launcher, flags.batch, program.ranks(), local_batch, data.train.size(), data.test.size(),
              flags.lr, device.str(), flags.threads, precision,
              compute == torch::kFloat32 ? "" : master_weights ? " (16-bit model, float32 masters)" : " (autocast)",
              scaler ? ", loss scaler" : "", master_weights ? precision : wire,
              checkpoint_every == 0 ? std::string("no checkpoints")
                                    : fmt::format("a checkpoint every {} block(s)", checkpoint_every));

  workbook::EpochMeter meter(program, kWarmupSteps);
  ch03::EvalResult eval;
  int64_t steps_tried = 0, steps_taken = 0;
  int64_t saved_activation_bytes = -1;  // measured on the first step
  const int64_t bytes_sent_before = comm.stats().bytes_sent();
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    torch::manual_seed(workbook::dropout_seed(flags.seed, epoch, comm.rank()));
    const torch::Tensor indices = sampler.indices();
    meter.begin_epoch(epoch, steps_per_epoch);
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      meter.before_step(step);
      const int64_t first = step * local_batch;
      const ch03::Batch batch = ch03::gather_batch(data.train.images, data.train.labels, indices, first,
                                                   std::min(local_batch, sampler.num_samples() - first));
      model->zero_grad();
      optimizer.zero_grad();
      const workbook::TensorBytes before = workbook::tensor_bytes(device);
      torch::Tensor loss;
      {
        std::optional<workbook::AutocastGuard> autocast;
        if (compute != torch::kFloat32 && !master_weights) autocast.emplace(device.type(), compute);
        loss = torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
      }
      if (saved_activation_bytes < 0) saved_activation_bytes = workbook::tensor_bytes(device).current - before.current;
      (scaler ? scaler->scale(loss) : loss).backward();  // the reducer's hooks launch the buckets
      reducer.finish();
      if (masters) masters->gradients_to_masters();
      ++steps_tried;
      if (scaler) {
        if (ch09::scaled_step(*scaler, optimizer, stepped, [&] { ++steps_taken; }, comm) && masters)
          masters->masters_to_model();
      } else {
        optimizer.step();
        ++steps_taken;
        if (masters) masters->masters_to_model();
      }
      meter.after_step(loss, batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    meter.report(totals, eval.mean_loss, eval.accuracy());
  }
  const double bytes_per_step = static_cast<double>(comm.stats().bytes_sent() - bytes_sent_before) /
                                static_cast<double>(std::max<int64_t>(1, steps_tried));
  std::string config = precision == "fp32" ? "fp32" : precision + (master_weights ? ", master weights" : ", autocast");
  if (wire != "fp32") config += ", " + wire + " on the wire";
  if (checkpoint_every > 0) config += fmt::format(", checkpoint every {}", checkpoint_every);
  workbook::RunResult result = meter.result(config);
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy(), eval.mean_loss, eval.correct, eval.total);
  result.details = {{"precision", precision},
                    {"master_weights", master_weights},
                    {"wire", master_weights ? precision : wire},
                    {"checkpoint_every", checkpoint_every},
                    {"bytes_sent_per_step", bytes_per_step},
                    {"saved_activation_bytes", saved_activation_bytes},
                    {"steps_taken", steps_taken},
                    {"steps_skipped", steps_tried - steps_taken}};
  if (scaler) result.details["loss_scale"] = scaler->scale_value();
  program.say("per step: each rank sent {} (counted); the first step's forward kept {} for backward (counted); "
              "{} of {} steps taken{}",
              workbook::format_bytes(static_cast<int64_t>(bytes_per_step)),
              workbook::format_bytes(saved_activation_bytes), steps_taken, steps_tried,
              scaler ? fmt::format(", loss scale {}", scaler->scale_value()) : std::string());
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv,
      {"ch09_train", "Chapter 9: fewer bytes: 16-bit compute, 16-bit gradients on the wire, activation checkpointing"},
      train);
}
