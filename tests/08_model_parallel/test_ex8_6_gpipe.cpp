// Tests for ex8.6: GPipe's order of work, what a stage holds, and the weights
// after steps against one process accumulating the same micro-batches.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

namespace {

// Steps the pipeline and the whole model side by side with Adam; returns the
// last step's stats and checks the weights after every step.
void train_side_by_side(ch08::Schedule schedule, int64_t m, int64_t steps,
                        const std::function<void(const ch08::StageStepStats&, const ch08::PipelineStage&)>& check) {
  auto comm = mpi_test::communicator();
  auto whole = pipeline_oracle::whole_model(4);
  ch08::PipelineStage stage(*whole, *comm, pipeline_oracle::kDropoutSeed);
  torch::Generator masks = at::make_generator<at::CPUGeneratorImpl>(pipeline_oracle::kDropoutSeed);
  torch::optim::Adam whole_adam(whole->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam adam(stage.parameters(), torch::optim::AdamOptions(1e-3));
  for (int64_t step = 0; step < steps; ++step) {
    CAPTURE(step, m, comm->size(), comm->rank());
    const torch::Tensor images = pipeline_oracle::images_for(step, 2 * m), labels = pipeline_oracle::labels_for(step, 2 * m);
    whole_adam.zero_grad();
    const double whole_loss = pipeline_oracle::accumulate_step(*whole, masks, images, labels, m);
    whole_adam.step();
    adam.zero_grad();
    const ch08::StageStepStats stats = ch08::pipeline_step(stage, schedule, images, labels, m);
    adam.step();
    check(stats, stage);
    const double difference = pipeline_oracle::stage_difference(stage, *whole, /*gradients=*/false);
    INFO("weights after the step differ from the whole model's by " << difference);
    REQUIRE(mpi_test::all_ranks(difference == 0.0));
    REQUIRE(mpi_test::all_ranks(!stage.last_stage() || std::abs(stats.loss - whole_loss) < 1e-6));
  }
}

}  // namespace

TEST_CASE("ex8.6 GPipe: every forward, then every backward; weights as one process accumulating", "[ex8.6][np3]") {
  for (const int64_t m : {1, 4}) {
    train_side_by_side(ch08::Schedule::GPipe, m, 2, [&](const ch08::StageStepStats& stats, const ch08::PipelineStage& stage) {
      INFO("stage " << stage.stage() << " computed: " << pipeline_oracle::joined(stats.order)
                    << "\nGPipe's:           " << pipeline_oracle::joined(pipeline_oracle::gpipe_order(stage.stage(), stage.stages(), m))
                    << "\n(a micro-batch through every stage and back before the next leaves every other stage idle)");
      REQUIRE(mpi_test::all_ranks(stats.order == pipeline_oracle::gpipe_order(stage.stage(), stage.stages(), m)));
      INFO("GPipe holds every micro-batch at the end of its forwards: " << m << ", measured " << stats.peak_held);
      REQUIRE(mpi_test::all_ranks(stats.peak_held == m));
    });
  }
}
