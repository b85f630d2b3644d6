// Tests for ex8.5: a stage's forward and backward of one micro-batch, driven
// here by the simplest schedule (each micro-batch through every stage and
// back before the next), against one process accumulating the micro-batches.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

namespace {
// The test's own schedule: one micro-batch at a time, end to end.
void one_at_a_time(ch08::PipelineStage& stage, std::vector<bool>& held_after_forward, std::vector<bool>& detached) {
  for (int64_t micro = 0; micro < stage.micro_batches(); ++micro) {
    const torch::Tensor output = stage.forward(micro, stage.recv_forward(micro));
    held_after_forward.push_back(stage.held.count(micro) == 1);
    detached.push_back(!output.requires_grad());
    stage.send_forward(output);
    stage.send_backward(stage.backward(micro, stage.recv_backward()));
  }
}
}  // namespace

TEST_CASE("ex8.5 a stage's forward and backward give the whole model's gradients for its layers", "[ex8.5][np3]") {
  auto comm = mpi_test::communicator();
  const int p = comm->size();
  auto whole = pipeline_oracle::whole_model(3);
  ch08::PipelineStage stage(*whole, *comm, pipeline_oracle::kDropoutSeed);
  torch::Generator masks = at::make_generator<at::CPUGeneratorImpl>(pipeline_oracle::kDropoutSeed);
  const int64_t m = 3;
  const torch::Tensor images = pipeline_oracle::images_for(0, 6), labels = pipeline_oracle::labels_for(0, 6);
  const double whole_loss = pipeline_oracle::accumulate_step(*whole, masks, images, labels, m);

  stage.begin_step(images, labels, m);
  std::vector<bool> held_after_forward, detached;
  one_at_a_time(stage, held_after_forward, detached);
  INFO("forward keeps the micro-batch in `held` until its backward, and returns its output detached "
       "(what crosses to the next stage is a tensor, not a graph)");
  REQUIRE(mpi_test::all_ranks(std::all_of(held_after_forward.begin(), held_after_forward.end(), [](bool b) { return b; })));
  REQUIRE(mpi_test::all_ranks(std::all_of(detached.begin(), detached.end(), [](bool b) { return b; })));
  INFO("backward releases it");
  REQUIRE(mpi_test::all_ranks(stage.held.empty()));
  const ch08::StageStepStats stats = stage.end_step();
  const double difference = pipeline_oracle::stage_difference(stage, *whole, /*gradients=*/true);
  INFO("stage " << stage.stage() << " of " << p << ": its parameters' gradients differ from the whole model's by "
                << difference << " (-1: a gradient missing; the last stage's loss is the micro-batch's mean / m)");
  REQUIRE(mpi_test::all_ranks(difference == 0.0));
  if (stage.last_stage()) {
    INFO("the last stage's loss over the step: the whole batch's mean, " << whole_loss);
    CHECK(std::abs(stats.loss - whole_loss) < 1e-6);
  }
  REQUIRE(mpi_test::all_ranks(!stage.last_stage() || std::abs(stats.loss - whole_loss) < 1e-6));
}
