// Tests for ex11.4: the stage's forwards and backwards over the mesh against
// the whole model in one process (workbook::Gpt on each data rank's rows,
// float64), for every shape of the world: data, pipeline and tensor alone
// and mixed.
#include "catch2_compat.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "gpt_parts.hpp"
#include "gpt_stage.hpp"
#include "mpi_test.hpp"
#include "workbook/errors.hpp"

TEST_CASE("ex11.4 a step over every mesh gives the whole model's loss and gradients", "[ex11.4][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size())) {
    CAPTURE(shape.data, shape.pipeline, shape.tensor);
    workbook::Gpt whole = gpt_parts::whole_model(shape, 41);
    whole->to(torch::kFloat64);
    const int64_t sequences = 8, positions = 16, micro_batches = 2;
    const torch::Tensor bytes = torch::randint(0, 256, {sequences, positions}, torch::kInt64);
    const torch::Tensor targets = torch::randint(0, 256, {sequences, positions}, torch::kInt64);
    const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
    // This data rank's rows: the whole model on them is what this rank's
    // stage computes, before anything is shared with the data group.
    const int64_t rows = sequences / shape.data, first = mesh.here.data * rows;
    const torch::Tensor my_bytes = bytes.narrow(0, first, rows), my_targets = targets.narrow(0, first, rows);
    const torch::Tensor whole_loss = whole->loss(my_bytes, my_targets);
    whole_loss.backward();

    ch11::GptStage stage(*whole, mesh);
    stage->begin_step(my_bytes, my_targets, micro_batches);
    ch08::one_f_one_b(*stage);
    const double loss = stage->end_step();
    ch11::add_tied_embedding_gradients(*stage, mesh);

    INFO("end_step on the last stage gives " << loss << ", the whole model's loss on this data rank's rows is "
         << whole_loss.item<double>());
    // ex11.2's loss may run in float32 (its contract allows it): 1e-6, where a
    // lost micro-batch moves the loss by far more.
    REQUIRE(mpi_test::all_ranks(!stage->last_stage() || std::abs(loss - whole_loss.item<double>()) < 1e-6));
    const gpt_parts::Difference difference = gpt_parts::largest_difference(
        gpt_parts::parts_of(*stage, *whole, mesh), [](const torch::Tensor& p) { return p.grad(); });
    INFO("this rank's gradients differ from its parts of the whole model's (on this data rank's rows) by up to "
         << difference.largest << (difference.where.empty() ? "" : ", in " + difference.where));
    REQUIRE(mpi_test::all_ranks(difference.largest < 1e-7));
  }
}

TEST_CASE("ex11.4 the stage's evaluate and generate give the whole model's loss and text", "[ex11.4][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size())) {
    CAPTURE(shape.data, shape.pipeline, shape.tensor);
    workbook::Gpt whole = gpt_parts::whole_model(shape, 43);
    whole->to(torch::kFloat64);
    const torch::Tensor bytes = torch::randint(0, 256, {4, 16}, torch::kInt64);
    const torch::Tensor targets = torch::randint(0, 256, {4, 16}, torch::kInt64);
    const double whole_loss = whole->loss(bytes, targets).item<double>();
    torch::Generator whole_draws = at::make_generator<at::CPUGeneratorImpl>(7);
    const std::string whole_text = whole->generate("the ", 24, 1.0, whole_draws);

    const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
    ch11::GptStage stage(*whole, mesh);
    const double loss = stage->evaluate(bytes, targets, 2);
    INFO("evaluate gives " << loss << ", the whole model's loss is " << whole_loss);
    REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss) < 1e-6));
    torch::Generator draws = at::make_generator<at::CPUGeneratorImpl>(7);
    const std::string text = stage->generate("the ", 24, 1.0, draws);
    INFO("generated \"" << text << "\", the whole model \"" << whole_text << "\"");
    REQUIRE(mpi_test::all_ranks(text == whole_text));
  }
}
