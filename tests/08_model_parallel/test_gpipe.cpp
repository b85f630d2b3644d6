// Tests for gpipe.cpp (given code, ex8.6 until 2026-11-30) on ex8.5's stage: GPipe's
// order of work, what a stage holds, and the weights after steps against one
// process accumulating the same micro-batches.
// GPipe runs every forward before any backward. The test accepts the
// backwards in micro-batch order, in the paper's, and in any other order that
// trains what one process accumulating the micro-batches trains.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

TEST_CASE("GPipe (given): every forward, then every backward; weights as one process accumulating", "[gpipe][np3][np4]") {
  for (const int64_t m : {1, 4}) {
    auto comm = mpi_test::communicator();
    pipeline_oracle::train_side_by_side(*comm, ch08::Schedule::GPipe, m, 2, 4, [&](const ch08::StageStepStats& stats, const ch08::PipelineStage& stage) {
      const std::vector<std::string> work = pipeline_oracle::computations(stats.order);
      const std::vector<int64_t> backwards = pipeline_oracle::backward_order_of(stats.order, m);
      bool forwards_first = !backwards.empty() && static_cast<int64_t>(work.size()) == 2 * m;
      for (int64_t i = 0; forwards_first && i < m; ++i) forwards_first = work[static_cast<size_t>(i)] == fmt::format("F{}", i);
      {
        INFO("stage " << stage.stage() << " computed: " << pipeline_oracle::joined(work)
                      << "\n(GPipe runs the forwards of micro-batches 0 to m - 1, in that order, before any backward, "
                         "then each micro-batch's backward once)");
        REQUIRE(mpi_test::all_ranks(forwards_first));
      }

      // Every stage's order of backwards, side by side.
      const torch::Tensor mine = torch::tensor(std::vector<double>(backwards.begin(), backwards.end()), torch::kFloat64);
      const torch::Tensor every = comm->all_gather(mine.to(comm->device())).cpu().reshape({comm->size(), m});
      const bool same_everywhere = every.eq(every[0]).all().item<bool>();
      {
        INFO("the stages' backwards, in order, one stage per row:\n" << every
             << "\n(the stages ran their backwards in different orders: a stage ran a micro-batch's backward on "
                "a gradient that belonged to another micro-batch)");
        REQUIRE(mpi_test::all_ranks(same_everywhere));
      }

      {
        const std::string problem =
            pipeline_oracle::stage_order_problem(stats.order, stage.first_stage(), stage.last_stage(), m);
        INFO("stage " << stage.stage() << " did:  " << pipeline_oracle::joined(stats.order) << "\n" << problem);
        REQUIRE(mpi_test::all_ranks(problem.empty()));
      }
      INFO("GPipe holds every micro-batch at the end of its forwards: " << m << ", measured " << stats.peak_held);
      REQUIRE(mpi_test::all_ranks(stats.peak_held == m));
    });
  }
}
