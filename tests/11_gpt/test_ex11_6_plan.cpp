// Tests for ex11.6: the FLOPs and the elements the plan predicts for each
// rank, against the ones its own layers and its Communicator count.
#include "catch2_compat.hpp"

#include "flop_count.hpp"
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

TEST_CASE("ex11.6 each rank's FLOPs in a step, as LibTorch's profiler counts its products", "[ex11.6][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size()))
    for (const int64_t extra_layers : {0, 1})  // 1: stages of unequal length
    for (const bool recompute : {false, true}) {
      if (extra_layers > 0 && shape.pipeline == 1) continue;
      CAPTURE(shape.data, shape.pipeline, shape.tensor, extra_layers, recompute);
      torch::manual_seed(62);
      workbook::Gpt whole(gpt_parts::step_model((shape.pipeline > 2 ? shape.pipeline : 2) + extra_layers));
      // In float64 attention takes its unfused path, whose products the
      // profiler sees (the fused kernel of float32 is one opaque call).
      whole->to(torch::kFloat64);
      const torch::Tensor batch = torch::randint(0, 256, {2, 8, 16}, torch::kInt64);
      const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
      ch11::GptStage stage(*whole, mesh);
      ch11::StepOptions options;
      options.micro_batches = 2;
      options.recompute = recompute;
      ch11::GptTrainer trainer(*stage, mesh, options);
      const int64_t rows = 8 / shape.data;
      const torch::Tensor bytes = batch[0].narrow(0, mesh.here.data * rows, rows),
                          targets = batch[1].narrow(0, mesh.here.data * rows, rows);
      // Forward alone (evaluate runs the step's forwards without a graph), then the whole step.
      const double forward = gpt_parts::matrix_product_flops([&] { stage->evaluate(bytes, targets, 2); });
      const double step = gpt_parts::matrix_product_flops([&] { trainer.step(bytes, targets); });
      ch11::StepShape shape_of_step;
      shape_of_step.batch = 8;
      shape_of_step.context = 16;
      shape_of_step.micro_batches = 2;
      shape_of_step.recompute = recompute;
      const ch11::StepFlops flops = ch11::step_flops(whole->options, shape, mesh.here, shape_of_step);
      INFO("this rank's products in its forwards, as counted while it evaluates its rows");
      CHECK(flops.forward == Approx(forward).epsilon(1e-12));
      INFO("and in backward, as counted in a whole step less the forwards");
      CHECK(flops.backward == Approx(step - forward).epsilon(1e-12));
    }
}

namespace {

// One step of ex11.5's trainer (Adam, 2 micro-batches of 8
// sequences of 16 bytes) against step_elements' prediction for this rank.
void check_elements(workbook::Communicator& world, const workbook::GptOptions& model, const ch11::MeshShape& shape,
                    bool recompute) {
  CAPTURE(model.width, shape.data, shape.pipeline, shape.tensor, recompute);
  torch::manual_seed(61);
  workbook::Gpt whole(model);
  const torch::Tensor batch = torch::randint(0, 256, {2, 8, 16}, torch::kInt64);
  const ch11::Mesh mesh = gpt_parts::mesh_for(world, shape);
  ch11::GptStage stage(*whole, mesh);
  REQUIRE(workbook::count_parameters(*stage) == ch11::parameters_at(model, shape, mesh.here));

  ch11::StepOptions options;
  options.micro_batches = 2;
  options.recompute = recompute;
  ch11::GptTrainer trainer(*stage, mesh, options);
  const workbook::CommStats tensor = mesh.tensor->stats(), pipeline = mesh.pipeline->stats(), data = mesh.data->stats();
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
  const ch11::StepElements predicted = ch11::step_elements(model, shape, mesh.here, step);
  // The step's loss is left out of the plan, however it travels (plan.hpp):
  // one all-reduce of one number over the tensor group, or a number sent to
  // each other stage, is the loss's, not the plan's to count.
  const int64_t tensor_elements = moved(tensor, mesh.tensor->stats(), workbook::CommOp::AllReduce);
  const int64_t tensor_calls =
      mesh.tensor->stats().count(workbook::CommOp::AllReduce) - tensor.count(workbook::CommOp::AllReduce);
  const bool loss_in_tensor_group = shape.tensor > 1 && tensor_elements == predicted.tensor_all_reduce + 1 &&
                                    tensor_calls == predicted.tensor_all_reduce_calls + 1;
  CAPTURE(tensor_elements, tensor_calls, loss_in_tensor_group);
  CHECK(tensor_elements - loss_in_tensor_group == predicted.tensor_all_reduce);
  CHECK(tensor_calls - loss_in_tensor_group == predicted.tensor_all_reduce_calls);
  const int64_t pipeline_sent = moved(pipeline, mesh.pipeline->stats(), workbook::CommOp::Send) +
                                moved(pipeline, mesh.pipeline->stats(), workbook::CommOp::Exchange);
  CAPTURE(pipeline_sent);
  CHECK(pipeline_sent - predicted.pipeline_sent >= 0);
  CHECK(pipeline_sent - predicted.pipeline_sent <= shape.pipeline - 1);  // the loss, one number to each other stage
  CHECK(moved(data, mesh.data->stats(), workbook::CommOp::ReduceScatter) == predicted.data_reduce_scatter);
  CHECK(moved(data, mesh.data->stats(), workbook::CommOp::AllGather) == predicted.data_all_gather);
  // The plan's bytes besides activations (given) against what the trainer's
  // sharding (Chapter 7's reference, as ex11.5 builds it) holds after the step.
  // The padding of the last shard may be kept or not, in any of three buffers.
  const int64_t parameters = ch11::parameters_at(model, shape, mesh.here);
  const int64_t padding = (parameters + shape.data - 1) / shape.data * shape.data - parameters;
  INFO("state_bytes_at (given, plan_layouts.cpp) against trainer.sharding().held(): a difference beyond the "
       "padding is GptTrainer's sharding (ex11.5) holding other than the stage's parameters, their gradients, an "
       "averaged gradient shard and Adam's moments for a 1/d shard of them");
  CHECK(trainer.sharding().held().total() ==
        Approx(ch11::state_bytes_at(model, shape, mesh.here)).margin(3.0 * 4 * padding));
}

}  // namespace

TEST_CASE("ex11.6 each rank's parameters and each group's elements in a step, as predicted", "[ex11.6][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : gpt_parts::step_shapes(world->size()))
    for (const bool recompute : {false, true}) {
      check_elements(*world, gpt_parts::step_model(shape.pipeline > 2 ? shape.pipeline : 2), shape, recompute);
      // Stages of unequal length: one layer more than the stages divide.
      if (shape.pipeline > 1) check_elements(*world, gpt_parts::step_model(shape.pipeline + 1), shape, recompute);
    }
  // A width of 6 and 3 layers: 3174 parameters, which 4 data ranks do not divide.
  workbook::GptOptions narrow = gpt_parts::step_model(3);
  narrow.width = 6;
  narrow.heads = 2;
  check_elements(*world, narrow, {world->size(), 1, 1}, false);
}

TEST_CASE("ex11.6 the plan ranks every layout of 4 ranks, each group on the link it is placed on", "[ex11.6]") {
  ch11::Machine machine;
  machine.flops_per_s = 1e10;
  machine.ranks_per_node = 2;
  machine.between_nodes = ch10::Link::of_rate(1e9, 1e-4);  // the within-node link is free
  ch11::StepShape step;
  const std::vector<ch11::LayoutPlan> plans = ch11::rank_layouts(workbook::GptOptions{}, 4, step, machine, {1, 2, 4});
  REQUIRE(plans.size() == 6 * 3);  // (d, p, t) of 4 with t | 4 heads, p ≤ 4 layers; m of 1, 2, 4
  for (size_t k = 1; k < plans.size(); ++k) CHECK(plans[k - 1].total_s() <= plans[k].total_s());
  for (const ch11::LayoutPlan& plan : plans) {
    CAPTURE(plan.shape.data, plan.shape.pipeline, plan.shape.tensor, plan.micro_batches);
    CHECK(plan.compute_s == Approx(ch11::model_flops(workbook::GptOptions{}, step) / 4 / 1e10));
    CHECK((plan.tensor_s > 0) == (plan.shape.tensor == 4));      // a tensor group of 2 stays in a node
    const bool data_across = plan.shape.data > 1 && plan.shape.tensor * plan.shape.data > 2;
    CHECK((plan.data_s > 0) == (data_across || plan.shape.pipeline > 1));  // a pipeline's tied exchange crosses
  }
}
