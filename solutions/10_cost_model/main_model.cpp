// main_model.cpp — ch10_model: predict, then measure, on whatever link the
// ranks are joined by (the emulated cluster's, `workbook model`).
//
//   mpirun -n 2 ch10_model --measure link
//   mpirun -n 4 ch10_model --measure allreduce --algorithm ring|recursive_doubling|rabenseifner|workbook_ring
//                          [--alpha S --beta S_PER_BYTE] [--max-bytes B] [--max-seconds S]
//   mpirun -n 2 ch10_model --measure steps|pipeline|tensor [--alpha S --beta S_PER_BYTE] [--blocks 8] [--width 512]
//                          [--batch 256] [--steps 5]
//   workbook model     (brings the emulated cluster up at each link rate, runs these, takes it down)
//
//   link       ping-pong between ranks 0 and 1 over sizes from 1 byte up,
//              the one-way time (half the round trip, median), and the line
//              α + n·β fitted to them (ex10.1)
//   allreduce  the all-reduce of 4 bytes to --max-bytes, each size timed
//              (the slowest rank, median over repeats) and predicted by
//              ex10.4's closed form on the fitted link. ring,
//              recursive_doubling, rabenseifner: Open MPI's own all-reduce,
//              made to use that algorithm (Note [making Open MPI use one
//              algorithm]); workbook_ring: Chapter 4's ring
//   steps      Chapter 9's BlockMlp of equal blocks: the time of each layer's
//              forward and backward and of Adam's step, measured on every
//              rank at once, then each layout's step predicted (ex10.5,
//              ex10.6) and measured: DDP after backward, DDP with buckets
//              (the best cap and others), ZeRO stages 1 to 3
//   pipeline   equal blocks (equal_blocks.hpp) in as many equal stages as
//              ranks, GPipe and 1F1B with 1, 2, 4 and 8 micro-batches: each
//              step predicted (ex10.6) and measured, and its measured idle
//              share held against (p − 1)/(m + p − 1)
//   tensor     the same blocks split over every rank (Chapter 8's layers):
//              the step predicted (ex10.6) and measured
// Without --alpha and --beta, every measurement but link fits the link first.
// Rank 0 writes {"type": "model", "kind": ..., "predicted": s, "measured": s}
// lines to --json; `workbook model` adds the nodes and the link.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <map>

#include "block_mlp.hpp"
#include "cost_model.hpp"
#include "equal_blocks.hpp"
#include "measure.hpp"
#include "reducer.hpp"
#include "ring.hpp"
#include "sharding.hpp"
#include "step_model.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"

namespace {

using namespace ch10::measure;

int model_main(workbook::Program& program) {
  std::string measure = "link", algorithm = "ring";
  std::optional<double> alpha, beta;
  int64_t max_bytes = int64_t{64} << 20;
  double max_seconds = 3.0;
  bool quick = false;
  StepsOptions steps;
  steps.model.dropout = 0.0;
  LayoutOptions layouts;
  int64_t blocks = 8, width = 512;
  int timed_steps = 5;
  program.flags().batch = 256;
  program.flags().threads = 1;
  CLI::App& app = program.cli();
  app.add_option("--measure", measure, "link, allreduce, steps, pipeline or tensor")
      ->check(CLI::IsMember({"link", "allreduce", "steps", "pipeline", "tensor"}))
      ->capture_default_str();
  app.add_option("--algorithm", algorithm, "allreduce: ring, recursive_doubling, rabenseifner (Open MPI's) or workbook_ring")
      ->check(CLI::IsMember({"ring", "recursive_doubling", "rabenseifner", "workbook_ring"}))
      ->capture_default_str();
  app.add_option("--alpha", alpha, "the link's seconds per message (with --beta; without them: fitted first)");
  app.add_option("--beta", beta, "the link's seconds per byte")->check(CLI::NonNegativeNumber);
  app.add_option("--max-bytes", max_bytes, "allreduce: the largest message")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-seconds", max_seconds, "allreduce: skip sizes predicted to take longer")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--blocks", blocks, "steps, pipeline, tensor: the model's blocks")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--width", width, "steps, pipeline, tensor: the blocks' width")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--steps", timed_steps, "steps, pipeline, tensor: timed steps per layout")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--quick", quick, "fewer and smaller sizes, fewer steps (CI)");
  const workbook::TrainFlags& flags = program.parse();
  WB_CHECK(alpha.has_value() == beta.has_value(), "--alpha and --beta go together (or neither: the link is fitted)");
  if (quick) max_bytes = std::min<int64_t>(max_bytes, 4 << 20), timed_steps = std::min(timed_steps, 3);
  steps.model.blocks = layouts.model.blocks = blocks;
  steps.model.width = layouts.model.width = width;
  steps.steps = layouts.steps = timed_steps;
  steps.local_batch = program.local_batch(flags.batch);
  layouts.batch = flags.batch;  // a pipeline's stages and a tensor group's ranks share one batch
  if (quick) layouts.micro_batches = {1, 4};
  if (measure != "link")
    force_open_mpi_algorithm(measure == "allreduce" && algorithm != "workbook_ring" ? algorithm : "ring");
  workbook::Communicator& comm = program.connect();
  WB_CHECK(comm.size() >= 2, "{} needs 2 ranks or more, got {}", program.name(), comm.size());
  const bool power_of_two = (comm.size() & (comm.size() - 1)) == 0;
  WB_CHECK(power_of_two || algorithm == "ring" || algorithm == "workbook_ring" || measure != "allreduce",
           "--algorithm {} needs a power of two ranks, got {}", algorithm, comm.size());

  const ch10::Link link =
      alpha ? ch10::Link{*alpha, *beta} : measure_link(program, quick || measure != "link");
  if (measure == "allreduce") measure_allreduce(program, algorithm, link, max_bytes, max_seconds);
  if (measure == "steps") measure_steps(program, link, steps);
  if (measure == "pipeline") measure_pipeline(program, link, layouts);
  if (measure == "tensor") measure_tensor_parallel(program, link, layouts);
  workbook::BenchResult result;
  result.config = measure == "allreduce" ? fmt::format("allreduce {}", algorithm) : measure;
  result.headline = {{"alpha", link.alpha_s}, {"beta", link.beta_s_per_byte}};
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(argc, argv, {"ch10_model", "predict each collective's and each layout's time, then measure it"},
                                model_main);
}
