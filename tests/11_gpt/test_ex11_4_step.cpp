// Tests for ex11.4: a training step of the GPT over the mesh against the
// whole model in one process (workbook::Gpt on the global batch, float64),
// for every shape of the world: data, pipeline and tensor alone and mixed.
#include "catch2_compat.hpp"

#include <algorithm>

#include "gpt_stage.hpp"
#include "mpi_test.hpp"
#include "workbook/errors.hpp"

namespace {

workbook::GptOptions step_model(int64_t layers) {
  workbook::GptOptions options;
  options.layers = layers;
  options.width = 32;
  options.heads = 4;
  options.context = 16;
  return options;
}

std::vector<ch11::MeshShape> step_shapes(int ranks) {
  std::vector<ch11::MeshShape> shapes;
  for (int d = 1; d <= ranks; ++d)
    for (int p = 1; p <= ranks; ++p)
      for (int t = 1; t <= ranks; ++t)
        if (d * p * t == ranks) shapes.push_back({d, p, t});
  // One axis of data or pipeline first: their meshes are built here and their
  // blocks are the whole model's, so ex11.4 is tested before ex11.1 and ex11.3.
  std::stable_sort(shapes.begin(), shapes.end(), [ranks](const ch11::MeshShape& a, const ch11::MeshShape& b) {
    return (a.tensor == 1 && (a.data == ranks || a.pipeline == ranks)) >
           (b.tensor == 1 && (b.data == ranks || b.pipeline == ranks));
  });
  return shapes;
}

// Every rank on one line, of data or of pipeline, and alone on the other two axes.
ch11::Mesh one_axis_mesh(workbook::Communicator& world, const ch11::MeshShape& shape) {
  ch11::Mesh mesh;
  mesh.shape = shape;
  const int r = world.rank();
  const bool pipeline = shape.pipeline == world.size();
  mesh.here = pipeline ? ch11::MeshCoordinates{0, r, 0} : ch11::MeshCoordinates{r, 0, 0};
  (pipeline ? mesh.pipeline : mesh.data) = world.split(0, r, "the line");
  (pipeline ? mesh.data : mesh.pipeline) = world.split(r, 0, "alone");
  mesh.tensor = world.split(r, 0, "alone");
  return mesh;
}

// Rows [first, first + count) of each of q, k and v in the whole qkv's [3w, w] weight (or [3w] bias).
torch::Tensor qkv_head_rows(const torch::Tensor& whole, int64_t width, int64_t first, int64_t count) {
  return torch::cat({whole.narrow(0, first, count), whole.narrow(0, width + first, count),
                     whole.narrow(0, 2 * width + first, count)});
}

struct Difference {
  double largest = 0.0;
  std::string where;  // the parameter that has it
};

// The largest difference between this rank's gradients and its parts of the whole model's.
Difference largest_difference(ch11::GptStageImpl& stage, workbook::GptImpl& whole, const ch11::Mesh& mesh) {
  const int64_t t = mesh.shape.tensor, r = mesh.here.tensor, width = whole.options.width;
  const int64_t local = width / t, hidden = 4 * width / t, vocabulary_rows = whole.options.vocabulary / t;
  Difference found;
  auto compare = [&](const torch::Tensor& mine, const torch::Tensor& expected, const std::string& name) {
    WB_ASSERT(mine.grad().defined(), "{} has no gradient", name);
    const double difference = (mine.grad() - expected).abs().max().item<double>();
    if (difference > found.largest) found = {difference, name};
  };
  if (stage.tokens.defined())
    compare(stage.tokens, whole.tokens->weight.grad().narrow(0, r * vocabulary_rows, vocabulary_rows), "tokens");
  if (stage.first_stage()) compare(stage.positions->weight, whole.positions->weight.grad(), "positions");
  if (stage.last_stage()) {
    compare(stage.final_norm->weight, whole.final_norm->weight.grad(), "final_norm.weight");
    compare(stage.final_norm->bias, whole.final_norm->bias.grad(), "final_norm.bias");
  }
  for (int64_t layer = stage.first_layer; layer < stage.end_layer; ++layer) {
    auto& block = *whole.blocks[layer]->as<workbook::GptBlockImpl>();
    if (t == 1) {  // the whole block's copy: every parameter by name
      const auto expected = block.named_parameters();
      for (const auto& mine : stage.blocks[layer - stage.first_layer]->named_parameters())
        compare(mine.value(), expected[mine.key()].grad(), fmt::format("block {}: {}", layer, mine.key()));
      continue;
    }
    auto& mine = *stage.blocks[layer - stage.first_layer]->as<ch11::TensorParallelBlockImpl>();
    compare(mine.norm1->weight, block.norm1->weight.grad(), fmt::format("block {}: norm1.weight", layer));
    compare(mine.norm2->bias, block.norm2->bias.grad(), fmt::format("block {}: norm2.bias", layer));
    compare(mine.qkv->weight, qkv_head_rows(block.attention->qkv->weight.grad(), width, r * local, local),
            fmt::format("block {}: qkv.weight", layer));
    compare(mine.qkv->bias, qkv_head_rows(block.attention->qkv->bias.grad(), width, r * local, local),
            fmt::format("block {}: qkv.bias", layer));
    compare(mine.projection->weight, block.attention->projection->weight.grad().narrow(1, r * local, local),
            fmt::format("block {}: projection.weight", layer));
    compare(mine.projection->bias, block.attention->projection->bias.grad(),
            fmt::format("block {}: projection.bias", layer));
    compare(mine.expand->weight, block.expand->weight.grad().narrow(0, r * hidden, hidden),
            fmt::format("block {}: expand.weight", layer));
    compare(mine.contract->weight, block.contract->weight.grad().narrow(1, r * hidden, hidden),
            fmt::format("block {}: contract.weight", layer));
  }
  return found;
}

}  // namespace

TEST_CASE("ex11.4 a step over every mesh gives the whole model's loss and gradients", "[ex11.4][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : step_shapes(world->size())) {
    CAPTURE(shape.data, shape.pipeline, shape.tensor);
    torch::manual_seed(41);
    workbook::Gpt whole(step_model(shape.pipeline > 2 ? shape.pipeline : 2));
    whole->to(torch::kFloat64);
    const int64_t sequences = 8, positions = 16, micro_batches = 2;
    const torch::Tensor bytes = torch::randint(0, 256, {sequences, positions}, torch::kInt64);
    const torch::Tensor targets = torch::randint(0, 256, {sequences, positions}, torch::kInt64);
    const torch::Tensor whole_loss = whole->loss(bytes, targets);
    whole_loss.backward();

    const bool one_axis = shape.tensor == 1 && (shape.data == world->size() || shape.pipeline == world->size());
    const ch11::Mesh mesh = one_axis ? one_axis_mesh(*world, shape) : ch11::make_mesh(*world, shape);
    ch11::GptStage stage(*whole, mesh);
    const int64_t rows = sequences / shape.data, first = mesh.here.data * rows;
    stage->begin_step(bytes.narrow(0, first, rows), targets.narrow(0, first, rows), micro_batches);
    ch08::one_f_one_b(*stage);
    torch::Tensor loss = torch::full({1}, stage->end_step(), torch::kFloat64);
    ch11::add_tied_embedding_gradients(*stage, mesh);
    ch11::average_over_data_group(*stage, mesh);

    // The mean over the data ranks of the last stages' losses, on every rank.
    if (!stage->last_stage()) loss.zero_();
    world->all_reduce(loss, workbook::ReduceOp::Sum);
    loss /= shape.data * shape.tensor;
    INFO("loss " << loss.item<double>() << ", the whole model's " << whole_loss.item<double>());
    // ex11.2's loss may run in float32 (its contract allows it): 1e-6, where a
    // lost micro-batch or data rank moves the loss by far more.
    REQUIRE(mpi_test::all_ranks(std::abs(loss.item<double>() - whole_loss.item<double>()) < 1e-6));
    const Difference difference = largest_difference(*stage, *whole, mesh);
    INFO("this rank's gradients differ from its parts of the whole model's by up to " << difference.largest
         << (difference.where.empty() ? "" : ", in " + difference.where));
    REQUIRE(mpi_test::all_ranks(difference.largest < 1e-7));
  }
}
