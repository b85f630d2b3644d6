// measure_layouts.cpp — ch10_model's pipeline and tensor parallel on equal blocks (measure.hpp).
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

namespace ch10::measure {

// ---- a pipeline and tensor parallel, on equal blocks -------------------------------------

// The equal-block model's profile: whole steps on `batch`, on every rank at
// once, cut into its equal blocks.
ch10::Profile measure_equal_profile(workbook::Communicator& comm, ch10::EqualBlocks& model, const torch::Tensor& batch) {
  const WholeSteps whole = time_whole_steps(comm, model, [&] { return ch10::equal_blocks_loss(model.forward(batch)); });
  ch10::Profile profile;
  const int64_t blocks = model.options.blocks;
  int64_t parameters = 0;
  for (const torch::Tensor& p : model.parameters()) parameters += p.numel();
  for (int64_t b = 0; b < blocks; ++b)
    profile.layers.push_back({fmt::format("block{}", b), whole.forward_s / blocks, whole.backward_s / blocks,
                              parameters / blocks});
  profile.optimizer_s = whole.optimizer_s;
  return profile;
}

// Note: [the bubble, measured] Each stage times its own forwards and
// backwards (busy) and the step's schedule; a step lasts as long as its
// slowest stage's schedule, and a stage's idle share is what of that it was
// not busy: waiting for a neighbour, in the bubble or for a message. The
// share is averaged over the stages and its median taken over the steps,
// to be held against (p − 1)/(m + p − 1), which counts only the bubble.
void measure_pipeline(workbook::Program& program, const ch10::Link& link, const LayoutOptions& options) {
  workbook::Communicator& comm = program.comm();
  const int stages = comm.size();
  WB_CHECK(options.model.blocks % stages == 0, "--measure pipeline: {} blocks do not cut into {} equal stages",
           options.model.blocks, stages);
  torch::manual_seed(1000);  // every stage the same batch: the first feeds it, the others take its shape
  const torch::Tensor batch = torch::randn({options.batch, options.model.width});
  auto fresh_model = [&] {
    torch::manual_seed(7);
    return std::make_shared<ch10::EqualBlocks>(options.model);
  };
  // Note: [a micro-batch's time, measured at its size] A micro-batch of 32
  // rows takes more than an eighth of a batch of 256's time: smaller matrix
  // products keep the core less busy. So each m's profile is measured at
  // batch / m rows and counted m times.
  std::map<int, ch10::Profile> profiles;
  for (const int m : options.micro_batches) {
    if (options.batch % m != 0) continue;
    ch10::Profile& profile = profiles[m];
    profile = measure_equal_profile(comm, *fresh_model(), batch.narrow(0, 0, options.batch / m));
    for (ch10::LayerProfile& layer : profile.layers) layer.forward_s *= m, layer.backward_s *= m;
    program.say("profile of {} equal blocks of width {} (slowest rank), {} micro-batch(es) of {} rows: "
                "forward {:.1f} ms, backward {:.1f} ms, Adam {:.1f} ms",
                options.model.blocks, options.model.width, m, options.batch / m, profile.forward_s() * 1e3,
                profile.backward_s() * 1e3, profile.optimizer_s * 1e3);
  }
  program.say("{} stages of {} blocks each", stages, options.model.blocks / stages);
  workbook::Table table({{"layout", 12}, {"measured ms", 12}, {"predicted ms", 12}, {"pred/meas", 9},
                         {"compute", 8}, {"exposed", 8}, {"idle: measured / predicted / (p-1)/(m+p-1)", 42}});
  program.say("{}", table.header());
  for (const ch10::PipelineSchedule schedule : {ch10::PipelineSchedule::GPipe, ch10::PipelineSchedule::OneFOneB}) {
    for (const auto& micro_profile : profiles) {
      const int m = micro_profile.first;  // a name of its own: the step's lambda captures it
      const ch10::Profile& profile = micro_profile.second;
      auto model = fresh_model();
      torch::optim::Adam adam(ch10::stage_parameters(*model, comm.rank(), stages), torch::optim::AdamOptions(1e-4));
      std::vector<double> busy, schedule_s;
      const MeasuredStep measured = measure_step(comm, options.steps, [&] {
        adam.zero_grad();
        const ch10::StageTimes times = ch10::pipeline_step(*model, comm, schedule, batch, m);
        adam.step();
        busy.push_back(times.busy_s), schedule_s.push_back(times.step_s);
      });
      // Note [the bubble, measured]: the timed steps only (the first two warmed up).
      const int64_t timed = options.steps, first = static_cast<int64_t>(busy.size()) - timed;
      const torch::Tensor all_busy = comm.all_gather(torch::tensor(std::vector<double>(busy.begin() + first, busy.end()), torch::kFloat64));
      const torch::Tensor all_steps = comm.all_gather(torch::tensor(std::vector<double>(schedule_s.begin() + first, schedule_s.end()), torch::kFloat64));
      const torch::Tensor idle = (1 - all_busy / std::get<0>(all_steps.max(0))).mean(0);  // per step, over the stages
      std::vector<double> idle_per_step(idle.data_ptr<double>(), idle.data_ptr<double>() + idle.numel());
      const double idle_share = workbook::median(idle_per_step);
      const int64_t boundary_bytes = options.batch / m * options.model.width * 4;
      const ch10::StepPrediction predicted = ch10::predict_pipeline(profile, link, stages, m, boundary_bytes);
      // The prediction's idle share: of the schedule (the step less the optimizer), what is not compute.
      const double optimizer_s = profile.optimizer_s / stages;
      const double idle_predicted = 1 - (predicted.compute_s - optimizer_s) / (predicted.total_s() - optimizer_s);
      report_step(program, table, fmt::format("{} m={}", ch10::schedule_name(schedule), m), predicted,
                  measured.seconds,
                  {{"micro_batches", m}, {"idle_measured", idle_share}, {"idle_predicted", idle_predicted},
                   {"bubble", ch10::bubble_fraction(stages, m)}},
                  fmt::format("{:.2f} / {:.2f} / {:.2f}", idle_share, idle_predicted, ch10::bubble_fraction(stages, m)));
    }
  }
}

// Tensor parallel over every rank: each block split (Chapter 8's layers),
// every rank on the same batch.
void measure_tensor_parallel(workbook::Program& program, const ch10::Link& link, const LayoutOptions& options) {
  workbook::Communicator& comm = program.comm();
  // Every rank the same batch. It stands for what a layer before the blocks
  // (a transformer's embedding) hands them, whose gradient the first block's
  // f all-reduces as every other block's does: it requires a gradient.
  torch::manual_seed(1000);
  const torch::Tensor batch = torch::randn({options.batch, options.model.width}).requires_grad_(true);
  torch::manual_seed(7);
  ch10::EqualBlocks full(options.model);
  const ch10::Profile profile = measure_equal_profile(comm, full, batch);
  program.say("profile of {} equal blocks of width {} (slowest rank, batch {}, whole on every rank): "
              "forward {:.1f} ms, backward {:.1f} ms, Adam {:.1f} ms",
              options.model.blocks, options.model.width, options.batch, profile.forward_s() * 1e3,
              profile.backward_s() * 1e3, profile.optimizer_s * 1e3);
  workbook::Table table({{"layout", 16}, {"measured ms", 12}, {"predicted ms", 12}, {"pred/meas", 9},
                         {"compute", 8}, {"exposed", 8}, {"all-reduces", 11}});
  program.say("{}", table.header());
  ch10::TensorParallelBlocks split(full, comm);
  torch::optim::Adam adam(split.parameters(), torch::optim::AdamOptions(1e-4));
  const MeasuredStep measured = measure_step(comm, options.steps, [&] {
    adam.zero_grad();
    ch10::equal_blocks_loss(split.forward(batch)).backward();
    adam.step();
  });
  const int64_t activation_bytes = options.batch * options.model.width * 4;
  report_step(program, table, "tensor_parallel",
              ch10::predict_tensor_parallel(profile, link, comm.size(), static_cast<int>(options.model.blocks), activation_bytes),
              measured.seconds, {{"activation_bytes", activation_bytes}}, std::to_string(measured.collectives_per_step));
}

}  // namespace ch10::measure
