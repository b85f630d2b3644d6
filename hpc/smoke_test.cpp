// smoke_test.cpp — the check an instructor runs on a cluster before a lab:
// who and where every rank is, an all-reduce whose exact result is known,
// and one bandwidth figure.
//
//   srun smoke_test [--device cpu|cuda] [--bytes 67108864] [--iterations 10] [--json FILE]
//   mpirun -n 4 smoke_test
//   sbatch hpc/slurm/smoke.sbatch        (the job scripts run it through hpc/launch.sh)
//
// It prints, from rank 0:
//   - one row per rank: rank, local rank, world size, host, device, CPU
//     threads, the GPU (name and PCI bus id) and where it found Fashion-MNIST;
//   - the all-reduce check: "OK on all N ranks", or which ranks got a wrong
//     sum and the first element they got wrong;
//   - one line in nccl-tests' columns: the time of an all-reduce of --bytes
//     (64 MiB), its algbw and busbw.
// Exit status: 0 when every check passed, 1 when a check failed (a wrong
// sum, ranks sharing a GPU, a node without the data), 2 on bad input or a
// launch that is not a job.
//
// --check-launch only starts the communicator and leaves: hpc/launch.sh runs
// it to find out whether srun can start an MPI job on this cluster.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workbook/communicator.hpp"
#include "workbook/data_location.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/exact_data.hpp"
#include "workbook/gpu_info.hpp"
#include "workbook/parse_flags.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"
#include "workbook/program.hpp"  // run_distributed_main

namespace {

using nlohmann::json;

// What one rank says about itself: a JSON object, gathered as bytes.
constexpr int64_t kIdentityBytes = 1024;

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

std::string environment_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

json describe_this_rank(const workbook::LaunchEnv& env, const torch::Device& device,
                        const std::optional<std::filesystem::path>& data) {
  json identity = {{"rank", env.rank},
                   {"local_rank", env.local_rank},
                   {"world_size", env.world_size},  // as this rank's launcher said it
                   {"host", host_name()},
                   {"device", device.str()},
                   {"threads", torch::get_num_threads()},
                   {"cuda_visible_devices", environment_or("CUDA_VISIBLE_DEVICES", "-")},
                   {"gpu", "-"},
                   {"gpu_bus", "-"}};
  if (device.is_cuda()) {
    const workbook::GpuDevice gpu = workbook::gpu_device(device.index());
    identity["gpu"] = gpu.name.empty() ? "?" : gpu.name;
    identity["gpu_bus"] = gpu.pci_bus_id.empty() ? "?" : gpu.pci_bus_id;
  }
  try {
    identity["data"] = workbook::find_fashion_mnist(data).string();
  } catch (const workbook::UserError&) {
    identity["data"] = "NOT FOUND";
  }
  return identity;
}

// Every rank's identity, on every rank, in rank order.
std::vector<json> gather_identities(workbook::Communicator& comm, const json& mine) {
  std::string bytes = mine.dump();
  WB_CHECK(static_cast<int64_t>(bytes.size()) < kIdentityBytes, "rank {}: its description is too long ({} bytes)",
           comm.rank(), bytes.size());
  bytes.resize(kIdentityBytes, ' ');
  const torch::Tensor local =
      torch::from_blob(bytes.data(), {kIdentityBytes}, torch::kUInt8).clone().to(comm.device());
  const torch::Tensor all = comm.all_gather(local).to(torch::kCPU).contiguous();
  std::vector<json> identities;
  for (int r = 0; r < comm.size(); ++r) {
    const char* start = reinterpret_cast<const char*>(all[r].data_ptr<uint8_t>());
    identities.push_back(json::parse(std::string(start, kIdentityBytes)));
  }
  return identities;
}

// The all-reduce check (Note: [exact in any order] in exact_data.hpp): a
// single element off names a broken transport, not a rounding difference.
struct Verdict : workbook::ExactComparison {
  int64_t count = 0;  // elements in the all-reduce
};

Verdict check_all_reduce(workbook::Communicator& comm, int64_t count, bool corrupt) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(comm.device());
  torch::Tensor values = workbook::exact_rank_values(count, comm.rank(), options);
  comm.all_reduce(values, workbook::ReduceOp::Sum);
  if (corrupt) values[count / 2] += 1;  // --corrupt-rank: the check's own test
  Verdict verdict;
  static_cast<workbook::ExactComparison&>(verdict) =
      workbook::compare_exact(values, workbook::exact_sum_over_ranks(count, comm.size(), options));
  verdict.count = count;
  return verdict;
}

// The median time of one all-reduce of `count` float32 elements, as the
// slowest rank saw it: each iteration starts together (a barrier) and is
// timed with the device synchronized (timing.hpp).
double all_reduce_seconds(workbook::Communicator& comm, int64_t count, int iterations) {
  torch::Tensor buffer = torch::zeros({count}, torch::TensorOptions().dtype(torch::kFloat32).device(comm.device()));
  comm.all_reduce(buffer, workbook::ReduceOp::Sum);  // warm-up: connections, registration, first-touch
  workbook::Stopwatch stopwatch(comm.device());
  std::vector<double> seconds;
  for (int i = 0; i < iterations; ++i) {
    comm.barrier();
    stopwatch.start();
    comm.all_reduce(buffer, workbook::ReduceOp::Sum);
    seconds.push_back(stopwatch.stop());
  }
  torch::Tensor mine = torch::tensor({workbook::median(seconds)}, torch::kFloat64).to(comm.device());
  return comm.all_gather(mine).max().item<double>();
}

int smoke_test(const workbook::LaunchEnv& env, int argc, char** argv) {
  CLI::App app{"The pre-lab check: every rank's identity, an exact all-reduce, the all-reduce bandwidth",
               "smoke_test"};
  std::string device_name = torch::cuda::is_available() ? "cuda" : "cpu";
  int64_t bytes = int64_t{64} << 20;
  int iterations = 10;
  int threads = workbook::default_threads_per_rank(env);
  bool check_launch = false;
  int corrupt_rank = -1;
  std::optional<std::filesystem::path> data, json_file;
  workbook::CommunicatorOptions comm_options = workbook::CommunicatorOptions::from_environment();
  app.add_option("--device", device_name, "cpu (MPI) or cuda (NCCL, the GPU of this rank's local rank)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--bytes", bytes, "the all-reduce whose bandwidth is measured, in bytes of float32")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 34))
      ->capture_default_str();
  app.add_option("--iterations", iterations, "timed all-reduces; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads per rank")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--data", data, "where Fashion-MNIST should be (default: the usual places)");
  app.add_option("--json", json_file, "append the result as a JSON line to FILE");
  app.add_flag("--check-launch", check_launch, "only start the communicator and leave (hpc/launch.sh's probe)");
  // Hidden: spoils one element of this rank's result, so that the workbook's
  // tests can see the check name the rank (tests/hpc).
  app.add_option("--corrupt-rank", corrupt_rank, "")->group("");
  workbook::add_distributed_flags(app, comm_options);
  workbook::parse_flags_or_exit(app, argc, argv);
  workbook::set_threads(threads);
  const torch::Device requested = workbook::parse_device(device_name);

  // MPI carries the identities, so the table is printed even when NCCL then
  // fails to start (two ranks on one GPU, say): it shows why.
  std::unique_ptr<workbook::Communicator> mpi =
      workbook::make_communicator(workbook::Backend::Mpi, env, comm_options);
  const bool leader = mpi->rank() == 0;
  if (check_launch) {
    mpi->barrier();
    if (leader) fmt::print("smoke_test: {} ranks started by {}\n", mpi->size(), env.launcher);
    return 0;
  }

  // The device this rank will use: on CUDA, the GPU of its local rank (as
  // the Communicator's NCCL backend chooses it).
  const torch::Device device = requested.is_cuda() ? torch::Device(torch::kCUDA, static_cast<int8_t>(env.local_rank))
                                                   : torch::Device(torch::kCPU);
  const std::vector<json> identities = gather_identities(*mpi, describe_this_rank(env, device, data));
  std::set<std::string> hosts;
  for (const json& identity : identities) hosts.insert(identity["host"].get<std::string>());

  bool passed = true;
  if (leader) {
    fmt::print("smoke_test: {} rank(s) on {} node(s), started by {}, device {}\n", mpi->size(), hosts.size(),
               env.launcher, requested.str());
    workbook::Table table({{"rank", 5}, {"local", 5}, {"world", 5}, {"host", 16, true}, {"device", 7, true}, {"threads", 7},
                           {"CUDA_VISIBLE", 12, true}, {"gpu", 24, true}, {"pci bus", 12, true},
                           {"to next rank", 13, true}, {"Fashion-MNIST", 0, true}});
    fmt::print("{}\n", table.header());
    for (size_t r = 0; r < identities.size(); ++r) {
      const json& id = identities[r];
      // What joins this rank to the next one in the ring (the last to rank
      // 0): MPI and NCCL use shared memory between ranks on one host, the
      // network between hosts.
      const json& next = identities[(r + 1) % identities.size()];
      const std::string link = identities.size() == 1 ? "-" : id["host"] == next["host"] ? "shared memory" : "network";
      fmt::print("{}\n", table.row({std::to_string(id["rank"].get<int>()), std::to_string(id["local_rank"].get<int>()),
                                    std::to_string(id["world_size"].get<int>()), id["host"], id["device"], std::to_string(id["threads"].get<int>()),
                                    id["cuda_visible_devices"], id["gpu"], id["gpu_bus"], link, id["data"]}));
    }
  }
  // Two ranks on one GPU: NCCL refuses it, and MPI ranks would halve each
  // other's speed. The PCI bus id names the physical GPU.
  std::map<std::pair<std::string, std::string>, std::vector<int>> ranks_by_gpu;
  for (const json& id : identities)
    if (id["gpu_bus"] != "-" && id["gpu_bus"] != "?") ranks_by_gpu[{id["host"], id["gpu_bus"]}].push_back(id["rank"].get<int>());
  for (const auto& [gpu, ranks] : ranks_by_gpu)
    if (ranks.size() > 1) {
      passed = false;
      if (leader)
        fmt::print(stderr, "smoke_test: FAILED: ranks {} on {} share the GPU at PCI bus {}: start one rank per GPU "
                   "(hpc/README.md, \"All ranks on GPU 0\")\n", fmt::join(ranks, ", "), gpu.first, gpu.second);
    }
  if (!passed) return 1;

  std::unique_ptr<workbook::Communicator> nccl;
  if (requested.is_cuda()) nccl = workbook::make_communicator(workbook::Backend::Nccl, env, comm_options);
  workbook::Communicator& comm = nccl ? *nccl : *mpi;

  // The exact check, at a single element, an odd count and the bandwidth size.
  const int64_t count = std::max<int64_t>(1, bytes / 4);
  Verdict verdict;  // the first size that came out wrong; every rank runs every size, so the calls match
  for (const int64_t size : {int64_t{1}, int64_t{1000003}, count}) {
    const Verdict v = check_all_reduce(comm, size, comm.rank() == corrupt_rank);
    if (v.wrong > 0 && verdict.wrong == 0) verdict = v;
  }
  const torch::Tensor mine = torch::tensor({static_cast<double>(verdict.wrong), static_cast<double>(verdict.count),
                                            static_cast<double>(verdict.first_wrong), verdict.got, verdict.expected},
                                           torch::kFloat64);
  const torch::Tensor all = mpi->all_gather(mine);  // [ranks, 5], on the CPU
  std::vector<int> wrong_ranks;
  for (int r = 0; r < mpi->size(); ++r)
    if (all[r][0].item<double>() > 0) wrong_ranks.push_back(r);
  if (leader) {
    if (wrong_ranks.empty()) {
      fmt::print("all-reduce (sum, float32, 1 / 1000003 / {} elements): OK on all {} ranks\n", count, mpi->size());
    } else {
      // On stderr, like every error: the job's error file says what failed.
      for (const int r : wrong_ranks)
        fmt::print(stderr, "all-reduce (sum, float32): WRONG on rank {} ({}): {:.0f} of {:.0f} elements differ; first "
                   "at element {:.0f}: got {}, expected {}\n", r, identities[static_cast<size_t>(r)]["host"].get<std::string>(),
                   all[r][0].item<double>(), all[r][1].item<double>(), all[r][2].item<double>(),
                   all[r][3].item<double>(), all[r][4].item<double>());
      fmt::print(stderr, "smoke_test: all-reduce FAILED on {} of {} ranks: {}\n", wrong_ranks.size(), mpi->size(),
                 fmt::join(wrong_ranks, ", "));
      fmt::print("all-reduce: FAILED on {} of {} ranks (the error file says which)\n", wrong_ranks.size(), mpi->size());
    }
  }
  if (!wrong_ranks.empty()) return 1;

  // Bandwidth, in nccl-tests' terms: algbw = bytes / time; busbw = algbw x
  // 2(n-1)/n, what each rank's link carries in a bandwidth-optimal
  // all-reduce, comparable across rank counts (Chapter 4).
  const double seconds = all_reduce_seconds(comm, count, iterations);
  const double n = comm.size();
  const double algbw = static_cast<double>(count * 4) / seconds / 1e9;
  const double busbw = algbw * 2.0 * (n - 1) / n;
  if (leader) {
    fmt::print("{:>12} {:>12} {:>6} {:>6} {:>12} {:>8} {:>8}   {}\n", "size", "count", "type", "redop", "time",
               "algbw", "busbw", "(median of " + std::to_string(iterations) + ", slowest rank)");
    fmt::print("{:>12} {:>12} {:>6} {:>6} {:>12} {:>8} {:>8}\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)");
    fmt::print("{:>12} {:>12} {:>6} {:>6} {:>12.1f} {:>8.3f} {:>8.3f}   {} over {}\n", count * 4, count, "float",
               "sum", seconds * 1e6, algbw, busbw, comm.backend() == workbook::Backend::Nccl ? "NCCL" : "MPI",
               hosts.size() > 1 ? "the network" : "one node");
    if (comm.size() == 1) fmt::print("(one rank: nothing crosses a link, so busbw is 0 by definition)\n");
  }
  // Without the data every training job would stop at its start: the lab is not ready.
  std::vector<std::string> without_data;
  for (const json& id : identities)
    if (id["data"] == "NOT FOUND")
      without_data.push_back(fmt::format("{} ({})", id["rank"].get<int>(), id["host"].get<std::string>()));
  if (!without_data.empty()) {
    if (leader)
      fmt::print(stderr, "smoke_test: FAILED: Fashion-MNIST not found on rank(s) {}: the training jobs would stop there; "
                 "put it on a filesystem every node mounts and set WORKBOOK_DATA (hpc/README.md, \"Data not found\")\n",
                 fmt::join(without_data, ", "));
    return 1;
  }
  if (leader) {
    fmt::print("smoke test passed\n");
    workbook::JsonLines json_lines(json_file);
    json_lines.write({{"type", "result"}, {"program", "smoke_test"}, {"ranks", comm.size()},
                      {"nodes", hosts.size()}, {"launcher", env.launcher}, {"device", requested.str()},
                      {"allreduce_ok", true}, {"bytes", count * 4}, {"time_us", seconds * 1e6},
                      {"algbw", algbw}, {"busbw", busbw}});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::run_distributed_main([&](const workbook::LaunchEnv& env) { return smoke_test(env, argc, argv); });
}
