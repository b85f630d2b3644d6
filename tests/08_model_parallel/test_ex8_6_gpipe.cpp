// Tests for ex8.6: GPipe's order of work, what a stage holds, and the weights
// after steps against one process accumulating the same micro-batches.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

TEST_CASE("ex8.6 GPipe: every forward, then every backward; weights as one process accumulating", "[ex8.6][np3]") {
  for (const int64_t m : {1, 4}) {
    auto comm = mpi_test::communicator();
    pipeline_oracle::train_side_by_side(*comm, ch08::Schedule::GPipe, m, 2, 4, [&](const ch08::StageStepStats& stats, const ch08::PipelineStage& stage) {
      INFO("stage " << stage.stage() << " computed: " << pipeline_oracle::joined(stats.order)
                    << "\nGPipe's:           " << pipeline_oracle::joined(pipeline_oracle::gpipe_order(stage.stage(), stage.stages(), m))
                    << "\n(a micro-batch through every stage and back before the next leaves every other stage idle)");
      REQUIRE(mpi_test::all_ranks(stats.order == pipeline_oracle::gpipe_order(stage.stage(), stage.stages(), m)));
      INFO("GPipe holds every micro-batch at the end of its forwards: " << m << ", measured " << stats.peak_held);
      REQUIRE(mpi_test::all_ranks(stats.peak_held == m));
    });
  }
}
