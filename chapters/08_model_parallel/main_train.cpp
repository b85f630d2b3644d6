// main_train.cpp — ch08_train: FashionCNN with its model split between the
// ranks, every rank stepping the same global batch.
//   --layout tensor:   fc1 and fc2 split over every rank (ex8.1 to ex8.4);
//   --layout pipeline: a stage per rank (ex8.5), the batch cut into
//                      --micro-batches, scheduled by --schedule gpipe (given)
//                      or 1f1b (ex8.7);
//   --layout hybrid:   groups of --tensor-ranks T split the model, the
//                      ranks / T groups train on different samples (ex8.8, ex8.9);
//                      --tensor-groups consecutive (ranks 0..T-1, ...: a node,
//                      with T ranks per node) or strided (across the nodes).
//
//   mpirun -n 2 ch08_train [--layout tensor|pipeline|hybrid] [--schedule gpipe|1f1b] [--micro-batches 4]
//                          [--tensor-ranks 2] [--tensor-groups consecutive|strided]
//                          [--epochs 1] [--batch 100] [--lr 1e-3] [--threads N] [--train-samples N]
//                          [--data DIR] [--json FILE] [--trace FILE]
//   workbook run ch08 --ranks 2 [--solution] -- ARGS
//
// Unlike Chapters 3 to 7, the ranks of a tensor group or a pipeline do not
// take different samples: each holds part of the model, and together they
// compute every sample of their batch. samples_per_s counts each sample once.
// --layout hybrid also prints what each group sends per step and whether its
// ranks share a node: what the layout puts on the link between nodes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include "ddp.hpp"  // Chapter 3's reference: DistributedSampler, gather_batch
#include "hybrid.hpp"
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

// The hosts of a group's ranks, in its order, and whether they are one.
struct GroupHosts {
  std::vector<std::string> hosts;
  bool one_node() const { return std::all_of(hosts.begin(), hosts.end(), [&](auto& h) { return h == hosts[0]; }); }
};
GroupHosts hosts_of(workbook::Communicator& group) {
  constexpr int64_t kLength = 64;
  char name[kLength] = {};
  gethostname(name, kLength - 1);
  torch::Tensor mine = torch::zeros({kLength}, torch::kUInt8);
  std::memcpy(mine.data_ptr(), name, kLength);
  const torch::Tensor all = group.all_gather(mine.to(group.device())).cpu();
  GroupHosts g;
  for (int r = 0; r < group.size(); ++r) g.hosts.emplace_back(reinterpret_cast<const char*>(all[r].data_ptr()));
  return g;
}

int64_t all_reduced(const workbook::Communicator& group) {
  return group.stats().elements[static_cast<int>(workbook::CommOp::AllReduce)];
}

// Bytes a rank sends for `elements` all-reduced among `ranks`, as a ring would.
double ring_bytes(int64_t elements, int ranks) {
  return ranks > 1 ? 2.0 * (ranks - 1) / ranks * 4.0 * static_cast<double>(elements) : 0.0;
}

int train(workbook::Program& program) {
  std::string layout = "tensor", schedule_name = "1f1b", tensor_groups_name = "consecutive";
  int64_t micro_batches = 4;
  int tensor_ranks = 2;
  program.cli()
      .add_option("--layout", layout, "how the model is split: tensor (fc1 and fc2 over every rank), pipeline "
                                      "(a stage of consecutive layers per rank) or hybrid (tensor groups, data "
                                      "parallel between them)")
      ->check(CLI::IsMember({"tensor", "pipeline", "hybrid"}))
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
  program.cli()
      .add_option("--tensor-ranks", tensor_ranks, "--layout hybrid: ranks per tensor group (must divide the ranks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  program.cli()
      .add_option("--tensor-groups", tensor_groups_name, "--layout hybrid: consecutive (ranks 0..T-1, T..2T-1, ...) "
                                                         "or strided (ranks 0, D, 2D, ...; D = ranks / T)")
      ->check(CLI::IsMember({"consecutive", "strided"}))
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int ranks = program.ranks();
  const bool pipelined = layout == "pipeline", hybrid = layout == "hybrid";
  if (!hybrid) tensor_ranks = ranks;  // --layout tensor: one tensor group of every rank
  const int data_ranks = hybrid ? ranks / tensor_ranks : 1;
  if (pipelined) {
    WB_CHECK(ranks <= ch08::kBlocks, "--layout pipeline puts a stage on each rank, and FashionCNN has {} blocks to "
             "cut (conv1, conv2, fc1, fc2, fc3): {} ranks are too many", ch08::kBlocks, ranks);
    WB_CHECK(flags.batch % micro_batches == 0, "--micro-batches {} does not divide --batch {} into equal micro-batches",
             micro_batches, flags.batch);
  } else {
    WB_CHECK(ranks % tensor_ranks == 0, "{} ranks do not make groups of --tensor-ranks {}: the ranks must be a "
             "multiple of it", ranks, tensor_ranks);
    WB_CHECK(tensor_ranks <= kHiddenFeatures, "a tensor group splits fc1's {} features: {} ranks in one are too many",
             kHiddenFeatures, tensor_ranks);
    WB_CHECK(flags.batch % data_ranks == 0, "--batch {} is the global batch and must divide evenly among the {} data "
             "groups (ranks / --tensor-ranks)", flags.batch, data_ranks);
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
  ch08::HybridGroups groups;
  if (pipelined) {
    part = stage = std::make_shared<ch08::PipelineStage>(full, comm, flags.seed);
  } else if (hybrid) {
    groups = ch08::make_hybrid_groups(comm, tensor_ranks, tensor_groups_name == "strided"
                                                               ? ch08::TensorGroups::Strided
                                                               : ch08::TensorGroups::Consecutive);
    // A tensor group's ranks draw one dropout mask; each data group its own,
    // as each rank of Chapter 3's DDP draws its own (seeds.hpp).
    part = tensor_parallel = std::make_shared<ch08::TensorParallelFashionCNN>(
        full, *groups.tensor, 0.25, workbook::dropout_seed(flags.seed, 0, groups.data->rank()));
  } else {
    part = tensor_parallel = std::make_shared<ch08::TensorParallelFashionCNN>(full, comm, 0.25, flags.seed);
  }
  const ch08::Schedule schedule = schedule_name == "gpipe" ? ch08::Schedule::GPipe : ch08::Schedule::OneFOneB;
  torch::optim::Adam optimizer(part->parameters(), torch::optim::AdamOptions(flags.lr));
  const int64_t held = workbook::count_parameters(*part);

  // One order of the samples for every rank of a tensor group or pipeline;
  // each data group its own share of them.
  const int data_rank = groups.data ? groups.data->rank() : 0;
  ch03::DistributedSampler sampler(data.train.size(), data_ranks, data_rank, /*shuffle=*/true, flags.seed);
  const int64_t local_batch = flags.batch / data_ranks;
  const int64_t steps_per_epoch = sampler.num_samples() / local_batch;  // whole batches: micro-batches must divide
  program.say("ch08_train: FashionCNN, {} rank(s) ({}), layout {}{}, {} of {} parameters on rank 0, batch {} on "
              "every rank, {} train / {} test samples, Adam lr {}, device {}, {} thread(s) per rank",
              ranks, program.env().launcher, layout,
              pipelined ? fmt::format(" ({}, {} micro-batches of {})", schedule_name, micro_batches,
                                      flags.batch / micro_batches)
              : hybrid  ? fmt::format(": {} {} tensor group(s) of {} rank(s), {} data group(s) of {}, {} samples each",
                                      data_ranks, tensor_groups_name, tensor_ranks, tensor_ranks, data_ranks, local_batch)
                        : std::string(": fc1 and fc2 split"),
              held, workbook::count_parameters(full), flags.batch, data.train.size(), data.test.size(), flags.lr,
              device.str(), flags.threads);

  GroupHosts tensor_hosts, data_hosts;
  if (hybrid) {
    tensor_hosts = hosts_of(*groups.tensor);
    data_hosts = hosts_of(*groups.data);
    program.say("rank 0's tensor group on {}, its data group on {}", fmt::join(tensor_hosts.hosts, ", "),
                fmt::join(data_hosts.hosts, ", "));
  }
  workbook::EpochMeter meter(program, kWarmupSteps, data_ranks);
  ch08::Evaluation eval;
  std::vector<double> step_s, compute_s;  // the pipeline's timed steps on this stage
  int64_t tensor_elements = 0, data_elements = 0;  // all-reduced by the hybrid's training steps (not evaluation)
  int64_t peak_held = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const torch::Tensor indices = sampler.indices();
    meter.begin_epoch(epoch, steps_per_epoch);
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      meter.before_step(step);
      trace::Span loading(trace::Kind::Data, "batch");
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, step * local_batch, local_batch);
      loading.end();
      torch::Tensor loss;  // undefined on a pipeline's stages before the last
      if (pipelined) {
        optimizer.zero_grad();
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
        optimizer.step();
      } else if (hybrid) {
        // On the timeline: the tensor group's all-reduces inside forward and
        // backward, the data group's after backward.
        trace::Span training(trace::Kind::Compute, "hybrid step: forward, backward, data group's all-reduce, Adam");
        const int64_t tensor_before = all_reduced(*groups.tensor), data_before = all_reduced(*groups.data);
        loss = ch08::hybrid_train_step(*tensor_parallel, optimizer, [&] {
          return torch::nn::functional::cross_entropy(tensor_parallel->forward(batch.images), batch.labels);
        }, groups);
        tensor_elements += all_reduced(*groups.tensor) - tensor_before;
        data_elements += all_reduced(*groups.data) - data_before;
      } else {
        // On the timeline: fc2's all-reduce inside forward, fc1's inside backward.
        trace::Span training(trace::Kind::Compute, "forward and backward");
        optimizer.zero_grad();
        loss = torch::nn::functional::cross_entropy(tensor_parallel->forward(batch.images), batch.labels);
        loss.backward();
        optimizer.step();
      }
      meter.after_step(loss, batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();
    eval = pipelined ? ch08::evaluate_pipeline(*stage, data.test.images, data.test.labels, kEvalBatch)
                     : ch08::evaluate_tensor_parallel(*tensor_parallel, data.test.images, data.test.labels, kEvalBatch);
    meter.report(totals, eval.mean_loss, eval.accuracy);
  }
  workbook::RunResult result = meter.result(
      pipelined ? fmt::format("pipeline of {} stages, {}, {} micro-batches", ranks, schedule_name, micro_batches)
      : hybrid  ? fmt::format("hybrid: {} tensor groups of {}, {}", data_ranks, tensor_ranks, tensor_groups_name)
                : fmt::format("tensor parallel over {} rank(s)", ranks));
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy, eval.mean_loss, eval.correct, eval.total);
  result.details = {{"layout", layout}, {"parameters_on_rank_0", held},
                    {"parameters_in_model", workbook::count_parameters(full)}};
  if (hybrid) {
    // What each group sent per step, on this rank (the same on every rank of
    // a layout), and which of it crossed between nodes.
    const double steps = static_cast<double>(steps_per_epoch * meter.epochs_trained());
    const double tensor_bytes = ring_bytes(tensor_elements, tensor_ranks) / steps;
    const double data_bytes = ring_bytes(data_elements, data_ranks) / steps;
    const double link_bytes = (tensor_hosts.one_node() ? 0.0 : tensor_bytes) + (data_hosts.one_node() ? 0.0 : data_bytes);
    result.details["tensor_ranks"] = tensor_ranks;
    result.details["tensor_groups"] = tensor_groups_name;
    result.details["tensor_group_bytes_per_step"] = tensor_bytes;
    result.details["data_group_bytes_per_step"] = data_bytes;
    result.details["link_bytes_per_step"] = link_bytes;
    result.details["tensor_group_one_node"] = tensor_hosts.one_node();
    result.details["data_group_one_node"] = data_hosts.one_node();
    program.say("sent per step by each rank (all-reduces, as a ring sends them): tensor group {:.2f} MiB ({}), data "
                "group {:.2f} MiB ({}); over the link between nodes: {:.2f} MiB",
                tensor_bytes / (1 << 20), tensor_hosts.one_node() ? "inside a node" : "between nodes",
                data_bytes / (1 << 20), data_hosts.one_node() ? "inside a node" : "between nodes",
                link_bytes / (1 << 20));
  }
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
