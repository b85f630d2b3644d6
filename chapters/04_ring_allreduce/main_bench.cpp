// main_bench.cpp — ch04_bench: the ring all-reduce measured as nccl-tests
// measures collectives, and the bucketed reducer's overlap measured on
// FashionCNN steps.
//
//   mpirun -n 2 ch04_bench [--measure bandwidth|overlap] [--device cpu|cuda] [--threads N] [--json FILE]
//   workbook run ch04 --ranks 2 [--solution] -- ARGS
//
// --measure bandwidth (the default): for sizes 4 KiB .. 64 MiB (x4), the
// all-reduce (sum, float32, in place) of this build's ring ("self"), of the
// library ("mpi": MPI_Allreduce; "nccl" on a GPU) and a memcpy of the same
// bytes, interleaved in rounds; medians. As nccl-tests defines them:
//   algbw = bytes / time
//   busbw = algbw x 2 (n-1) / n     (what each rank's link carries: comparable
//                                    across rank counts, and with the hardware)
//   #wrong: after timing, each rank fills its buffer with integer values,
//   whose sums are exact in any order, runs the all-reduce once and counts
//   the elements that differ from the expected sum.
// --measure overlap: FashionCNN steps (forward, backward, averaging, Adam)
// with the gradients averaged by a BucketReducer (this build's ring): not at
// all, after backward in one bucket, after backward in buckets, overlapped
// with backward (1 MiB first bucket, 25 MiB cap), and overlapped with small
// buckets (64 KiB first, 256 KiB cap); then overlapped with a parameter no
// step uses added to the reducer, with its buckets kept and rebuilt after the
// first step (Note: [rebuilt buckets]); with --bucket-caps, overlapped with
// buckets of each size. from_hooks: buckets launched during
// backward in the last step. hidden = (after-backward - overlapped) / (after-backward - none):
// the share of the communication time that overlapping hid.
#include <fmt/format.h>

#include <map>

#include "reducer.hpp"
#include "ring.hpp"
#include "workbook/errors.hpp"
#include "workbook/exact_data.hpp"
#include "workbook/models.hpp"
#include "workbook/program.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"
#include "workbook/trace.hpp"

namespace {

using workbook::mean;
using workbook::median;
namespace trace = workbook::trace;

struct Options {
  std::string measure = "bandwidth";
  int64_t min_bytes = 4096, max_bytes = int64_t{64} << 20;
  int rounds = 5;
  int steps = 10;  // overlap: timed steps per variant and round
  std::vector<int64_t> bucket_caps_kib;  // overlap: a variant per bucket size (the sweep)
  ch04::RingOptions ring;
};

// Iterations per timing: enough to take ~50 ms at 1 GB/s, at least 3.
int iterations_for(int64_t bytes) { return static_cast<int>(std::clamp<int64_t>((int64_t{50} << 20) / bytes, 3, 200)); }

// ---- bandwidth ------------------------------------------------------------------

struct Measured {
  std::vector<double> seconds;  // per round: mean seconds per call
  int64_t wrong = 0;
};

int bandwidth(const Options& o, workbook::Program& program) {
  workbook::Communicator& comm = program.comm();
  workbook::JsonLines& json = program.json();
  const int n = comm.size();
  const bool leader = comm.rank() == 0;
  const torch::Device device = comm.device();
  const auto float_options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const double bus_factor = 2.0 * (n - 1) / n;
  // The library's all-reduce is named for the library.
  const std::string library = comm.backend() == workbook::Backend::Mpi ? "mpi" : "nccl";
  const std::vector<std::string> impls = {"self", library, "memcpy"};

  auto run_once = [&](const std::string& impl, torch::Tensor& buffer, torch::Tensor& copy_target) {
    if (impl == "self") ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, comm, o.ring);
    else if (impl == "memcpy") copy_target.copy_(buffer);
    else comm.all_reduce(buffer, workbook::ReduceOp::Sum);
  };

  if (leader) {
    const int64_t chunk = o.ring.for_buffer(comm, torch::empty({0}, torch::kFloat32)).chunk_elements;
    fmt::print("ch04_bench: all-reduce, sum, float32, in place; {} rank(s) ({}), device {}, {} thread(s) per rank; "
               "{} rounds, medians; the ring's chunk {} elements, {} bytes ({})\n", n, comm.launch_env().launcher,
               device.str(), program.flags().threads, o.rounds, chunk, chunk * 4,
               o.ring.chunk_elements > 0 ? "--chunk-elements" : "the Communicator's message size");
    fmt::print("self: this build's ch04::ring_all_reduce; {}: the library's all-reduce; memcpy: one copy of the "
               "buffer (the memory bandwidth)\n\n", library);
    fmt::print("{:>12} {:>12} {:>7} | {:>28} | {:>28} | {:>8} | {:>7}\n", "", "", "", "self (ring)            ",
               library + "                     ", "self/", "memcpy");
    fmt::print("{:>12} {:>12} {:>7} | {:>9} {:>6} {:>6} {:>4} | {:>9} {:>6} {:>6} {:>4} | {:>8} | {:>7}\n", "size",
               "count", "type", "time", "algbw", "busbw", "#wrg", "time", "algbw", "busbw", "#wrg", library, "");
    fmt::print("{:>12} {:>12} {:>7} | {:>9} {:>6} {:>6} {:>4} | {:>9} {:>6} {:>6} {:>4} | {:>8} | {:>7}\n", "(B)",
               "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "busbw", "(GB/s)");
  }
  std::map<std::string, std::vector<double>> busbw_by_impl;
  int64_t wrong = 0;  // over every size, the ring and the library
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
    const int64_t count = bytes / 4;
    const int iterations = iterations_for(bytes);
    // Timed on zeros (written, so every page is real): sums of zeros stay
    // zeros however often the buffer is reduced in place.
    torch::Tensor buffer = torch::zeros({count}, float_options);
    torch::Tensor copy_target = torch::zeros({count}, float_options);
    std::map<std::string, Measured> measured;
    for (const std::string& impl : impls) run_once(impl, buffer, copy_target);  // warm-up
    for (int round = 0; round < o.rounds; ++round)
      for (const std::string& impl : impls) {
        comm.barrier();
        workbook::Stopwatch clock(device);
        clock.start();
        for (int i = 0; i < iterations; ++i) run_once(impl, buffer, copy_target);
        // Each rank timed its own calls; as nccl-tests does, report the mean over ranks.
        torch::Tensor elapsed = torch::full({1}, clock.stop() / iterations, float_options.dtype(torch::kFloat64));
        comm.all_reduce(elapsed, workbook::ReduceOp::Average);
        measured[impl].seconds.push_back(elapsed.item<double>());
      }
    // Note: [exact in any order] in exact_data.hpp.
    const torch::Tensor expected = workbook::exact_sum_over_ranks(count, n, float_options);
    for (const std::string& impl : impls) {
      torch::Tensor data = workbook::exact_rank_values(count, comm.rank(), float_options);
      torch::Tensor target = torch::zeros({count}, float_options);
      run_once(impl, data, target);
      const torch::Tensor& result = impl == "memcpy" ? target : data;
      const torch::Tensor& truth = impl == "memcpy" ? data : expected;
      measured[impl].wrong = workbook::compare_exact(result, truth).wrong;
      if (impl != "memcpy") wrong += measured[impl].wrong;
    }
    std::map<std::string, double> time_s, algbw, busbw;
    for (const std::string& impl : impls) {
      time_s[impl] = median(measured[impl].seconds);
      algbw[impl] = static_cast<double>(bytes) / time_s[impl] / 1e9;
      busbw[impl] = impl == "memcpy" ? algbw[impl] : algbw[impl] * bus_factor;
      busbw_by_impl[impl].push_back(busbw[impl]);
    }
    for (const std::string& impl : impls) {
      nlohmann::json row = {{"type", "row"}, {"size", bytes}, {"count", count}, {"impl", impl},
                            {"time_us", time_s[impl] * 1e6}, {"algbw", algbw[impl]}, {"busbw", busbw[impl]},
                            {"wrong", measured[impl].wrong}, {"ranks", n}};
      if (impl == "self" && busbw[library] > 0) row["vs_library"] = busbw["self"] / busbw[library];
      json.write(row);
    }
    if (leader) {
      const double ratio = busbw[library] > 0 ? busbw["self"] / busbw[library] : 0.0;
      fmt::print("{:>12} {:>12} {:>7} | {:>9.1f} {:>6.2f} {:>6.2f} {:>4} | {:>9.1f} {:>6.2f} {:>6.2f} {:>4} | "
                 "{:>7.2f}x | {:>7.2f}\n",
                 bytes, count, "float", time_s["self"] * 1e6, algbw["self"], busbw["self"], measured["self"].wrong,
                 time_s[library] * 1e6, algbw[library], busbw[library], measured[library].wrong, ratio,
                 algbw["memcpy"]);
      std::fflush(stdout);
    }
  }
  if (leader) {
    fmt::print("\n# Avg bus bandwidth: self {:.3f} GB/s, {} {:.3f} GB/s (n = {}, busbw = algbw x {:.3f})\n",
               mean(busbw_by_impl["self"]), library, mean(busbw_by_impl[library]), n, bus_factor);
  }
  workbook::BenchResult result;
  result.config = "bandwidth";
  result.headline = {{"avg_busbw", mean(busbw_by_impl["self"])}, {"avg_busbw_library", mean(busbw_by_impl[library])},
                     {"wrong", wrong}};
  program.finish(result);
  WB_ASSERT(wrong == 0, "{} element(s) of the all-reduce results were wrong (the #wrong columns)", wrong);
  return 0;
}

// ---- overlap --------------------------------------------------------------------

struct Variant {
  std::string name;
  bool communicate;
  ch04::ReducerOptions reducer;
  bool unused_parameter = false;  // the reducer also gets a parameter no step uses (registered last)
  bool untraced = false;          // with --trace: this variant records nothing (what tracing costs)
};

int overlap(const Options& o, workbook::Program& program) {
  workbook::Communicator& comm = program.comm();
  workbook::JsonLines& json = program.json();
  const workbook::TrainFlags& flags = program.flags();
  const int64_t local_batch = flags.batch / comm.size();  // checked by bench()
  const torch::Device device = comm.device();
  const bool leader = comm.rank() == 0;
  torch::manual_seed(flags.seed);
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  const torch::Tensor images = torch::rand({local_batch, 1, 28, 28}, torch::TensorOptions().device(device));
  const torch::Tensor labels =
      torch::randint(0, 10, {local_batch}, torch::TensorOptions().dtype(torch::kInt64).device(device));

  const int64_t huge = int64_t{1} << 40;  // one bucket holds everything
  std::vector<Variant> variants = {
      {"none", false, {}},
      {"after-backward", true, {huge, huge, std::nullopt, ch04::ring_average(), false}},
      {"buckets-after", true, {int64_t{1} << 20, int64_t{25} << 20, std::nullopt, ch04::ring_average(), false}},
      {"overlap", true, {int64_t{1} << 20, int64_t{25} << 20, std::nullopt, ch04::ring_average(), true}},
      {"overlap-small", true, {int64_t{64} << 10, int64_t{256} << 10, std::nullopt, ch04::ring_average(), true}},
      // Note: [rebuilt buckets] in reducer.hpp: a parameter that gets no
      // gradient, in the first bucket, holds every bucket back until finish().
      {"unused", true, {int64_t{1} << 20, int64_t{25} << 20, std::nullopt, ch04::ring_average(), true, false}, true},
      {"unused-rebuilt", true, {int64_t{1} << 20, int64_t{25} << 20, std::nullopt, ch04::ring_average(), true, true},
       true},
  };
  // With --trace, "overlap" again, recording nothing: the traced "overlap"
  // against it is what tracing costs, in the same run.
  if (trace::on()) {
    variants.push_back(*std::find_if(variants.begin(), variants.end(), [](const Variant& v) { return v.name == "overlap"; }));
    variants.back().name = "overlap-untraced";
    variants.back().untraced = true;
  }
  // --bucket-caps: the sweep of the PyTorch DDP paper, every bucket (the first too) this size.
  for (const int64_t kib : o.bucket_caps_kib)
    variants.push_back({fmt::format("overlap-{}K", kib), true,
                        {kib << 10, kib << 10, std::nullopt, ch04::ring_average(), true}});
  // 512 KiB that no forward pass uses: a head trained in another phase, say.
  const torch::Tensor unused = torch::zeros({128, 1024}, torch::TensorOptions().device(device).requires_grad(true));
  std::map<std::string, std::vector<double>> step_ms;
  std::map<std::string, size_t> bucket_count, from_hooks;
  auto time_variant = [&](const Variant& v, int steps) {
    std::unique_ptr<ch04::BucketReducer> reducer;
    std::vector<torch::Tensor> parameters = model->parameters();
    if (v.unused_parameter) parameters.push_back(unused);
    if (v.communicate) reducer = std::make_unique<ch04::BucketReducer>(parameters, comm, v.reducer);
    std::optional<trace::Pause> untraced;
    if (v.untraced) untraced.emplace();
    comm.barrier();
    workbook::Stopwatch clock(device);
    clock.start();
    for (int i = 0; i < steps; ++i) {
      trace::Span step(trace::Kind::Step, "{} step {}", v.name, i);
      optimizer.zero_grad();
      trace::Span forward(trace::Kind::Compute, "forward");
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
      forward.end();
      trace::Span backward(trace::Kind::Compute, "backward");
      loss.backward();
      backward.end();
      trace::Span finishing(trace::Kind::Communication, "reducer.finish()");
      if (reducer) reducer->finish();
      finishing.end();
      trace::Span stepping(trace::Kind::Optimizer, "optimizer step");
      optimizer.step();
    }
    const double ms = 1000.0 * clock.stop() / steps;
    comm.barrier();
    if (reducer) bucket_count[v.name] = reducer->buckets().size();
    if (reducer) from_hooks[v.name] = reducer->launched_from_hooks();
    return ms;
  };
  for (const Variant& v : variants) time_variant(v, 2);  // warm-up
  for (int round = 0; round < o.rounds; ++round)
    for (const Variant& v : variants) step_ms[v.name].push_back(time_variant(v, o.steps));

  const double none = median(step_ms["none"]), after = median(step_ms["after-backward"]);
  if (leader)
    fmt::print("ch04_bench: FashionCNN steps, {} rank(s), {} samples per rank, {} thread(s) per rank; {} rounds of "
               "{} steps, medians\n\n{:<16} {:>8} {:>10} {:>9} {:>9}\n",
               comm.size(), local_batch, flags.threads, o.rounds, o.steps, "variant", "buckets", "from_hooks",
               "step_ms", "hidden");
  for (const Variant& v : variants) {
    const double ms = median(step_ms[v.name]);
    const bool overlapped = v.communicate && v.reducer.overlap;
    const double hidden = after > none ? (after - ms) / (after - none) : 0.0;
    nlohmann::json row = {{"type", "row"}, {"measure", "step"}, {"variant", v.name}, {"ranks", comm.size()},
                          {"batch", local_batch}, {"impl", "self"}, {"ms", ms}};
    if (overlapped) row["hidden"] = hidden;
    if (overlapped) row["launched_from_hooks"] = from_hooks[v.name];
    json.write(row);
    if (leader)
      fmt::print("{:<16} {:>8} {:>10} {:>9.2f} {:>9}\n", v.name,
                 v.communicate ? std::to_string(bucket_count[v.name]) : "-",
                 overlapped ? std::to_string(from_hooks[v.name]) : "-", ms,
                 overlapped ? fmt::format("{:.3f}", hidden) : "-");
  }
  if (leader)
    fmt::print("\ncommunication after backward: {:.2f} ms of a {:.2f} ms step ({:.1f}%)\n", after - none, after,
               100.0 * (after - none) / after);
  workbook::BenchResult result;
  result.config = "overlap";
  result.headline = {{"samples_per_s", 1000.0 * static_cast<double>(flags.batch) / median(step_ms["overlap"])}};
  program.finish(result);
  return 0;
}

int bench(workbook::Program& program) {
  Options o;
  CLI::App& app = program.cli();
  app.add_option("--measure", o.measure, "bandwidth: the all-reduce table; overlap: FashionCNN steps")
      ->check(CLI::IsMember({"bandwidth", "overlap"}))
      ->capture_default_str();
  app.add_option("--min-bytes", o.min_bytes, "smallest buffer (bandwidth)")->check(CLI::Range(int64_t{4}, int64_t{1} << 32));
  app.add_option("--max-bytes", o.max_bytes, "largest buffer (bandwidth); sizes grow x4")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 32));
  app.add_option("--rounds", o.rounds, "rounds; each measures every implementation once")->check(CLI::PositiveNumber);
  app.add_option("--chunk-elements", o.ring.chunk_elements,
                 "the ring's chunk (bandwidth; default: the Communicator's message size, 512 KiB on one node, 128 KiB "
                 "between nodes)")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "timed steps per variant and round (overlap)")->check(CLI::PositiveNumber);
  app.add_option("--bucket-caps", o.bucket_caps_kib,
                 "overlap: also overlapped with every bucket this many KiB, one variant per size (e.g. 256,1024,4096)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();
  WB_CHECK(o.min_bytes <= o.max_bytes, "--min-bytes {} is larger than --max-bytes {}", o.min_bytes, o.max_bytes);
  WB_CHECK(o.min_bytes % 4 == 0, "--min-bytes {} is not a whole number of float32 elements (a multiple of 4)",
           o.min_bytes);
  if (o.measure == "overlap") program.local_batch(flags.batch);
  program.connect();
  return o.measure == "bandwidth" ? bandwidth(o, program) : overlap(o, program);
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv,
      {"ch04_bench",
       "Chapter 4: ring all-reduce bandwidth (as nccl-tests measures it) and the bucketed reducer's overlap"},
      bench);
}
