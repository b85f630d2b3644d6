// measure_steps.cpp — ch10_model's profile and the data-parallel layouts' steps (measure.hpp).
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

// ---- steps: a profile, then each layout --------------------------------------------------

torch::Tensor loss_of(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

// The model's layers as Chapter 7's stage 3 calls them, which are also the
// layers the profile times.
std::vector<ch07::Layer> block_mlp_layers(ch09::BlockMlp& model) {
  ch09::BlockMlp* m = &model;
  std::vector<ch07::Layer> layers;
  layers.push_back({"input", m->input->parameters(),
                    [m](const torch::Tensor& x) { return torch::relu(m->input->forward(x.flatten(1))); }});
  for (size_t b = 0; b < m->blocks.size(); ++b)
    layers.push_back({fmt::format("block{}", b), m->blocks[b]->parameters(), [m, b](const torch::Tensor& x) {
                        return x + torch::relu(m->blocks[b]->forward(x));
                      }});
  layers.push_back({"output", m->output->parameters(), [m](const torch::Tensor& x) { return m->output->forward(x); }});
  return layers;
}

// Whole steps without communication, timed on every rank at once: the
// slowest rank's median forward, backward and Adam's step on every parameter.
WholeSteps time_whole_steps(workbook::Communicator& comm, torch::nn::Module& model,
                            const std::function<torch::Tensor()>& loss) {
  torch::optim::Adam adam(model.parameters(), torch::optim::AdamOptions(1e-4));
  std::vector<double> forward, backward, optimizer;
  for (int k = 0; k <= 7; ++k) {
    adam.zero_grad();
    double start = now_s();
    torch::Tensor value = loss();
    const double forward_s = now_s() - start;
    start = now_s();
    value.backward();
    const double backward_s = now_s() - start;
    start = now_s();
    adam.step();
    if (k > 0) forward.push_back(forward_s), backward.push_back(backward_s), optimizer.push_back(now_s() - start);
  }
  model.zero_grad();
  return {slowest(comm, workbook::median(forward)), slowest(comm, workbook::median(backward)),
          slowest(comm, workbook::median(optimizer))};
}

// Note: [a profile in layers, a total from whole steps]
// Each layer's forward and backward timed alone (median of repeats) gives
// the profile its shape, but not its total: a whole step also pays for
// autograd's bookkeeping, allocations and the loss, which no layer alone
// does (here about a fifth more). So the whole model's forward and
// backward are timed too, without communication, and the layers' times are
// scaled to add up to them. Every rank measures at once, as in a step
// (they share the machine); the slowest rank's times are kept, layer by
// layer, so that every rank holds the same profile. And Adam's
// step on every parameter.
ch10::Profile measure_profile(workbook::Communicator& comm, ch09::BlockMlp& model, const torch::Tensor& images,
                              const torch::Tensor& labels) {
  ch10::Profile profile;
  torch::Tensor x = images;
  const int repeats = 7;
  for (ch07::Layer& layer : block_mlp_layers(model)) {
    std::vector<double> forward, backward;
    torch::Tensor out;
    for (int k = 0; k <= repeats; ++k) {
      const torch::Tensor in = x.detach().requires_grad_(layer.name != "input");
      double start = now_s();
      out = layer.forward(in);
      torch::Tensor scalar = layer.name == "output" ? loss_of(out, labels) : out.sum();
      const double forward_s = now_s() - start;
      start = now_s();
      scalar.backward();
      if (k > 0) forward.push_back(forward_s), backward.push_back(now_s() - start);
    }
    int64_t parameters = 0;
    for (const torch::Tensor& p : layer.parameters) parameters += p.numel();
    profile.layers.push_back({layer.name, workbook::median(forward), workbook::median(backward), parameters});
    x = out.detach();
  }
  // Every rank must hold the same profile: the bucket cap chosen from it
  // decides which gradients each rank exchanges together.
  std::vector<double> layer_times;
  for (const ch10::LayerProfile& layer : profile.layers) layer_times.push_back(layer.forward_s), layer_times.push_back(layer.backward_s);
  layer_times = slowest(comm, layer_times);
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    profile.layers[i].forward_s = layer_times[2 * i];
    profile.layers[i].backward_s = layer_times[2 * i + 1];
  }
  const WholeSteps whole = time_whole_steps(comm, model, [&] { return loss_of(model.forward(images), labels); });
  const double forward_scale = whole.forward_s / profile.forward_s();
  const double backward_scale = whole.backward_s / profile.backward_s();
  for (ch10::LayerProfile& layer : profile.layers) layer.forward_s *= forward_scale, layer.backward_s *= backward_scale;
  profile.optimizer_s = whole.optimizer_s;
  return profile;
}

// One layout's step, measured: a fresh model (the same on every rank), two
// warm-up steps, then the median over `steps` of the slowest rank's time.

MeasuredStep measure_step(workbook::Communicator& comm, int steps, const std::function<void()>& step) {
  for (int k = 0; k < 2; ++k) step();
  const workbook::CommStats before = comm.stats();
  std::vector<double> times;
  for (int k = 0; k < steps; ++k) {
    comm.barrier();
    const double start = now_s();
    step();
    times.push_back(slowest(comm, now_s() - start));
  }
  const workbook::CommStats after = comm.stats();
  // The barriers and the timing's all-gathers are the measurement's, not the step's.
  const int64_t own_collectives = 2 * steps;
  return {workbook::median(times), (after.bytes_sent() - before.bytes_sent()) / steps,
          (after.collectives() - before.collectives() - own_collectives) / steps};
}

// A layout's step, predicted and measured: a table row and a JSON line (rank 0's).
void report_step(workbook::Program& program, const workbook::Table& table, const std::string& layout,
                 const ch10::StepPrediction& predicted, double measured_s, nlohmann::json extra,
                 const std::string& last_column) {
  program.say("{}", table.row({layout, fmt::format("{:.1f}", measured_s * 1e3), fmt::format("{:.1f}", predicted.total_s() * 1e3),
                               fmt::format("{:.2f}", predicted.total_s() / measured_s),
                               fmt::format("{:.1f}", predicted.compute_s * 1e3),
                               fmt::format("{:.1f}", predicted.exposed_s * 1e3), last_column}));
  nlohmann::json line = {{"type", "model"}, {"kind", "step"}, {"layout", layout}, {"ranks", program.comm().size()},
                         {"measured", measured_s}, {"predicted", predicted.total_s()},
                         {"compute_s", predicted.compute_s}, {"communication_s", predicted.communication_s},
                         {"exposed_s", predicted.exposed_s}};
  line.update(extra);
  program.json().write(line);
}

void measure_steps(workbook::Program& program, const ch10::Link& link, const StepsOptions& options) {
  workbook::Communicator& comm = program.comm();
  const int ranks = comm.size();
  torch::manual_seed(1000 + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const torch::Tensor images = torch::rand({options.local_batch, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {options.local_batch}, torch::kInt64);
  auto fresh_model = [&] {
    torch::manual_seed(7);  // the same weights on every rank
    return std::make_shared<ch09::BlockMlp>(options.model);
  };
  auto profiled = fresh_model();
  const ch10::Profile profile = measure_profile(comm, *profiled, images, labels);
  program.say("profile (slowest rank, local batch {}): forward {:.1f} ms, backward {:.1f} ms, Adam {:.1f} ms, "
              "{} parameters ({:.1f} MiB of gradients)",
              options.local_batch, profile.forward_s() * 1e3, profile.backward_s() * 1e3, profile.optimizer_s * 1e3,
              profile.parameters(), profile.parameter_bytes() / double(1 << 20));

  workbook::Table table({{"layout", 24}, {"measured ms", 12}, {"predicted ms", 12}, {"pred/meas", 9},
                         {"compute", 8}, {"exposed", 8}, {"sent MiB", 8}});
  program.say("{}", table.header());
  auto report = [&](const std::string& layout, const ch10::StepPrediction& predicted, const MeasuredStep& measured,
                    nlohmann::json extra) {
    extra.update({{"bytes_sent", measured.bytes_sent_per_step}, {"collectives", measured.collectives_per_step}});
    report_step(program, table, layout, predicted, measured.seconds, extra,
                fmt::format("{:.2f}", measured.bytes_sent_per_step / double(1 << 20)));
  };

  // DDP: Chapter 4's reducer, one bucket reduced after backward, then buckets overlapped.
  auto ddp = [&](int64_t cap, bool overlap) {
    auto model = fresh_model();
    torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-4));
    ch04::ReducerOptions reducer_options;
    reducer_options.first_bucket_bytes = cap;
    reducer_options.bucket_cap_bytes = cap;
    reducer_options.overlap = overlap;
    ch04::BucketReducer reducer(model->parameters(), comm, reducer_options);
    return measure_step(comm, options.steps, [&] {
      adam.zero_grad();
      loss_of(model->forward(images), labels).backward();
      reducer.finish();
      adam.step();
    });
  };
  const int64_t everything = int64_t{1} << 40;
  report("ddp_after_backward", ch10::predict_ddp_after_backward(profile, link, ranks), ddp(everything, false), nlohmann::json::object());
  const int64_t best = ch10::best_bucket_bytes(profile, link, ranks);
  const int64_t block_bytes = options.model.width * (options.model.width + 1) * profile.bytes_per_parameter;
  std::vector<int64_t> caps = {block_bytes, 4 * block_bytes, best};
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  for (const int64_t cap : caps)
    report(fmt::format("ddp_buckets {:.3g} MiB{}", cap / double(1 << 20), cap == best ? " best" : ""),
           ch10::predict_ddp_buckets(profile, link, ranks, cap), ddp(cap, true),
           {{"bucket_bytes", cap}, {"best", cap == best}});

  // ZeRO: Chapter 7's stages, Adam on each rank's shard.
  for (int stage = 1; stage <= 3; ++stage) {
    auto model = fresh_model();
    ch07::ShardingOptions sharding_options;
    if (stage == 3) sharding_options.layers = block_mlp_layers(*model);
    auto sharding = ch07::make_sharding(stage, *model, comm, ch07::adam(1e-4), sharding_options);
    const MeasuredStep measured = measure_step(comm, options.steps, [&] {
      sharding->zero_grad();
      loss_of(sharding->forward(*model, images), labels).backward();
      sharding->step();
    });
    report(fmt::format("zero{}", stage), ch10::predict_zero(stage, profile, link, ranks), measured, nlohmann::json::object());
  }
}

}  // namespace ch10::measure
