// Tests for ex8.7: 1F1B, checked on what each stage did (its order of work
// and transfers) by properties every 1F1B schedule has, not against a list:
// each stage uses exactly what its neighbours send it, each micro-batch once
// forward and once backward; at most p − s micro-batches held on stage s,
// whatever m, and that many reached; one forward, one backward once the
// stage's first backward has run; and the weights after steps against one
// process accumulating the same micro-batches. A schedule whose blocking
// sends wait for each other never finishes: the watchdog ends it, naming
// the rank and the send.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

namespace {

// The 1F1B contract on one stage's computations: never more than `bound`
// micro-batches held (forwarded, not yet backwarded); after the stage's first
// backward, no two forwards in a row. Empty when both hold.
std::string one_f_one_b_problem(const std::vector<std::string>& order, int64_t bound) {
  int64_t held = 0;
  bool backward_seen = false;
  std::string previous;
  for (const std::string& item : pipeline_oracle::computations(order)) {
    const bool forward = item.front() == 'F';
    held += forward ? 1 : -1;
    if (held > bound)
      return fmt::format("after {} the stage holds {} micro-batches: stage s of p may hold at most p - s = {}", item,
                         held, bound);
    if (forward && backward_seen && !previous.empty() && previous.front() == 'F')
      return fmt::format("{} {}: two forwards in a row after the stage's first backward; 1F1B follows each forward "
                         "with a backward from then on (one forward, one backward)", previous, item);
    backward_seen = backward_seen || !forward;
    previous = item;
  }
  return "";
}

}  // namespace

TEST_CASE("ex8.7 1F1B: each stage uses what its neighbours send, holds at most p - s, alternates; weights as one process",
          "[ex8.7][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int p = comm->size();
  for (const int64_t m : {6, 2, 1}) {
    pipeline_oracle::train_side_by_side(*comm, ch08::Schedule::OneFOneB, m, 2, 5,
                                        [&](const ch08::StageStepStats& stats, const ch08::PipelineStage& stage) {
      const int s = stage.stage();
      INFO("stage " << s << " of " << p << ", m = " << m << ", did: " << pipeline_oracle::joined(stats.order));
      {
        const std::string problem =
            pipeline_oracle::stage_order_problem(stats.order, stage.first_stage(), stage.last_stage(), m);
        INFO(problem);
        REQUIRE(mpi_test::all_ranks(problem.empty()));
      }
      {
        const std::string problem = one_f_one_b_problem(stats.order, p - s);
        INFO(problem);
        REQUIRE(mpi_test::all_ranks(problem.empty()));
      }

      // Every stage's transfers, side by side: stage s + 1 forwards the inputs
      // stage s sent, in the order sent (so micro-batch i's forward on s comes
      // before its forward on s + 1), and stage s backwards with the gradients
      // stage s + 1 sent (so its backward on s comes after the one on s + 1).
      std::vector<double> mine;
      for (const char* what : {"F>", "<F", "B>", "<B"}) {
        const std::vector<double> micros = pipeline_oracle::transfers_of(stats.order, what, m);
        mine.insert(mine.end(), micros.begin(), micros.end());
      }
      const torch::Tensor every =
          comm->all_gather(torch::tensor(mine, torch::kFloat64).to(comm->device())).cpu().reshape({p, 4, m});
      bool matched = true;
      for (int t = 0; t + 1 < p; ++t) {
        matched = matched && torch::equal(every[t][0], every[t + 1][1]);  // sent outputs, received inputs
        matched = matched && torch::equal(every[t + 1][2], every[t][3]);  // sent gradients, received gradients
      }
      {
        std::string table;
        const char* names[] = {"outputs sent", "inputs received", "input gradients sent", "output gradients received"};
        for (int t = 0; t < p; ++t)
          for (int kind = 0; kind < 4; ++kind) {
            table += fmt::format("\n  stage {}, {}:", t, names[kind]);
            for (int64_t k = 0; k < m; ++k) table += fmt::format(" {}", every[t][kind][k].item<int64_t>());
          }
        INFO("the micro-batches of every stage's transfers (a received gradient named after the backward that used "
             "it; -1: no backward used it, -2: no transfer):" << table
             << "\n(each stage must receive, in order, the micro-batches its previous stage sent, and run its "
                "backwards with the gradients its next stage sent, in the order sent)");
        REQUIRE(mpi_test::all_ranks(matched));
      }
      const int64_t bound = std::min<int64_t>(p - s, m);
      INFO("1F1B's stage s holds at most p - s micro-batches and, when m allows, that many (a full pipeline): "
           << bound << " here; measured " << stats.peak_held);
      REQUIRE(mpi_test::all_ranks(stats.peak_held == bound));
    });
  }
}

TEST_CASE("ex8.7 1F1B holds p - s micro-batches however many there are, where GPipe holds them all", "[ex8.7][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int p = comm->size();
  auto whole = pipeline_oracle::whole_model(6);
  ch08::PipelineStage stage(*whole, *comm, pipeline_oracle::kDropoutSeed);
  const int64_t m = 8;
  const torch::Tensor images = pipeline_oracle::images_for(0, 2 * m), labels = pipeline_oracle::labels_for(0, 2 * m);
  const ch08::StageStepStats one_f_one_b = ch08::pipeline_step(stage, ch08::Schedule::OneFOneB, images, labels, m);
  const ch08::StageStepStats gpipe = ch08::pipeline_step(stage, ch08::Schedule::GPipe, images, labels, m);
  INFO("stage " << stage.stage() << ": GPipe held " << gpipe.peak_held << " micro-batches (" << gpipe.peak_held_bytes
                << " bytes at the stage's boundaries), 1F1B " << one_f_one_b.peak_held << " ("
                << one_f_one_b.peak_held_bytes << " bytes)");
  REQUIRE(mpi_test::all_ranks(one_f_one_b.peak_held == p - stage.stage()));
  REQUIRE(mpi_test::all_ranks(one_f_one_b.peak_held_bytes * m == gpipe.peak_held_bytes * (p - stage.stage())));
}
