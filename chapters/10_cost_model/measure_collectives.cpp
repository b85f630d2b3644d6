// measure_collectives.cpp — ch10_model's link fit and all-reduces, predicted then measured (measure.hpp).
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

ch10::Link measure_link(workbook::Program& program, bool quick, int partner) {
  workbook::Communicator& comm = program.comm();
  WB_CHECK(comm.size() > partner && partner > 0, "the ping-pong needs ranks 0 and {}, and there are {}", partner,
           comm.size());
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
        comm.send(buffer, partner);
        comm.recv(buffer, partner);
      } else if (comm.rank() == partner) {
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
  // The link the predictions use: ex10.1's fit_shaped_link (Note [the two
  // ends of a shaped link]); the line through every size is printed beside it.
  torch::Tensor fitted = torch::zeros({4}, torch::kFloat64);
  if (comm.rank() == 0) {
    const ch10::Link every_size = ch10::fit_link(timings), shaped = ch10::fit_shaped_link(timings);
    fitted[0] = shaped.alpha_s;
    fitted[1] = shaped.beta_s_per_byte;
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
  program.say("the link predicted with (fit_shaped_link): alpha {:.1f} us, beta {:.4g} s/byte = {:.3g} Gbit/s",
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
// The steps (ZeRO's reduce-scatter and all-gather) use the algorithm the
// model charges, the ring, for all three (the Communicator reduce-scatters
// with MPI_Reduce_scatter: Note [MPI_Reduce_scatter, not _block] in
// common/src/communicator_mpi.cpp).
void force_open_mpi_algorithm(const std::string& allreduce) {
  const char* number = allreduce == "ring" ? "4" : allreduce == "recursive_doubling" ? "3" : "6";
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
  setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", number, 1);
  setenv("OMPI_MCA_coll_tuned_allgather_algorithm", "4", 1);
  setenv("OMPI_MCA_coll_tuned_reduce_scatter_algorithm", "3", 1);
}

// ---- the CPU's share: γ and the exchange's β ---------------------------------------

// Note: [what a ping-pong does not see]
// The α–β model charges a collective its messages only. Two more costs are
// the CPU's, not the wire's, and on this machine, at 10 Gbit/s or with ranks
// sharing cores, they can be most of a large all-reduce:
//  - γ, the seconds each byte *reduced* takes (the α–β–γ model's third
//    term): adding what a rank receives into what it holds;
//  - the kernel's copies: a ping-pong moves one message one way at a time,
//    but in a collective's step every rank sends and receives at once, and
//    the kernel's work for both directions runs on the cores that compute.
// Both are timed with every rank at once, as a collective runs them (ranks
// that share a core share its time), and fitted as ex10.1 fits a link: γ is
// the slope of the adds' times; the exchange is a second link, fitted to a
// ring shift's times as the ping-pong's are (each rank sends n bytes to the
// next and receives n from the previous). A collective's steps are such exchanges,
// so its cost in α's and bytes prices on it as on the ping-pong's link, and
// a step takes the longer of the two.
CpuCosts measure_cpu_costs(workbook::Communicator& comm, bool quick) {
  std::vector<int64_t> sizes = {4, 4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20};
  if (quick) sizes.pop_back();
  const int next = (comm.rank() + 1) % comm.size(), previous = (comm.rank() + comm.size() - 1) % comm.size();
  std::vector<ch10::Timing> adds, shifts;
  for (const int64_t bytes : sizes) {
    torch::Tensor held = torch::ones({bytes / 4}), received = torch::ones({bytes / 4});
    for (int k = 0; k <= 3; ++k) {  // k = 0: a warm-up, not counted
      comm.barrier();
      double start = now_s();
      held.add_(received);
      const double add_s = slowest(comm, now_s() - start);
      comm.barrier();
      start = now_s();
      comm.exchange(held, next, received, previous);
      const double shift_s = slowest(comm, now_s() - start);
      if (k > 0 && bytes >= (1 << 20)) adds.push_back({bytes, add_s});  // below, the add is lost in the timer
      if (k > 0) shifts.push_back({bytes, shift_s});
    }
  }
  // A slope below 0 is noise on a cost too small to see: none.
  return {std::max(0.0, ch10::fit_link(adds).beta_s_per_byte), ch10::fit_shaped_link(shifts)};
}

// Note: [the bytes an all-reduce reduces]
// Ring and Rabenseifner add what their reduce-scatter half receives, once
// each; recursive doubling adds every byte it receives.
double reduced_bytes(ch10::Algorithm algorithm, int64_t bytes, int ranks) {
  if (algorithm == ch10::Algorithm::RecursiveDoubling)
    return ch10::collective_cost(ch10::Collective::AllReduce, algorithm, bytes, ranks).bytes;
  return ch10::collective_cost(ch10::Collective::ReduceScatter, ch10::Algorithm::Ring, bytes, ranks).bytes;
}

void measure_allreduce(workbook::Program& program, const std::string& algorithm, const ch10::Link& link,
                       int64_t max_bytes, double max_seconds) {
  workbook::Communicator& comm = program.comm();
  const int ranks = comm.size();
  const bool workbook_ring = algorithm == "workbook_ring";
  const ch10::Algorithm model = workbook_ring ? ch10::Algorithm::Ring : *ch10::algorithm_named(algorithm);
  const CpuCosts cpu = measure_cpu_costs(comm, max_bytes <= (4 << 20));
  program.say("the CPU's share, every rank at once: gamma {:.3g} ns per byte reduced; an exchange: alpha {:.1f} us, "
              "beta {:.3g} ns per byte ({:.3g} Gbit/s; the ping-pong's {:.3g})",
              cpu.gamma_s_per_byte * 1e9, cpu.exchange.alpha_s * 1e6, cpu.exchange.beta_s_per_byte * 1e9,
              cpu.exchange.bits_per_s() / 1e9, link.bits_per_s() / 1e9);
  workbook::Table table({{algorithm, 18}, {"measured ms", 12}, {"predicted ms", 12}, {"pred/meas", 9},
                         {"with CPU ms", 11}, {"pred/meas", 9}, {"repeats", 7}});
  program.say("{}", table.header());
  for (int64_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    const ch10::Cost cost = ch10::collective_cost(ch10::Collective::AllReduce, model, bytes, ranks);
    const double predicted = cost.seconds(link);
    // Note [what a ping-pong does not see]: the slower of the two links, and γ for each byte reduced.
    const double with_cpu = std::max(predicted, cost.seconds(cpu.exchange)) +
                            reduced_bytes(model, bytes, ranks) * cpu.gamma_s_per_byte;
    if (predicted > max_seconds) {
      program.say("{}", table.row({bytes_text(static_cast<double>(bytes)), "skipped", fmt::format("{:.1f}", predicted * 1e3),
                                   "", "", "", fmt::format("> {:g} s", max_seconds)}));
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
                                 fmt::format("{:.3f}", with_cpu * 1e3), fmt::format("{:.2f}", with_cpu / measured),
                                 std::to_string(repeats)}));
    program.json().write({{"type", "model"}, {"kind", "allreduce"}, {"algorithm", algorithm}, {"ranks", ranks},
                          {"size", bytes}, {"measured", measured}, {"predicted", predicted},
                          {"predicted_with_cpu", with_cpu}, {"gamma", cpu.gamma_s_per_byte},
                          {"exchange_alpha", cpu.exchange.alpha_s}, {"exchange_beta", cpu.exchange.beta_s_per_byte}});
  }
}

}  // namespace ch10::measure
