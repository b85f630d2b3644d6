// main_train.cpp — ch11_train: a small GPT trained on the Jargon File over a
// mesh of data × pipeline × tensor ranks (ex11.1 to ex11.5), its validation
// loss measured on held-out text, and a sample of what it writes.
//
//   mpirun -n 4 ch11_train [--tensor 2] [--pipeline 1] (data: the ranks left)
//                          [--layers 4] [--width 256] [--heads 4] [--context 128]
//                          [--steps 200] [--batch 16] [--micro-batches 4] [--lr 3e-3]
//                          [--bf16] [--recompute] [--overlap [--bucket-mib 1]]
//                          [--sample 200] [--data DIR] [--seed 0]
//   workbook run ch11 --ranks 4 [--solution] -- ARGS
//
// Every rank builds the same whole model from --seed and keeps its part; every
// rank draws the same global batch of windows and takes its data rank's rows.
#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include "mesh.hpp"
#include "step.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"  // count_parameters
#include "workbook/op_profile.hpp"
#include "workbook/program.hpp"
#include "workbook/statistics.hpp"
#include "workbook/text_corpus.hpp"
#include "workbook/timing.hpp"

namespace {

constexpr int64_t kWarmupSteps = 3;        // untimed steps at the start
constexpr int64_t kValidationWindows = 64; // held-out windows the validation loss is the mean over

// Note: [a sample is bytes] The model writes bytes, not characters: an
// untrained one writes any of the 256, and a run of them is rarely UTF-8,
// which a terminal garbles and a JSON line cannot hold. The sample keeps
// printable ASCII and newlines, and shows every other byte as '?'.
std::string printable(const std::string& bytes) {
  std::string text = bytes;
  for (char& c : text)
    if (c != '\n' && (c < 0x20 || c > 0x7e)) c = '?';
  return text;
}

int train(workbook::Program& program) {
  ch11::MeshShape shape;
  workbook::GptOptions model;
  ch11::StepOptions step_options;
  int64_t steps = 200, sample = 200, report_every = 25;
  std::string profile_file;
  program.flags().batch = 16;
  program.flags().lr = 3e-3;
  CLI::App& cli = program.cli();
  cli.add_option("--tensor", shape.tensor, "tensor ranks: each block split over them (ex11.1)")->check(CLI::PositiveNumber);
  cli.add_option("--pipeline", shape.pipeline, "pipeline stages: the layers cut between them")->check(CLI::PositiveNumber);
  cli.add_option("--layers", model.layers, "transformer blocks")->check(CLI::PositiveNumber);
  cli.add_option("--width", model.width, "the embedding's size")->check(CLI::PositiveNumber);
  cli.add_option("--heads", model.heads, "attention heads (they divide --width, and --tensor divides them)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--context", model.context, "bytes a window holds")->check(CLI::PositiveNumber);
  cli.add_option("--steps", steps, "optimizer steps")->check(CLI::PositiveNumber);
  cli.add_option("--micro-batches", step_options.micro_batches, "per step, through the pipeline")
      ->check(CLI::PositiveNumber);
  cli.add_flag("--bf16", step_options.bfloat16, "matrix products in bfloat16 under autocast");
  cli.add_flag("--recompute", step_options.recompute, "each block's activations recomputed in backward");
  double bucket_mib = 1.0;
  cli.add_flag("--overlap", step_options.overlap,
               "the data group's collectives during backward, bucket by bucket (data ranks only)");
  cli.add_option("--bucket-mib", bucket_mib, "with --overlap: a bucket's most, in MiB")
      ->check(CLI::Range(0.0625, 1024.0));
  cli.add_option("--sample", sample, "bytes of text to generate at the end (0: none)")->check(CLI::NonNegativeNumber);
  cli.add_option("--report-every", report_every, "steps between loss lines")->check(CLI::PositiveNumber);
  cli.add_option("--profile", profile_file,
                 "rank 0's timed steps, operation by operation, into this file (workbook/op_profile.hpp)");
  const workbook::TrainFlags& flags = program.parse();
  step_options.learning_rate = flags.lr;
  step_options.bucket_cap_bytes = static_cast<int64_t>(bucket_mib * (1 << 20));

  // Note [checks before communication] (program.hpp): every rank checks the
  // flags the same way, before anything is sent.
  model.check();
  const int ranks = program.ranks();
  WB_CHECK(ranks % (shape.tensor * shape.pipeline) == 0,
           "{} ranks do not make a mesh of tensor {} × pipeline {}: the data ranks would be {} / {}", ranks,
           shape.tensor, shape.pipeline, ranks, shape.tensor * shape.pipeline);
  shape.data = ranks / (shape.tensor * shape.pipeline);
  WB_CHECK(model.heads % shape.tensor == 0, "{} heads cannot be split over {} tensor ranks", model.heads, shape.tensor);
  WB_CHECK(model.vocabulary % shape.tensor == 0, "a vocabulary of {} cannot be split over {} tensor ranks",
           model.vocabulary, shape.tensor);
  WB_CHECK(!step_options.overlap || (shape.tensor == 1 && shape.pipeline == 1),
           "--overlap needs data ranks only, not tensor {} × pipeline {} (Note [overlap at data-only layouts] in "
           "overlap.hpp)", shape.tensor, shape.pipeline);
  WB_CHECK(shape.pipeline <= model.layers, "{} pipeline stages for {} layers: at most one stage a layer",
           shape.pipeline, model.layers);
  WB_CHECK(flags.batch % (shape.data * step_options.micro_batches) == 0,
           "a global batch of {} sequences does not cut into {} data ranks × {} micro-batches", flags.batch,
           shape.data, step_options.micro_batches);
  const workbook::TextCorpus corpus = workbook::load_text_corpus(workbook::find_text_corpus(flags.data));

  workbook::Communicator& world = program.connect();
  const ch11::Mesh mesh = ch11::make_mesh(world, shape);
  torch::manual_seed(flags.seed);
  workbook::Gpt whole(model);
  const int64_t parameters = workbook::count_parameters(*whole);
  ch11::GptStage stage(*whole, mesh);
  whole = workbook::Gpt(nullptr);  // this rank keeps its part only
  const torch::Device device = world.device();  // --device's: the GPU under NCCL
  stage->to(device);  // after the split, which copies on the CPU
  ch11::GptTrainer trainer(*stage, mesh, step_options);
  program.say("{} ranks: data {} × pipeline {} × tensor {}; {} parameters, {} on rank 0; {} steps of {} "
              "sequences of {} bytes on {}{}{}{}",
              ranks, shape.data, shape.pipeline, shape.tensor, parameters, workbook::count_parameters(*stage), steps,
              flags.batch, model.context, device.str(), step_options.bfloat16 ? ", bfloat16" : "",
              step_options.recompute ? ", recomputed blocks" : "",
              step_options.overlap ? fmt::format(", the data group's collectives overlapped with backward (buckets of {} MiB)", bucket_mib)
                                   : "");

  // The same draws on every rank: each takes its data rank's rows of the global batch.
  torch::Generator windows = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 1);
  const int64_t rows = flags.batch / shape.data, first = mesh.here.data * rows;
  std::vector<double> step_s;
  std::optional<workbook::OpProfile> profile;  // opened here: a bad path fails before training
  if (!profile_file.empty() && world.rank() == 0) profile.emplace(profile_file);
  double loss = 0.0;
  const double training_started = workbook::now_seconds();
  for (int64_t step = 1; step <= steps; ++step) {
    if (step == kWarmupSteps + 1 && profile) profile->start();
    const workbook::TextBatch batch = workbook::sample_windows(corpus.train, flags.batch, model.context, windows);
    const double started = workbook::now_seconds();
    loss = trainer.step(batch.inputs.narrow(0, first, rows).to(device),
                        batch.targets.narrow(0, first, rows).to(device));
    if (step > kWarmupSteps) step_s.push_back(workbook::now_seconds() - started);
    WB_CHECK(std::isfinite(loss), "the loss is {} at step {}: the run diverged (a smaller --lr?)", loss, step);
    if (step % report_every == 0 || step == steps) program.say("step {:>5}  loss {:.4f}", step, loss);
  }

  const double training_s = workbook::now_seconds() - training_started;
  const auto timed_steps = static_cast<int64_t>(step_s.size());
  if (profile) profile->write("reference", timed_steps, workbook::mean(step_s) * timed_steps);
  // One pass of --steps batches is the run's one "epoch" (the tour's time_s).
  program.json().write({{"type", "epoch"}, {"epoch", 1}, {"train_loss", loss}, {"epoch_s", training_s}});
  torch::Generator held_out = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 2);
  const int64_t validation_rows = kValidationWindows - kValidationWindows % (shape.data * step_options.micro_batches);
  const workbook::TextBatch validation =
      workbook::sample_windows(corpus.validation, validation_rows, model.context, held_out);
  // Every data rank evaluates every window: the same loss on every rank.
  const double validation_loss =
      stage->evaluate(validation.inputs.to(device), validation.targets.to(device), step_options.micro_batches);
  std::string text;
  if (sample > 0) {
    torch::Generator draws = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 3);
    text = printable(stage->generate("hacker ", sample, 0.8, draws));
    program.say("sample: {}", text);
  }

  const double median_step_s = step_s.empty() ? 0.0 : workbook::median(step_s);
  const double tokens_per_s = median_step_s > 0 ? flags.batch * model.context / median_step_s : 0.0;
  workbook::RunResult result;
  result.config = fmt::format("GPT, data {} × pipeline {} × tensor {}", shape.data, shape.pipeline, shape.tensor);
  result.epochs = 1;  // one pass of --steps batches: the tour's time_s is epoch_s
  result.epoch_s = training_s;
  result.batch = flags.batch;
  result.local_batch = rows;
  result.train_samples = static_cast<int64_t>(corpus.train.numel());
  result.test_loss = validation_loss;
  result.samples_per_s = median_step_s > 0 ? flags.batch / median_step_s : 0.0;
  result.peak_mem_bytes = program.peak_memory_bytes();
  result.details = {{"mesh", {{"data", shape.data}, {"pipeline", shape.pipeline}, {"tensor", shape.tensor}}},
                    {"steps", steps},
                    {"train_loss", loss},
                    {"validation_loss", validation_loss},
                    {"step_s", median_step_s},
                    {"tokens_per_s", tokens_per_s},
                    {"parameters", parameters},
                    {"bfloat16", step_options.bfloat16},
                    {"recompute", step_options.recompute},
                    {"overlap", step_options.overlap},
                    {"bucket_mib", step_options.overlap ? bucket_mib : 0.0},
                    {"sample", text}};
  result.summary = fmt::format("GPT on data {} × pipeline {} × tensor {}: train loss {:.4f}, validation loss {:.4f} "
                               "(nats per byte), {:.0f} bytes/s, {:.3f} s a step (median)",
                               shape.data, shape.pipeline, shape.tensor, loss, validation_loss, tokens_per_s,
                               median_step_s);
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch11_train", "Chapter 11: a small GPT trained over a data × pipeline × tensor mesh"}, train);
}
