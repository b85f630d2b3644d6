// Tests for ex8.7: 1F1B's order of work, what a stage holds (at most p − s
// micro-batches, whatever m), and the weights after steps against one
// process accumulating the same micro-batches. A schedule whose blocking
// sends wait for each other never finishes: the watchdog ends it, naming
// the rank and the send.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

TEST_CASE("ex8.7 1F1B: every transfer where 1F1B makes it; weights as one process", "[ex8.7][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int p = comm->size();
  for (const int64_t m : {6, 2, 1}) {
    pipeline_oracle::train_side_by_side(*comm, ch08::Schedule::OneFOneB, m, 2, 5,
                                        [&](const ch08::StageStepStats& stats, const ch08::PipelineStage& stage) {
      const std::vector<std::string> expected = pipeline_oracle::one_f_one_b_order(stage.stage(), p, m);
      INFO("stage " << stage.stage() << " computed: " << pipeline_oracle::joined(stats.order)
                    << "\n1F1B's:            " << pipeline_oracle::joined(expected)
                    << "\n(p - s - 1 forwards, then a forward and the oldest backward in turn, then the rest)");
      REQUIRE(mpi_test::all_ranks(stats.order == expected));
      const int64_t bound = std::min<int64_t>(p - stage.stage(), m);
      INFO("1F1B holds at most p - s = " << bound << " micro-batch(es) on this stage; measured " << stats.peak_held);
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
