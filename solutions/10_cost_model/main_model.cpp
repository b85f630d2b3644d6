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
//              ex10.2's closed form on the fitted link. ring,
//              recursive_doubling, rabenseifner: Open MPI's own all-reduce,
//              made to use that algorithm (Note [making Open MPI use one
//              algorithm]); workbook_ring: Chapter 4's ring
//   steps      Chapter 9's BlockMlp of equal blocks: the time of each layer's
//              forward and backward and of Adam's step, measured on every
//              rank at once, then each layout's step predicted (ex10.4,
//              ex10.5) and measured: DDP after backward, DDP with buckets
//              (the best cap and others), ZeRO stages 1 to 3
//   pipeline   equal blocks (equal_blocks.hpp) in as many equal stages as
//              ranks, GPipe and 1F1B with 1, 2, 4 and 8 micro-batches: each
//              step predicted (ex10.5) and measured, and its measured idle
//              share held against (p − 1)/(m + p − 1)
//   tensor     the same blocks split over every rank (Chapter 8's layers):
//              the step predicted (ex10.5) and measured
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
#include "reducer.hpp"
#include "ring.hpp"
#include "sharding.hpp"
#include "step_model.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The slowest rank's value: a collective takes as long as its last rank.
double slowest(workbook::Communicator& comm, double seconds) {
  const torch::Tensor all = comm.all_gather(torch::tensor({seconds}, torch::kFloat64));
  return all.max().item<double>();
}

// Each element's slowest rank, so that every rank holds the same values.
std::vector<double> slowest(workbook::Communicator& comm, const std::vector<double>& seconds) {
  const torch::Tensor all = comm.all_gather(torch::tensor(seconds, torch::kFloat64));
  const torch::Tensor most = std::get<0>(all.max(0)).contiguous();
  return {most.data_ptr<double>(), most.data_ptr<double>() + most.numel()};
}

std::string bytes_text(double bytes) {
  if (bytes >= (1 << 20)) return fmt::format("{:g} MiB", bytes / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:g} KiB", bytes / 1024);
  return fmt::format("{:g} B", bytes);
}

// ---- link: ping-pong and the fit --------------------------------------------------

ch10::Link measure_link(workbook::Program& program, bool quick) {
  workbook::Communicator& comm = program.comm();
  WB_CHECK(comm.size() >= 2, "--measure link needs 2 ranks or more (ranks 0 and 1 play ping-pong)");
  std::vector<int64_t> sizes = {1, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20};
  if (quick) sizes.resize(7);
  std::vector<ch10::Timing> timings;
  std::vector<double> medians;
  for (const int64_t bytes : sizes) {
    torch::Tensor buffer = torch::zeros({bytes}, torch::kUInt8);
    const int repeats = bytes <= (64 << 10) ? 20 : bytes <= (1 << 20) ? 8 : 4;
    std::vector<double> one_way;
    for (int k = 0; k <= repeats; ++k) {  // k = 0: a warm-up, not counted
      comm.barrier();
      const double start = now_s();
      if (comm.rank() == 0) {
        comm.send(buffer, 1);
        comm.recv(buffer, 1);
      } else if (comm.rank() == 1) {
        comm.recv(buffer, 0);
        comm.send(buffer, 0);
      }
      if (k > 0) one_way.push_back((now_s() - start) / 2);
    }
    // Every timing is one point of the fit; the median is what the table shows.
    for (double t : one_way) timings.push_back({bytes, t});
    medians.push_back(workbook::median(one_way));
  }
  // Rank 0's timings, on every rank: they all predict with the same link.
  // Note: [the two ends of a shaped link]
  // The least-squares line through every timing (ex10.1) has a negative α
  // on the emulated cluster: its shaper (tbf) lets a burst of 64 KiB
  // through at no rate after any pause, so a message costs about
  // α + (n − 64 KiB)·β, and the line that fits the large sizes crosses the
  // axis below zero. The α–β model has no term for a burst. So the link the
  // predictions use takes each number where it is measured: β from the
  // line through the bandwidth-bound sizes (256 KiB and up, ex10.1's fit),
  // α from the smallest message's one-way time. Both lines are reported.
  torch::Tensor fitted = torch::zeros({4}, torch::kFloat64);
  if (comm.rank() == 0) {
    std::vector<ch10::Timing> large;
    for (const ch10::Timing& t : timings)
      if (t.bytes >= (256 << 10)) large.push_back(t);
    const ch10::Link every_size = ch10::fit_link(timings), bandwidth_bound = ch10::fit_link(large);
    fitted[0] = medians.front();  // 1 byte, one way
    fitted[1] = bandwidth_bound.beta_s_per_byte;
    fitted[2] = every_size.alpha_s;
    fitted[3] = every_size.beta_s_per_byte;
  }
  comm.broadcast(fitted, 0);
  const ch10::Link link{fitted[0].item<double>(), fitted[1].item<double>()};
  const ch10::Link every_size{fitted[2].item<double>(), fitted[3].item<double>()};

  workbook::Table table({{"ping-pong", 10}, {"one-way ms", 11}, {"model ms", 9}, {"model/measured", 14}});
  program.say("{}", table.header());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double predicted = link.seconds(static_cast<double>(sizes[i]));
    program.say("{}", table.row({bytes_text(static_cast<double>(sizes[i])), fmt::format("{:.3f}", medians[i] * 1e3),
                                 fmt::format("{:.3f}", predicted * 1e3), fmt::format("{:.2f}", predicted / medians[i])}));
    program.json().write({{"type", "model"}, {"kind", "pingpong"}, {"size", sizes[i]}, {"measured", medians[i]},
                          {"predicted", predicted}});
  }
  program.say("least squares over every size: alpha {:.1f} us, beta {:.4g} s/byte = {:.3g} Gbit/s",
              every_size.alpha_s * 1e6, every_size.beta_s_per_byte, every_size.bits_per_s() / 1e9);
  program.say("the link predicted with: alpha {:.1f} us (1 byte), beta {:.4g} s/byte = {:.3g} Gbit/s (256 KiB and up)",
              link.alpha_s * 1e6, link.beta_s_per_byte, link.bits_per_s() / 1e9);
  program.json().write({{"type", "model"}, {"kind", "link"}, {"alpha", link.alpha_s}, {"beta", link.beta_s_per_byte},
                        {"bits_per_s", link.bits_per_s()}, {"every_size_alpha", every_size.alpha_s},
                        {"every_size_beta", every_size.beta_s_per_byte}});
  return link;
}

// ---- allreduce: one algorithm over the sizes -------------------------------------------

// Note: [making Open MPI use one algorithm]
// Open MPI's all-reduce (its "tuned" component) picks an algorithm by
// message size and rank count. Two MCA variables make it use one:
// coll_tuned_use_dynamic_rules=1 and coll_tuned_allreduce_algorithm=N
// (Open MPI 4 and 5: 3 recursive doubling, 4 ring, 6 Rabenseifner). They
// are read when MPI starts, so the program sets them in its own
// environment before it connects: one algorithm per run.
// The steps (ZeRO's reduce-scatter and all-gather) use the algorithms the
// model charges: the ring for all-gather and all-reduce, recursive halving
// for MPI_Reduce_scatter_block (Open MPI has no ring for it; it moves the
// ring's (p − 1)/p·n bytes, in log₂p steps). Left to itself, Open MPI 4
// reduce-scatters by a reduce to one rank and a scatter: twice the bytes.
void force_open_mpi_algorithm(const std::string& allreduce) {
  const char* number = allreduce == "ring" ? "4" : allreduce == "recursive_doubling" ? "3" : "6";
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
  setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", number, 1);
  setenv("OMPI_MCA_coll_tuned_allgather_algorithm", "4", 1);
  setenv("OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm", "3", 1);
}

void measure_allreduce(workbook::Program& program, const std::string& algorithm, const ch10::Link& link,
                       int64_t max_bytes, double max_seconds) {
  workbook::Communicator& comm = program.comm();
  const int ranks = comm.size();
  const bool workbook_ring = algorithm == "workbook_ring";
  const ch10::Algorithm model = workbook_ring ? ch10::Algorithm::Ring : *ch10::algorithm_named(algorithm);
  workbook::Table table({{algorithm, 18}, {"measured ms", 12}, {"predicted ms", 12}, {"pred/meas", 9}, {"repeats", 7}});
  program.say("{}", table.header());
  for (int64_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    const double predicted = ch10::collective_cost(ch10::Collective::AllReduce, model, bytes, ranks).seconds(link);
    if (predicted > max_seconds) {
      program.say("{}", table.row({bytes_text(static_cast<double>(bytes)), "skipped", fmt::format("{:.1f}", predicted * 1e3),
                                   "", fmt::format("> {:g} s", max_seconds)}));
      continue;
    }
    torch::Tensor buffer = torch::ones({bytes / 4}, torch::kFloat32);
    auto once = [&] {
      comm.barrier();
      const double start = now_s();
      if (workbook_ring)
        ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, comm);
      else
        comm.all_reduce(buffer, workbook::ReduceOp::Sum);
      return slowest(comm, now_s() - start);
    };
    once();                                  // a warm-up: connections, buffers
    std::vector<double> times = {once()};
    const int repeats = std::clamp(static_cast<int>(0.6 / std::max(times[0], 1e-6)), 3, 25);
    while (static_cast<int>(times.size()) < repeats) times.push_back(once());
    const double measured = workbook::median(times);
    program.say("{}", table.row({bytes_text(static_cast<double>(bytes)), fmt::format("{:.3f}", measured * 1e3),
                                 fmt::format("{:.3f}", predicted * 1e3), fmt::format("{:.2f}", predicted / measured),
                                 std::to_string(repeats)}));
    program.json().write({{"type", "model"}, {"kind", "allreduce"}, {"algorithm", algorithm}, {"ranks", ranks},
                          {"size", bytes}, {"measured", measured}, {"predicted", predicted}});
  }
}

// ---- steps: a profile, then each layout --------------------------------------------------

struct StepsOptions {
  ch09::BlockMlpOptions model;
  int64_t local_batch = 128;
  int steps = 5;
};

// --measure pipeline and tensor: equal blocks, the whole batch on every rank.
struct LayoutOptions {
  ch10::EqualBlocksOptions model;
  int64_t batch = 256;
  int steps = 5;
  std::vector<int> micro_batches = {1, 2, 4, 8};
};

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
struct WholeSteps {
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0;
};
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
struct MeasuredStep {
  double seconds = 0.0;
  int64_t bytes_sent_per_step = 0;  // by this rank's Communicator, point to point (the workbook's rings)
  int64_t collectives_per_step = 0;
};

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
  app.add_option("--beta", beta, "the link's seconds per byte")->check(CLI::PositiveNumber);
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
