// Tests for ex11.6 (branch work): the parameters and the elements the plan
// predicts for each rank, against the ones the tensors and the Communicator count.
#include "catch2_compat.hpp"

#include "gpt_parts.hpp"
#include "mpi_test.hpp"
#include "plan.hpp"
#include "step.hpp"
#include "workbook/models.hpp"

TEST_CASE("ex11.6 the whole model's parameters from its sizes", "[ex11.6]") {
  for (const workbook::GptOptions& model : {workbook::GptOptions{}, gpt_parts::step_model(3)}) {
    torch::manual_seed(1);
    workbook::Gpt whole(model);
    REQUIRE(ch11::gpt_parameters(model) == workbook::count_parameters(*whole));
  }
}

TEST_CASE("ex11.6 each rank's parameters and each group's elements in a step, as predicted", "[ex11.6][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size()))
    for (const bool recompute : {false, true}) {
      CAPTURE(shape.data, shape.pipeline, shape.tensor, recompute);
      workbook::Gpt whole = gpt_parts::whole_model(shape, 61);
      const torch::Tensor batch = torch::randint(0, 256, {2, 8, 16}, torch::kInt64);
      const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
      ch11::GptStage stage(*whole, mesh);
      REQUIRE(workbook::count_parameters(*stage) == ch11::parameters_at(whole->options, shape, mesh.here));

      ch11::StepOptions options;
      options.micro_batches = 2;
      options.recompute = recompute;
      ch11::GptTrainer trainer(*stage, mesh, options);
      const workbook::CommStats tensor = mesh.tensor->stats(), pipeline = mesh.pipeline->stats(),
                                data = mesh.data->stats();
      const int64_t rows = 8 / shape.data;
      trainer.step(batch[0].narrow(0, mesh.here.data * rows, rows), batch[1].narrow(0, mesh.here.data * rows, rows));
      const auto moved = [](const workbook::CommStats& before, const workbook::CommStats& after, workbook::CommOp op) {
        return after.elements[static_cast<int>(op)] - before.elements[static_cast<int>(op)];
      };
      ch11::StepShape step;
      step.batch = 8;
      step.context = 16;
      step.micro_batches = 2;
      step.recompute = recompute;
      const ch11::StepElements predicted = ch11::step_elements(whole->options, shape, mesh.here, step);
      CHECK(moved(tensor, mesh.tensor->stats(), workbook::CommOp::AllReduce) == predicted.tensor_all_reduce);
      CHECK(moved(pipeline, mesh.pipeline->stats(), workbook::CommOp::Send) +
                moved(pipeline, mesh.pipeline->stats(), workbook::CommOp::Exchange) ==
            predicted.pipeline_sent);
      CHECK(moved(data, mesh.data->stats(), workbook::CommOp::ReduceScatter) == predicted.data_reduce_scatter);
      CHECK(moved(data, mesh.data->stats(), workbook::CommOp::AllGather) == predicted.data_all_gather);
    }
}
