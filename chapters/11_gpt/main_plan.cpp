// main_plan.cpp — ch11_plan: every layout of the GPT on these ranks,
// predicted by the plan (ex11.6) and ranked, then measured.
//
//   mpirun -n 4 ch11_plan [--layers 4] [--width 256] [--heads 4] [--context 128] [--batch 16]
//                         [--micro-batches 1,2,4] [--recompute] [--steps 6] [--predict-only] [--top K]
//   workbook run ch11 --program ch11_plan --nodes 2 --ranks-per-node 2 --solution   (the emulated cluster)
//   ch11_plan --assume-ranks 64 --assume-ranks-per-node 8 --assume-tflops 400 --assume-within-gbit 3600
//             --assume-between-gbit 400 --assume-alpha-us 10 [model flags]   (a machine not here: plan only)
//
//   1. the machine: every rank at once runs the whole model's step on its
//      share of the batch (the rate, FLOPs a second, with the cores shared as
//      they will be) and multiplies two matrices (the matrix-product rate,
//      what model-FLOPs utilization divides by); Adam's step per parameter;
//      ping-pongs within a node and between two (Chapter 10's fit)
//   2. the plan: every layout ranked by its predicted step
//   3. each layout measured: a fresh model, one warm-up step, then the
//      median over --steps of the slowest rank's step
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include <sched.h>
#include <unistd.h>

#include "measure.hpp"  // Chapter 10: measure_link, slowest, force_open_mpi_algorithm
#include "plan.hpp"
#include "step.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"

namespace {

using ch10::measure::now_s;
using ch10::measure::slowest;

// The median over `repeats` (after one warm-up) of the slowest rank's time of `work`.
double timed(workbook::Communicator& comm, int repeats, const std::function<void()>& work) {
  std::vector<double> seconds;
  for (int k = 0; k <= repeats; ++k) {
    comm.barrier();
    const double start = now_s();
    work();
    const double took = slowest(comm, now_s() - start);
    if (k > 0) seconds.push_back(took);
  }
  return workbook::median(seconds);
}

// How many ranks share rank 0's `name`, on every rank.
int ranks_sharing(workbook::Communicator& comm, const std::string& name) {
  const auto hash = static_cast<int64_t>(std::hash<std::string>{}(name) >> 1);
  const torch::Tensor all = comm.all_gather(torch::tensor({hash}, torch::kInt64));
  return static_cast<int>((all == all[0]).sum().item<int64_t>());
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// Note: [nodes and machines] A node is a host name; the emulated cluster's
// nodes are namespaces of one machine, each with its own name, sharing its
// cores. The machine is its kernel's boot id, the same in every namespace.
std::string machine_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  return id.empty() ? host_name() : id;
}

int cores_here() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

struct Rates {
  double model_flops_per_s = 0.0, matmul_flops_per_s = 0.0, optimizer_s_per_parameter = 0.0;
  std::map<int64_t, double> model_flops_per_s_at_rows;
};

// Note: [a micro-batch's rate, measured at its size] More micro-batches
// make smaller products, which run at a lower rate (Chapter 10 measured a
// stage's 32 rows costing more per row than its 256). So the model's rate is
// measured at every micro-batch size some layout will use, batch / (d·m)
// sequences, and each layout is charged the rate of its own.
// Every rank at once: the whole model's step on each such size (the rate at
// batch / ranks, the all-data layout's, is the headline), Adam's step, and a
// product of the MLP's shape.
Rates measure_rates(workbook::Communicator& comm, const workbook::GptOptions& model, const ch11::StepShape& step,
                    const std::vector<int64_t>& micro_batch_counts) {
  Rates rates;
  torch::manual_seed(5);
  workbook::Gpt whole(model);
  std::vector<int64_t> sizes;
  for (int d = 1; d <= comm.size(); ++d)
    for (const int64_t m : micro_batch_counts)
      if (comm.size() % d == 0 && step.batch % (d * m) == 0) sizes.push_back(step.batch / (d * m));
  const int64_t headline = std::max<int64_t>(1, step.batch / comm.size());
  sizes.push_back(headline);
  for (const int64_t rows : sizes) {
    if (rates.model_flops_per_s_at_rows.count(rows) > 0) continue;
    const torch::Tensor bytes = torch::randint(0, model.vocabulary, {rows, step.context + 1}, torch::kInt64);
    const torch::Tensor inputs = bytes.narrow(1, 0, step.context), targets = bytes.narrow(1, 1, step.context);
    const double step_s = timed(comm, 3, [&] {
      whole->zero_grad();
      whole->loss(inputs, targets).backward();
    });
    ch11::StepShape one = step;
    one.batch = rows;
    one.recompute = false;
    rates.model_flops_per_s_at_rows[rows] = ch11::model_flops(model, one) / step_s;
  }
  rates.model_flops_per_s = rates.model_flops_per_s_at_rows.at(headline);

  torch::optim::Adam adam(whole->parameters());
  rates.optimizer_s_per_parameter =
      timed(comm, 3, [&] { adam.step(); }) / static_cast<double>(ch11::gpt_parameters(model));

  // The rate a rank reaches on a large product of the MLP's shape (2048 rows).
  const torch::Tensor a = torch::randn({2048, model.width}), b = torch::randn({model.width, 4 * model.width});
  const double matmul_s = timed(comm, 9, [&] { (void)torch::mm(a, b); });
  rates.matmul_flops_per_s = 2.0 * a.size(0) * a.size(1) * b.size(1) / matmul_s;
  return rates;
}

std::string layout_name(const ch11::LayoutPlan& plan) {
  return fmt::format("{}x{}x{} m={}", plan.shape.data, plan.shape.pipeline, plan.shape.tensor, plan.micro_batches);
}

// One layout's step, measured: a fresh model, the same random batch on every rank.
double measure_layout(workbook::Communicator& world, const workbook::GptOptions& model, const ch11::LayoutPlan& plan,
                      const ch11::StepShape& step, int steps) {
  const ch11::Mesh mesh = ch11::make_mesh(world, plan.shape);
  torch::manual_seed(7);
  workbook::Gpt whole(model);
  ch11::GptStage stage(*whole, mesh);
  ch11::StepOptions options;
  options.micro_batches = plan.micro_batches;
  options.recompute = step.recompute;
  ch11::GptTrainer trainer(*stage, mesh, options);
  const torch::Tensor bytes = torch::randint(0, model.vocabulary, {step.batch, step.context + 1}, torch::kInt64);
  const int64_t rows = step.batch / plan.shape.data;
  const torch::Tensor mine = bytes.narrow(0, mesh.here.data * rows, rows);
  return timed(world, steps, [&] {
    trainer.step(mine.narrow(1, 0, step.context), mine.narrow(1, 1, step.context));
  });
}

using Measure = std::function<double(const ch11::LayoutPlan&)>;

// The plan, one row a layout (the first `top`, or all), each measured when
// `measure` is given: returns the measured seconds (0 when not measured).
// MFU: the model's FLOPs a rank a step over the matrix-product rate, ÷ the step.
std::vector<double> print_plan(workbook::Program& program, const std::vector<ch11::LayoutPlan>& plans, size_t top,
                               const Measure& measure, double mfu_seconds) {
  WB_CHECK(!plans.empty(), "no layout fits the model, the ranks and the batch");
  workbook::Table table({{"layout dxpxt", 13}, {"compute", 8}, {"tensor", 8}, {"pipeline", 8}, {"data", 8},
                         {"predicted", 9}, {"measured", 9}, {"pred/meas", 9}, {"MFU", 6}, {"MiB held", 8}});
  program.say("{} layouts, fastest predicted first; seconds a step", plans.size());
  program.say("{}", table.header());
  std::vector<double> measured;
  const auto seconds = [](double s) {
    return s >= 0.01 || s == 0.0 ? fmt::format("{:.3f}", s) : fmt::format("{:.1e}", s);
  };
  for (const ch11::LayoutPlan& plan : plans) {
    if (top > 0 && measured.size() == top) break;
    const double step_s = measure ? measure(plan) : 0.0;
    measured.push_back(step_s);
    const bool timed = step_s > 0;
    program.say("{}", table.row({layout_name(plan), seconds(plan.compute_s), seconds(plan.tensor_s),
                                 seconds(plan.pipeline_s), seconds(plan.data_s + plan.optimizer_s),
                                 seconds(plan.total_s()), timed ? seconds(step_s) : "-",
                                 timed ? fmt::format("{:.2f}", plan.total_s() / step_s) : "-",
                                 timed ? fmt::format("{:.2f}", mfu_seconds / step_s) : "-",
                                 fmt::format("{:.1f}", plan.bytes_held / 1048576.0)}));
    program.json().write({{"type", "plan"}, {"layout", layout_name(plan)}, {"data", plan.shape.data},
                          {"pipeline", plan.shape.pipeline}, {"tensor", plan.shape.tensor},
                          {"micro_batches", plan.micro_batches}, {"predicted", plan.total_s()},
                          {"compute", plan.compute_s}, {"tensor_s", plan.tensor_s}, {"pipeline_s", plan.pipeline_s},
                          {"data_s", plan.data_s + plan.optimizer_s}, {"measured", step_s},
                          {"mfu", timed ? mfu_seconds / step_s : 0.0}, {"bytes_held", plan.bytes_held}});
  }
  return measured;
}

int plan_main(workbook::Program& program) {
  workbook::GptOptions model;
  ch11::StepShape step;
  std::vector<int64_t> micro_batch_counts = {1, 2, 4};
  int steps = 6;
  bool predict_only = false;
  size_t top = 0;
  int assume_ranks = 0, assume_ranks_per_node = 1;
  double assume_tflops = 0.0, assume_within_gbit = 0.0, assume_between_gbit = 0.0, assume_alpha_us = 10.0;
  program.flags().batch = 16;
  program.flags().threads = 1;
  CLI::App& cli = program.cli();
  cli.add_option("--layers", model.layers, "transformer blocks")->check(CLI::PositiveNumber);
  cli.add_option("--width", model.width, "the embedding's size")->check(CLI::PositiveNumber);
  cli.add_option("--heads", model.heads, "attention heads")->check(CLI::PositiveNumber);
  cli.add_option("--context", model.context, "bytes a sequence")->check(CLI::PositiveNumber);
  cli.add_option("--micro-batches", micro_batch_counts, "the micro-batch counts to plan")
      ->delimiter(',')->check(CLI::PositiveNumber);
  cli.add_flag("--recompute", step.recompute, "each block recomputed in backward");
  cli.add_option("--steps", steps, "timed steps per layout")->check(CLI::PositiveNumber);
  cli.add_flag("--predict-only", predict_only, "rank the layouts; measure none");
  cli.add_option("--top", top, "print the first K layouts only (0: all)");
  cli.add_option("--assume-ranks", assume_ranks, "plan for this many ranks of an assumed machine; nothing measured")
      ->check(CLI::PositiveNumber);
  cli.add_option("--assume-ranks-per-node", assume_ranks_per_node, "the assumed machine's ranks a node")
      ->check(CLI::PositiveNumber);
  cli.add_option("--assume-tflops", assume_tflops, "a rank's rate on the model's work, TFLOP/s")
      ->check(CLI::PositiveNumber);
  cli.add_option("--assume-within-gbit", assume_within_gbit, "the link between ranks of a node, Gbit/s")
      ->check(CLI::PositiveNumber);
  cli.add_option("--assume-between-gbit", assume_between_gbit, "the link between nodes, Gbit/s")
      ->check(CLI::PositiveNumber);
  cli.add_option("--assume-alpha-us", assume_alpha_us, "every message's α, µs")->check(CLI::NonNegativeNumber);
  const workbook::TrainFlags& flags = program.parse();
  model.check();
  step.batch = flags.batch;
  step.context = model.context;
  if (assume_ranks > 0) {
    WB_CHECK(assume_tflops > 0 && assume_within_gbit > 0 && assume_between_gbit > 0,
             "--assume-ranks needs --assume-tflops, --assume-within-gbit and --assume-between-gbit");
    WB_CHECK(program.ranks() == 1, "an assumed machine is planned by one process, not {}", program.ranks());
    program.connect();
    ch11::Machine machine;
    machine.flops_per_s = assume_tflops * 1e12;
    machine.ranks_per_node = assume_ranks_per_node;
    machine.within_node = ch10::Link::of_rate(assume_within_gbit * 1e9, assume_alpha_us * 1e-6);
    machine.between_nodes = ch10::Link::of_rate(assume_between_gbit * 1e9, assume_alpha_us * 1e-6);
    program.say("assumed: {} ranks, {} a node, {:g} TFLOP/s a rank, {:g} Gbit/s within a node, {:g} Gbit/s between "
                "nodes, α {:g} µs; the optimizer's step not counted",
                assume_ranks, assume_ranks_per_node, assume_tflops, assume_within_gbit, assume_between_gbit,
                assume_alpha_us);
    print_plan(program, ch11::rank_layouts(model, assume_ranks, step, machine, micro_batch_counts), top, Measure{}, 0.0);
    program.finish(workbook::BenchResult{});
    return 0;
  }
  // The plan charges ring collectives (Note [making Open MPI use one algorithm]).
  ch10::measure::force_open_mpi_algorithm("ring");
  workbook::Communicator& world = program.connect();
  WB_CHECK(world.size() >= 2, "ch11_plan needs 2 ranks or more, got {}", world.size());

  // 1. The machine.
  ch11::Machine machine;
  machine.ranks_per_node = ranks_sharing(world, host_name());
  const int ranks_on_machine = ranks_sharing(world, machine_id());
  machine.ranks_per_core = std::max(1.0, static_cast<double>(ranks_on_machine) / cores_here());
  const Rates rates = measure_rates(world, model, step, micro_batch_counts);
  machine.flops_per_s = rates.model_flops_per_s * machine.ranks_per_core;
  for (const auto& [rows, rate] : rates.model_flops_per_s_at_rows)
    machine.flops_per_s_at_rows[rows] = rate * machine.ranks_per_core;
  machine.optimizer_s_per_parameter = rates.optimizer_s_per_parameter;
  const bool one_node = machine.ranks_per_node >= world.size();
  program.say("{} ranks, {} a node, {} on rank 0's machine of {} cores ({:g} a core); every rank at once: the "
              "model's step {:.2f} GFLOP/s a rank, matrix products {:.2f} GFLOP/s, Adam {:.1f} ns a parameter",
              world.size(), machine.ranks_per_node, ranks_on_machine, cores_here(), machine.ranks_per_core,
              rates.model_flops_per_s / 1e9, rates.matmul_flops_per_s / 1e9, rates.optimizer_s_per_parameter * 1e9);
  std::string by_rows;
  for (const auto& [rows, rate] : rates.model_flops_per_s_at_rows) by_rows += fmt::format(" {}: {:.2f}", rows, rate / 1e9);
  program.say("the model's step by micro-batch (sequences: GFLOP/s a rank, every rank at once):{}", by_rows);
  if (machine.ranks_per_node > 1) {
    program.say("within a node (ranks 0 and 1):");
    machine.within_node = ch10::measure::measure_link(program, true, 1);
  }
  if (!one_node) {
    program.say("between nodes (ranks 0 and {}):", machine.ranks_per_node);
    machine.between_nodes = ch10::measure::measure_link(program, true, machine.ranks_per_node);
  }
  // Note: [a flat ping-pong] Where ranks share cores, every message can cost
  // a scheduler tick whatever its size; the fit then finds β ≤ 0, which would
  // make large messages cheaper than small ones. The plan takes β = 0 there:
  // every message α, as measured.
  for (ch10::Link* link : {&machine.within_node, &machine.between_nodes})
    if (link->beta_s_per_byte < 0) {
      program.say("a link's fitted β is {:.3g} s a byte: taken as 0 (its timings do not grow with size)",
                  link->beta_s_per_byte);
      link->beta_s_per_byte = 0.0;
    }
  if (machine.ranks_per_node == 1) machine.within_node = machine.between_nodes;
  if (one_node) machine.between_nodes = machine.within_node;

  // 2. The plan, fastest first; 3. each layout measured.
  const std::vector<ch11::LayoutPlan> plans =
      ch11::rank_layouts(model, world.size(), step, machine, micro_batch_counts);
  const double flops = ch11::model_flops(model, step);
  const std::vector<double> measured = print_plan(
      program, plans, top, predict_only ? Measure{} : [&](const ch11::LayoutPlan& plan) {
        return measure_layout(world, model, plan, step, steps);
      },
      flops / world.size() / rates.matmul_flops_per_s);
  workbook::BenchResult result;
  result.config = fmt::format("plan of {} ranks", world.size());
  result.headline = {{"predicted_fastest", plans.front().total_s()}};
  if (!predict_only) {
    const size_t fastest = std::min_element(measured.begin(), measured.end()) - measured.begin();
    const double fastest_measured = measured[fastest], predicted_fastest_measured = measured.front();
    program.say("predicted fastest: {} measured {:.3f} s; measured fastest: {} {:.3f} s ({:.2f}x)",
                layout_name(plans.front()), predicted_fastest_measured, layout_name(plans[fastest]),
                fastest_measured, predicted_fastest_measured / fastest_measured);
    result.headline["measured_fastest"] = fastest_measured;
    result.headline["predicted_fastest_measured"] = predicted_fastest_measured;
  }
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(argc, argv, {"ch11_plan", "Chapter 11: every layout of the GPT predicted, then measured"},
                                plan_main);
}
