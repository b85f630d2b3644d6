// main_train.cpp — ch08_train: FashionCNN with its model split between the
// ranks, every rank stepping the same global batch.
//   --layout tensor:   fc1 and fc2 split over every rank (ex8.1 to ex8.4);
//   --layout pipeline: a stage per rank (ex8.5), the batch cut into
//                      --micro-batches, scheduled by --schedule gpipe (ex8.6)
//                      or 1f1b (ex8.7).
//
//   mpirun -n 2 ch08_train [--layout tensor|pipeline] [--schedule gpipe|1f1b] [--micro-batches 4]
//                          [--epochs 1] [--batch 100] [--lr 1e-3] [--threads N] [--train-samples N]
//                          [--data DIR] [--json FILE] [--trace FILE]
//   workbook run ch08 --ranks 2 [--solution] -- ARGS
//
// Unlike Chapters 3 to 7, the ranks do not take different samples: each holds
// part of the model, and together they compute every sample of the batch.
// samples_per_s counts each sample once.
#include <fmt/format.h>

#include "ddp.hpp"  // Chapter 3's reference: DistributedSampler, gather_batch
#include "pipeline.hpp"
#include "tensor_parallel.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/statistics.hpp"
#include "workbook/trace.hpp"

namespace {

namespace trace = workbook::trace;  // --trace: the timeline (trace.hpp)

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the run
constexpr int64_t kEvalBatch = 1000;
constexpr int64_t kHiddenFeatures = 600;  // FashionCNN's fc1 outputs: what tensor parallelism splits

int train(workbook::Program& program) {
  std::string layout = "tensor", schedule_name = "1f1b";
  int64_t micro_batches = 4;
  program.cli()
      .add_option("--layout", layout, "how the model is split: tensor (fc1 and fc2 over every rank) or pipeline "
                                      "(a stage of consecutive layers per rank)")
      ->check(CLI::IsMember({"tensor", "pipeline"}))
      ->capture_default_str();
  program.cli()
      .add_option("--schedule", schedule_name, "--layout pipeline: gpipe (all forwards, then all backwards) or "
                                               "1f1b (one forward, one backward)")
      ->check(CLI::IsMember({"gpipe", "1f1b"}))
      ->capture_default_str();
  program.cli()
      .add_option("--micro-batches", micro_batches, "--layout pipeline: micro-batches per batch (must divide --batch)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int ranks = program.ranks();
  const bool pipelined = layout == "pipeline";
  if (pipelined) {
    WB_CHECK(ranks <= ch08::kBlocks, "--layout pipeline puts a stage on each rank, and FashionCNN has {} blocks to "
             "cut (conv1, conv2, fc1, fc2, fc3): {} ranks are too many", ch08::kBlocks, ranks);
    WB_CHECK(flags.batch % micro_batches == 0, "--micro-batches {} does not divide --batch {} into equal micro-batches",
             micro_batches, flags.batch);
  } else {
    WB_CHECK(ranks <= kHiddenFeatures, "--layout tensor splits fc1's {} features over the ranks: {} ranks are too many",
             kHiddenFeatures, ranks);
  }
  WB_CHECK(flags.train_samples < 0 || flags.train_samples >= flags.batch,
           "--train-samples {} is less than one batch (--batch {})", flags.train_samples, flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const workbook::FashionMnist data = program.load_data();

  // Every rank builds the same whole model from the same seed, then keeps its part.
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, 0));
  workbook::FashionCNN full;
  full.to(device);
  std::shared_ptr<ch08::TensorParallelFashionCNN> tensor_parallel;
  std::shared_ptr<ch08::PipelineStage> stage;
  std::shared_ptr<torch::nn::Module> part;  // what this rank holds and steps
  if (pipelined) {
    part = stage = std::make_shared<ch08::PipelineStage>(full, comm, flags.seed);
  } else {
    part = tensor_parallel = std::make_shared<ch08::TensorParallelFashionCNN>(full, comm, 0.25, flags.seed);
  }
  const ch08::Schedule schedule = schedule_name == "gpipe" ? ch08::Schedule::GPipe : ch08::Schedule::OneFOneB;
  torch::optim::Adam optimizer(part->parameters(), torch::optim::AdamOptions(flags.lr));
  const int64_t held = workbook::count_parameters(*part);

  // One order of the samples for every rank: a sampler of one replica.
  ch03::DistributedSampler sampler(data.train.size(), 1, 0, /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = sampler.num_samples() / flags.batch;  // whole batches: micro-batches must divide
  program.say("ch08_train: FashionCNN, {} rank(s) ({}), layout {}{}, {} of {} parameters on rank 0, batch {} on "
              "every rank, {} train / {} test samples, Adam lr {}, device {}, {} thread(s) per rank",
              ranks, program.env().launcher, layout,
              pipelined ? fmt::format(" ({}, {} micro-batches of {})", schedule_name, micro_batches,
                                      flags.batch / micro_batches)
                        : std::string(": fc1 and fc2 split"),
              held, workbook::count_parameters(full), flags.batch, data.train.size(), data.test.size(), flags.lr,
              device.str(), flags.threads);

  workbook::EpochMeter meter(program, kWarmupSteps, /*data_parallel_ranks=*/1);
  ch08::Evaluation eval;
  std::vector<double> step_s, compute_s;  // the pipeline's timed steps on this stage
  int64_t peak_held = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const torch::Tensor indices = sampler.indices();
    meter.begin_epoch(epoch, steps_per_epoch);
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      meter.before_step(step);
      trace::Span loading(trace::Kind::Data, "batch");
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, step * flags.batch, flags.batch);
      loading.end();
      optimizer.zero_grad();
      torch::Tensor loss;  // undefined on a pipeline's stages before the last
      if (pipelined) {
        // On the timeline: each micro-batch's F and B, and the sends between them.
        const double started = workbook::now_seconds();
        const ch08::StageStepStats stats =
            ch08::pipeline_step(*stage, schedule, batch.images, batch.labels, micro_batches);
        if (epoch > 1 || step >= kWarmupSteps) {
          step_s.push_back(workbook::now_seconds() - started);
          compute_s.push_back(stats.compute_s);
        }
        peak_held = std::max(peak_held, stats.peak_held);
        if (stage->last_stage()) loss = torch::tensor(stats.loss);
      } else {
        // On the timeline: fc2's all-reduce inside forward, fc1's inside backward.
        trace::Span training(trace::Kind::Compute, "forward and backward");
        loss = torch::nn::functional::cross_entropy(tensor_parallel->forward(batch.images), batch.labels);
        loss.backward();
      }
      optimizer.step();
      meter.after_step(loss, batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();
    eval = pipelined ? ch08::evaluate_pipeline(*stage, data.test.images, data.test.labels, kEvalBatch)
                     : ch08::evaluate_tensor_parallel(*tensor_parallel, data.test.images, data.test.labels, kEvalBatch);
    meter.report(totals, eval.mean_loss, eval.accuracy);
  }
  workbook::RunResult result = meter.result(
      pipelined ? fmt::format("pipeline of {} stages, {}, {} micro-batches", ranks, schedule_name, micro_batches)
                : fmt::format("tensor parallel over {} rank(s)", ranks));
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy, eval.mean_loss, eval.correct, eval.total);
  result.details = {{"layout", layout}, {"parameters_on_rank_0", held},
                    {"parameters_in_model", workbook::count_parameters(full)}};
  if (pipelined) {
    // The bubble on each stage: the share of its step spent outside forward
    // and backward (waiting for a neighbour, or sending), from the medians.
    const double idle = step_s.empty() ? 0.0 : 1.0 - workbook::median(compute_s) / workbook::median(step_s);
    const torch::Tensor idle_per_stage = comm.all_gather(torch::tensor({idle}, torch::kFloat64).to(device)).cpu();
    const torch::Tensor held_per_stage = comm.all_gather(torch::tensor({peak_held}, torch::kInt64).to(device)).cpu();
    std::vector<double> bubbles(idle_per_stage.data_ptr<double>(), idle_per_stage.data_ptr<double>() + ranks);
    std::vector<int64_t> helds(held_per_stage.data_ptr<int64_t>(), held_per_stage.data_ptr<int64_t>() + ranks);
    const double ideal = static_cast<double>(ranks - 1) / static_cast<double>(micro_batches + ranks - 1);
    result.details["schedule"] = schedule_name;
    result.details["micro_batches"] = micro_batches;
    result.details["bubble_per_stage"] = bubbles;
    result.details["bubble_ideal"] = ideal;
    result.details["peak_micro_batches_held_per_stage"] = helds;
    program.say("bubble per stage (share of a step outside forward and backward, medians): {:.3f}; "
                "(p-1)/(m+p-1) = {:.3f}; micro-batches held at the peak per stage: {}",
                fmt::join(bubbles, ", "), ideal, fmt::join(helds, ", "));
  }
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch08_train", "Chapter 8: FashionCNN with its model split between the ranks (tensor or pipeline)"},
      train);
}
