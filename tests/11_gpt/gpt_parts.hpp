// gpt_parts.hpp — for Chapter 11's tests: the small model and the mesh shapes
// the steps are tested on, and each parameter of a GptStage beside the part of
// the whole model's parameter it holds.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gpt_stage.hpp"
#include "step.hpp"

namespace gpt_parts {

inline workbook::GptOptions step_model(int64_t layers) {
  workbook::GptOptions options;
  options.layers = layers;
  options.width = 32;
  options.heads = 4;
  options.context = 16;
  return options;
}

inline std::vector<ch11::MeshShape> step_shapes(int ranks) {
  std::vector<ch11::MeshShape> shapes;
  for (int d = 1; d <= ranks; ++d)
    for (int p = 1; p <= ranks; ++p)
      for (int t = 1; t <= ranks; ++t)
        if (d * p * t == ranks) shapes.push_back({d, p, t});
  // One axis of data or pipeline first: their meshes are built by one_axis_mesh
  // and their blocks are the whole model's, so an exercise's first failures
  // are its own, before the shapes that need ex11.1 and ex11.3 (every shape
  // needs ex11.2: the last stage's loss).
  std::stable_sort(shapes.begin(), shapes.end(), [ranks](const ch11::MeshShape& a, const ch11::MeshShape& b) {
    return (a.tensor == 1 && (a.data == ranks || a.pipeline == ranks)) >
           (b.tensor == 1 && (b.data == ranks || b.pipeline == ranks));
  });
  return shapes;
}

// Every rank on one line, of data or of pipeline, and alone on the other two axes.
inline ch11::Mesh one_axis_mesh(workbook::Communicator& world, const ch11::MeshShape& shape) {
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


struct Part {
  std::string name;
  torch::Tensor mine, whole;                       // this rank's parameter, the whole model's
  std::function<torch::Tensor(const torch::Tensor&)> cut;  // the whole's tensor (or its gradient) → this rank's part
};

// The mesh a test runs `shape` on: one_axis_mesh where it can, so that an
// exercise is tested before ex11.3 is done; make_mesh otherwise.
inline ch11::Mesh mesh_for(workbook::Communicator& world, const ch11::MeshShape& shape) {
  const bool one_axis = shape.tensor == 1 && (shape.data == world.size() || shape.pipeline == world.size());
  return one_axis ? one_axis_mesh(world, shape) : ch11::make_mesh(world, shape);
}

// The whole model a test compares with, built from `seed`: 2 layers, or one
// per stage where there are more stages.
inline workbook::Gpt whole_model(const ch11::MeshShape& shape, uint64_t seed) {
  torch::manual_seed(seed);
  return workbook::Gpt(step_model(shape.pipeline > 2 ? shape.pipeline : 2));
}

// The whole model of a bfloat16 test: its token embedding scaled by 25, so
// that the logits are of order 1 and bfloat16's rounding shows in the loss
// (at GPT-2's initialisation they are near 0, and the loss is ln 256 to
// within 1e-6 whatever the products' precision).
inline workbook::Gpt whole_model_for_bfloat16(const ch11::MeshShape& shape, uint64_t seed) {
  workbook::Gpt whole = whole_model(shape, seed);
  torch::NoGradGuard no_grad;
  whole->tokens->weight.mul_(25.0);
  return whole;
}

// One step of ex11.5's trainer (2 micro-batches, `bfloat16` as given) on
// this data rank's rows of `bytes` and `targets`: the loss it returns.
inline double step_on_my_rows(ch11::GptStageImpl& stage, const ch11::Mesh& mesh, bool bfloat16,
                              const torch::Tensor& bytes, const torch::Tensor& targets) {
  ch11::StepOptions options;
  options.micro_batches = 2;
  options.bfloat16 = bfloat16;
  ch11::GptTrainer trainer(stage, mesh, options);
  const int64_t rows = bytes.size(0) / mesh.shape.data;
  return trainer.step(bytes.narrow(0, mesh.here.data * rows, rows), targets.narrow(0, mesh.here.data * rows, rows));
}

// For each row of `part`, the row of `whole` nearest to it: the part's
// weights were copied from the whole's (and trained alike since), and a
// random matrix's rows lie far apart. So the tests read how a rank laid out
// its part of a Linear from the part itself, whatever layout it chose.
inline torch::Tensor matching_rows(const torch::Tensor& part, const torch::Tensor& whole) {
  torch::NoGradGuard no_grad;
  const torch::Tensor p = part.detach().to(torch::kFloat64).reshape({part.size(0), 1, -1});
  const torch::Tensor w = whole.detach().to(torch::kFloat64).reshape({1, whole.size(0), -1});
  return (p - w).abs().sum(2).argmin(1);
}

// The rows of a whole tensor (or its gradient) that `part_weight` holds, in its order.
inline std::function<torch::Tensor(const torch::Tensor&)> rows_like(const torch::Tensor& part_weight,
                                                                   const torch::Tensor& whole_weight) {
  const torch::Tensor index = matching_rows(part_weight, whole_weight);
  return [index](const torch::Tensor& x) { return x.index_select(0, index.to(x.device())); };
}

inline std::vector<Part> parts_of(ch11::GptStageImpl& stage, workbook::GptImpl& whole, const ch11::Mesh& mesh) {
  const int64_t t = mesh.shape.tensor, r = mesh.here.tensor, width = whole.options.width;
  const int64_t local = width / t, hidden = 4 * width / t, vocabulary_rows = whole.options.vocabulary / t;
  const auto all = [](const torch::Tensor& x) { return x; };
  const auto rows = [](int64_t first, int64_t count) {
    return [=](const torch::Tensor& x) { return x.narrow(0, first, count); };
  };
  const auto columns = [](int64_t first, int64_t count) {
    return [=](const torch::Tensor& x) { return x.narrow(1, first, count); };
  };
  std::vector<Part> parts;
  if (stage.tokens.defined())
    parts.push_back({"tokens", stage.tokens, whole.tokens->weight, rows(r * vocabulary_rows, vocabulary_rows)});
  if (stage.first_stage()) parts.push_back({"positions", stage.positions->weight, whole.positions->weight, all});
  if (stage.last_stage()) {
    parts.push_back({"final_norm.weight", stage.final_norm->weight, whole.final_norm->weight, all});
    parts.push_back({"final_norm.bias", stage.final_norm->bias, whole.final_norm->bias, all});
  }
  for (int64_t layer = stage.first_layer; layer < stage.end_layer; ++layer) {
    auto& block = *whole.blocks[layer]->as<workbook::GptBlockImpl>();
    const auto expected = block.named_parameters();
    const auto name = [layer](const std::string& what) { return "block " + std::to_string(layer) + ": " + what; };
    if (t == 1) {  // the whole block's copy: every parameter by name
      for (const auto& mine : stage.blocks[layer - stage.first_layer]->named_parameters())
        parts.push_back({name(mine.key()), mine.value(), expected[mine.key()], all});
      continue;
    }
    auto& mine = *stage.blocks[layer - stage.first_layer]->as<ch11::TensorParallelBlockImpl>();
    const auto heads = rows_like(mine.qkv->weight, block.attention->qkv->weight);
    parts.push_back({name("norm1.weight"), mine.norm1->weight, block.norm1->weight, all});
    parts.push_back({name("norm1.bias"), mine.norm1->bias, block.norm1->bias, all});
    parts.push_back({name("norm2.weight"), mine.norm2->weight, block.norm2->weight, all});
    parts.push_back({name("norm2.bias"), mine.norm2->bias, block.norm2->bias, all});
    parts.push_back({name("qkv.weight"), mine.qkv->weight, block.attention->qkv->weight, heads});
    parts.push_back({name("qkv.bias"), mine.qkv->bias, block.attention->qkv->bias, heads});
    parts.push_back({name("projection.weight"), mine.projection->weight, block.attention->projection->weight,
                     columns(r * local, local)});
    parts.push_back({name("projection.bias"), mine.projection->bias, block.attention->projection->bias, all});
    parts.push_back({name("expand.weight"), mine.expand->weight, block.expand->weight, rows(r * hidden, hidden)});
    parts.push_back({name("expand.bias"), mine.expand->bias, block.expand->bias, rows(r * hidden, hidden)});
    parts.push_back({name("contract.weight"), mine.contract->weight, block.contract->weight,
                     columns(r * hidden, hidden)});
    parts.push_back({name("contract.bias"), mine.contract->bias, block.contract->bias, all});
  }
  return parts;
}

struct Difference {
  double largest = 0.0;
  std::string where;  // the part that has it
};

// The largest difference between what `mine_of` takes of this rank's parts and of the whole's.
inline Difference largest_difference(const std::vector<Part>& parts,
                                     const std::function<torch::Tensor(const torch::Tensor&)>& of) {
  Difference found;
  for (const Part& part : parts) {
    const torch::Tensor mine = of(part.mine), whole = of(part.whole);
    if (!mine.defined() || !whole.defined()) return {INFINITY, part.name + " (it has none)"};
    const double difference = (mine - part.cut(whole)).abs().max().item<double>();
    if (!(difference <= found.largest)) found = {difference, part.name};
  }
  return found;
}

}  // namespace gpt_parts
