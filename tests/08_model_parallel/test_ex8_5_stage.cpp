// Tests for ex8.5: a stage's forward and backward of micro-batches, on each
// rank alone (no neighbour is involved: the inputs and output gradients come
// from the whole model's blocks), against the whole model's same blocks:
// the same outputs, input gradients and parameter gradients, bit for bit.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "pipeline_oracles.hpp"

TEST_CASE("ex8.5 a stage's forward and backward of micro-batches are its blocks' in the whole model", "[ex8.5][np3]") {
  auto comm = mpi_test::communicator();
  auto whole = pipeline_oracle::whole_model(3);
  ch08::PipelineStage stage(*whole, *comm, pipeline_oracle::kDropoutSeed);
  const int first = stage.first_block(), end = stage.end_block();
  const bool has_dropout = first <= 2 && 2 < end;
  torch::Generator masks = at::make_generator<at::CPUGeneratorImpl>(pipeline_oracle::kDropoutSeed);  // the stage's
  torch::Generator earlier_masks = at::make_generator<at::CPUGeneratorImpl>(99);  // the earlier blocks' (any)
  const int64_t m = 2, rows = 3;
  const torch::Tensor images = pipeline_oracle::images_for(0, m * rows), labels = pipeline_oracle::labels_for(0, m * rows);
  stage.begin_step(images, labels, m);

  std::vector<torch::Tensor> inputs, whole_inputs, whole_outputs, outputs;
  for (int64_t micro = 0; micro < m; ++micro) {
    // The stage's input: the whole model's earlier blocks on this micro-batch.
    torch::Tensor input;
    {
      torch::NoGradGuard no_grad;
      input = pipeline_oracle::run_blocks(*whole, images.narrow(0, micro * rows, rows), 0, first,
                                          ch08::full_dropout_mask(rows, 600, 0.25, earlier_masks));
    }
    inputs.push_back(input.clone());
    whole_inputs.push_back(first == 0 ? input : input.clone().requires_grad_(true));
    const torch::Tensor mask = has_dropout ? ch08::full_dropout_mask(rows, 600, 0.25, masks) : torch::Tensor();
    torch::Tensor whole_output = pipeline_oracle::run_blocks(*whole, whole_inputs.back(), first, end, mask);
    if (stage.last_stage())
      whole_output = torch::nn::functional::cross_entropy(whole_output, labels.narrow(0, micro * rows, rows)) /
                     static_cast<double>(m);
    whole_outputs.push_back(whole_output);
  }
  // Forward both micro-batches before either backward, as a schedule may.
  for (int64_t micro = 0; micro < m; ++micro) outputs.push_back(stage.forward(micro, inputs[static_cast<size_t>(micro)]));
  INFO("stage " << stage.stage() << " (blocks " << first << " to " << end - 1 << ")");
  INFO("forward keeps each micro-batch in `held` until its backward");
  REQUIRE(mpi_test::all_ranks(stage.held.size() == 2 && stage.held.count(0) == 1 && stage.held.count(1) == 1));
  for (int64_t micro = 0; micro < m; ++micro) {
    const torch::Tensor& output = outputs[static_cast<size_t>(micro)];
    INFO("micro-batch " << micro << ": forward returns the stage's output (the last stage: the loss / m), detached "
         "(what crosses to the next stage is a tensor, not a graph)");
    REQUIRE(mpi_test::all_ranks(!output.requires_grad() &&
                                torch::equal(output, whole_outputs[static_cast<size_t>(micro)].detach())));
  }
  for (int64_t micro = 0; micro < m; ++micro) {
    const size_t i = static_cast<size_t>(micro);
    torch::manual_seed(40 + static_cast<uint64_t>(micro));  // the next stage's gradient for this output
    const torch::Tensor output_grad = stage.last_stage() ? torch::Tensor() : torch::randn(whole_outputs[i].sizes());
    whole_outputs[i].backward(output_grad);
    const torch::Tensor input_grad = stage.backward(micro, output_grad);
    INFO("micro-batch " << micro << ": backward returns the gradient of the stage's input (undefined on the first "
         "stage), and releases the micro-batch");
    REQUIRE(mpi_test::all_ranks(stage.held.count(micro) == 0));
    REQUIRE(mpi_test::all_ranks(stage.first_stage() ? !input_grad.defined()
                                                    : input_grad.defined() && torch::equal(input_grad, whole_inputs[i].grad())));
  }
  const double difference = pipeline_oracle::stage_difference(stage, *whole, /*gradients=*/true);
  INFO("the stage's parameters' gradients, accumulated over both micro-batches, differ from the whole model's by "
       << difference << " (-1: one missing)");
  REQUIRE(mpi_test::all_ranks(difference == 0.0));
}
