// Tests for ex11.5: two training steps of the GPT over every mesh against two
// optimizer steps of the whole model on the global batch (float64), with and
// without recomputed blocks; and under bfloat16 autocast, against float32.
#include "catch2_compat.hpp"

#include "gpt_parts.hpp"
#include "mpi_test.hpp"
#include "overlap.hpp"
#include "step.hpp"

namespace {

// Plain SGD, on whatever tensors the sharding hands it: the step is the
// gradient itself, so the parameters show every error in it.
ch07::MakeOptimizer sgd(double lr) {
  return [lr](const std::vector<ch07::FlatGroup*>&, std::vector<torch::Tensor> tensors) {
    return std::make_unique<torch::optim::SGD>(tensors, torch::optim::SGDOptions(lr));
  };
}

}  // namespace

TEST_CASE("ex11.5 two steps over every mesh are the whole model's optimizer steps", "[ex11.5][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size()))
    for (const bool recompute : {false, true}) {
      CAPTURE(shape.data, shape.pipeline, shape.tensor, recompute);
      workbook::Gpt whole = gpt_parts::whole_model(shape, 51);
      whole->to(torch::kFloat64);
      const int64_t sequences = 8;
      // Both steps' batches, drawn before anything else draws (building a stage may).
      const torch::Tensor batches = torch::randint(0, 256, {2, 2, sequences, 16}, torch::kInt64);
      const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
      ch11::GptStage stage(*whole, mesh);
      ch11::StepOptions options;
      options.micro_batches = 2;
      options.recompute = recompute;
      ch11::GptTrainer trainer(*stage, mesh, options, sgd(0.5));
      torch::optim::SGD whole_optimizer(whole->parameters(), torch::optim::SGDOptions(0.5));
      const int64_t rows = sequences / shape.data;
      for (int step = 0; step < 2; ++step) {
        CAPTURE(step);
        const torch::Tensor bytes = batches[step][0], targets = batches[step][1];
        const double loss = trainer.step(bytes.narrow(0, mesh.here.data * rows, rows),
                                         targets.narrow(0, mesh.here.data * rows, rows));
        whole_optimizer.zero_grad();
        const torch::Tensor whole_loss = whole->loss(bytes, targets);
        whole_loss.backward();
        whole_optimizer.step();
        INFO("the step returned the loss " << loss << ", the whole model's is " << whole_loss.item<double>());
        REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss.item<double>()) < 1e-6));
      }
      const gpt_parts::Difference difference = gpt_parts::largest_difference(
          gpt_parts::parts_of(*stage, *whole, mesh), [](const torch::Tensor& p) { return p.detach(); });
      INFO("after the two steps this rank's parameters differ from their parts of the whole model's by up to "
           << difference.largest << (difference.where.empty() ? "" : ", in " + difference.where));
      REQUIRE(mpi_test::all_ranks(difference.largest < 1e-7));
    }
}

TEST_CASE("ex11.5 under bfloat16 autocast the loss stays near float32's", "[ex11.5][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size())) {
    CAPTURE(shape.data, shape.pipeline, shape.tensor);
    workbook::Gpt whole = gpt_parts::whole_model_for_bfloat16(shape, 52);
    const torch::Tensor bytes = torch::randint(0, 256, {8, 16}, torch::kInt64);
    const torch::Tensor targets = torch::randint(0, 256, {8, 16}, torch::kInt64);
    const double whole_loss = whole->loss(bytes, targets).item<double>();

    const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
    ch11::GptStage stage(*whole, mesh);
    const double loss = gpt_parts::step_on_my_rows(*stage, mesh, /*bfloat16=*/true, bytes, targets);
    INFO("bfloat16's loss " << loss << ", float32's " << whole_loss);
    REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss) < 2e-2 * whole_loss));
    INFO("the loss is float32's to 1e-6: the products did not run in bfloat16");
    REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss) > 1e-6));
    bool float32 = true;
    for (const torch::Tensor& p : stage->parameters()) float32 = float32 && p.scalar_type() == torch::kFloat32;
    INFO("the parameters stay float32 under autocast: only the products compute in bfloat16");
    REQUIRE(mpi_test::all_ranks(float32));
  }
}

TEST_CASE("ex11.5 under bfloat16 autocast logits beyond float16's range stay finite", "[ex11.5]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size())) {
    CAPTURE(shape.data, shape.pipeline, shape.tensor);
    // The tied token rows scaled so that the logits reach about 1e5: past
    // float16's largest value (65504), well inside bfloat16's and float32's.
    workbook::Gpt whole = gpt_parts::whole_model(shape, 56);
    {
      torch::NoGradGuard no_grad;
      whole->tokens->weight.mul_(4e5);
    }
    const torch::Tensor bytes = torch::randint(0, 256, {8, 16}, torch::kInt64);
    const torch::Tensor targets = torch::randint(0, 256, {8, 16}, torch::kInt64);
    const double whole_loss = whole->loss(bytes, targets).item<double>();
    const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
    ch11::GptStage stage(*whole, mesh);
    const double loss = gpt_parts::step_on_my_rows(*stage, mesh, /*bfloat16=*/true, bytes, targets);
    INFO("the loss " << loss << ", float32's " << whole_loss << ": a loss that is not finite, or far from "
         "float32's, came from products in a type whose range ends at 65504");
    REQUIRE(mpi_test::all_ranks(std::isfinite(loss) && std::abs(loss - whole_loss) < 2e-2 * whole_loss));
  }
}

TEST_CASE("ex11.5 with the data group's collectives overlapped: the same steps, the buckets sent during backward",
          "[ex11.5][np4]") {
  auto world = mpi_test::communicator();
  const ch11::MeshShape shape{world->size(), 1, 1};
  for (const bool recompute : {false, true}) {
    CAPTURE(recompute);
    // The same model twice: one trained with overlap.hpp's buckets, one with stage 1.
    workbook::Gpt whole = gpt_parts::whole_model(shape, 53);
    whole->to(torch::kFloat64);
    const torch::Tensor batches = torch::randint(0, 256, {3, 2, 8, 16}, torch::kInt64);
    const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
    ch11::GptStage overlapped(*whole, mesh), after(*whole, mesh);
    ch11::StepOptions options;
    options.micro_batches = 2;  // the buckets may go only in the second backward
    options.recompute = recompute;
    options.bucket_cap_bytes = 16 << 10;  // several buckets of this small model
    ch11::GptTrainer plain(*after, mesh, options, sgd(0.5));
    options.overlap = true;
    ch11::GptTrainer trainer(*overlapped, mesh, options, sgd(0.5));
    auto* sharding = dynamic_cast<ch11::OverlappedSharding*>(&trainer.sharding());
    REQUIRE(sharding != nullptr);
    REQUIRE(sharding->buckets() > 2);
    const int64_t rows = 8 / shape.data;
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      const torch::Tensor bytes = batches[step][0].narrow(0, mesh.here.data * rows, rows),
                          targets = batches[step][1].narrow(0, mesh.here.data * rows, rows);
      const double loss = trainer.step(bytes, targets), plain_loss = plain.step(bytes, targets);
      INFO("the loss with overlap " << loss << ", without " << plain_loss);
      REQUIRE(mpi_test::all_ranks(std::abs(loss - plain_loss) < 1e-9));
    }
    double largest = 0.0;
    const auto mine = overlapped->parameters(), theirs = after->parameters();
    for (size_t i = 0; i < mine.size(); ++i)
      largest = std::max(largest, (mine[i] - theirs[i]).abs().max().item<double>());
    INFO("after three steps the parameters with overlap differ from stage 1's by up to " << largest);
    REQUIRE(mpi_test::all_ranks(largest < 1e-12));
    if (world->size() > 1) {
      INFO("the last step handed " << sharding->launched_from_hooks() << " of " << sharding->buckets()
                                   << " buckets to the communication thread during backward (all but the tied "
                                      "token rows' were expected)");
      REQUIRE(mpi_test::all_ranks(sharding->overlapping() &&
                                  sharding->launched_from_hooks() + 1 == sharding->buckets()));
    }
  }
  if (world->size() > 1) {
    // Where a pipeline group communicates too, overlap is refused (Note [overlap at data-only layouts]).
    const ch11::MeshShape pipelined{world->size() / 2, 2, 1};
    const ch11::Mesh pipeline_mesh = gpt_parts::mesh_for(*world, pipelined);
    ch11::GptStage stage(*gpt_parts::whole_model(pipelined, 54), pipeline_mesh);
    ch11::StepOptions options;
    options.overlap = true;
    REQUIRE_THROWS_AS(ch11::GptTrainer(*stage, pipeline_mesh, options), workbook::UserError);
  }
}
