// main_simulate.cpp — ch10_simulate: your collective programs (ex10.3, and
// Chapter 4's ring) run on the simulator (ex10.2) at every rank count from 2
// to --max-ranks, on the two unit links. What each prints is what ex10.4's
// closed form must give: the messages one after another (a link of α = 1 s,
// β = 0) and the bytes one after another (α = 0, β = 1 s per byte).
//
//   ch10_simulate --collective all_reduce --algorithm rabenseifner [--bytes 110880] [--max-ranks 12]
//
// One process, no MPI: the simulated ranks are threads.
#include <fmt/format.h>

#include "cost_model.hpp"
#include "schedules.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"

namespace {

int simulate_main(workbook::Program& program) {
  std::string collective_text = "all_reduce", algorithm_text = "ring";
  int64_t bytes = 110880;  // 27,720 floats: every rank count up to 12 divides them
  int max_ranks = 12;
  CLI::App& app = program.cli();
  app.add_option("--collective", collective_text, "all_reduce, reduce_scatter, all_gather or broadcast")
      ->check(CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather", "broadcast"}))
      ->capture_default_str();
  app.add_option("--algorithm", algorithm_text,
                 "ring, recursive_doubling, rabenseifner, binomial_tree or scatter_all_gather")
      ->check(CLI::IsMember({"ring", "recursive_doubling", "rabenseifner", "binomial_tree", "scatter_all_gather"}))
      ->capture_default_str();
  app.add_option("--bytes", bytes, "the buffer, in bytes (a multiple of 4: float32)")->capture_default_str();
  app.add_option("--max-ranks", max_ranks, "rank counts from 2 to this")->check(CLI::Range(2, 64))
      ->capture_default_str();
  program.parse();
  WB_CHECK(bytes > 0 && bytes % 4 == 0, "--bytes {}: a positive multiple of 4 (float32 elements)", bytes);
  ch10::Collective collective = ch10::Collective::AllReduce;
  for (ch10::Collective c : {ch10::Collective::AllReduce, ch10::Collective::ReduceScatter,
                             ch10::Collective::AllGather, ch10::Collective::Broadcast})
    if (collective_text == ch10::collective_name(c)) collective = c;
  const ch10::Algorithm algorithm = *ch10::algorithm_named(algorithm_text);
  const bool powers_of_two_only =
      algorithm == ch10::Algorithm::RecursiveDoubling || algorithm == ch10::Algorithm::Rabenseifner;

  program.say("{} by {}, {} bytes, on the simulator's unit links", collective_text, algorithm_text, bytes);
  workbook::Table table({{"ranks", 5}, {"messages", 9}, {"bytes", 12}, {"bytes / n", 10}, {"sent", 6}});
  program.say("{}", table.header());
  for (int p = 2; p <= max_ranks; ++p) {
    if (powers_of_two_only && (p & (p - 1)) != 0) continue;
    const ch10::SimulatedRun steps = ch10::simulate_collective(collective, algorithm, p, bytes / 4, {1.0, 0.0});
    const ch10::SimulatedRun on_bytes = ch10::simulate_collective(collective, algorithm, p, bytes / 4, {0.0, 1.0});
    program.say("{}", table.row({std::to_string(p), fmt::format("{:g}", steps.seconds()),
                                 fmt::format("{:.1f}", on_bytes.seconds()),
                                 fmt::format("{:.4f}", on_bytes.seconds() / static_cast<double>(bytes)),
                                 std::to_string(steps.messages)}));
    program.json().write({{"type", "simulated"}, {"collective", collective_text}, {"algorithm", algorithm_text},
                          {"ranks", p}, {"size", bytes}, {"messages", steps.seconds()}, {"bytes", on_bytes.seconds()},
                          {"sent", steps.messages}});
  }
  program.say("messages: the ones one after another on the critical path; sent: every rank's, in all");
  workbook::BenchResult result;
  result.config = fmt::format("{} {}", collective_text, algorithm_text);
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::single_process_main(
      argc, argv, {"ch10_simulate", "run a collective's program on the simulator at every rank count: its messages and bytes"},
      simulate_main);
}
