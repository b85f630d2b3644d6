// Tests for ex9.5: activation checkpointing. The oracle is the same model
// run without checkpoints from the same weights and the same generator
// state: with dropout, its gradients and the generator's next draw must be
// the same bit for bit. Saved bytes are counted from the tensors
// (workbook/tensor_bytes.hpp).
#include "catch2_compat.hpp"

#include "block_mlp.hpp"
#include "checkpoint.hpp"
#include "mpi_test.hpp"
#include "reducer.hpp"
#include "workbook/autocast.hpp"
#include "workbook/tensor_bytes.hpp"

namespace {

ch09::BlockMlpOptions dropout_mlp_options() {
  ch09::BlockMlpOptions options;
  options.blocks = 4;
  options.width = 32;
  options.dropout = 0.5;  // half the units dropped: a recomputation with other masks cannot pass
  return options;
}

struct StepOutcome {
  std::vector<torch::Tensor> gradients;
  torch::Tensor input_gradient;
  torch::Tensor next_draw;  // the generator's next numbers after backward
};

// One forward and backward from weights seeded `seed`, the generator seeded
// 77, checkpointing every `every` blocks (0: none).
StepOutcome run_step(int64_t every, bool input_requires_grad) {
  torch::manual_seed(11);
  auto model = std::make_shared<ch09::BlockMlp>(dropout_mlp_options());
  model->checkpoint_every(every);
  const torch::Tensor images = torch::rand({16, 1, 28, 28}).requires_grad_(input_requires_grad);
  torch::manual_seed(77);
  torch::nn::functional::cross_entropy(model->forward(images), torch::arange(16) % 10).backward();
  StepOutcome outcome;
  for (const torch::Tensor& p : model->parameters()) outcome.gradients.push_back(p.grad().clone());
  if (input_requires_grad) outcome.input_gradient = images.grad().clone();
  outcome.next_draw = torch::rand({8});
  return outcome;
}

}  // namespace

TEST_CASE("ex9.5 with dropout, checkpointed gradients equal the plain model's bit for bit, and so does the next draw",
          "[ex9.5]") {
  const StepOutcome plain = run_step(0, true);
  for (int64_t every : {1, 2, 3, 4}) {
    CAPTURE(every);
    const StepOutcome checkpointed = run_step(every, true);
    for (size_t i = 0; i < plain.gradients.size(); ++i) {
      CAPTURE(i);
      INFO("parameter " << i << "'s gradient: the recomputation must draw the same dropout masks as forward did "
                        "(restore the saved generator state before running the segment again)");
      REQUIRE(torch::equal(checkpointed.gradients[i], plain.gradients[i]));
    }
    INFO("the input's gradient too");
    REQUIRE(torch::equal(checkpointed.input_gradient, plain.input_gradient));
    INFO("after backward the generator must be where the plain run left it: put its state back after recomputing");
    REQUIRE(torch::equal(checkpointed.next_draw, plain.next_draw));
  }
}

TEST_CASE("ex9.5 under bfloat16 autocast, checkpointed gradients equal the plain model's, backward inside the scope "
          "or after it", "[ex9.5]") {
  auto gradients_under_autocast = [](int64_t every, bool backward_inside) {
    torch::manual_seed(15);
    auto model = std::make_shared<ch09::BlockMlp>(dropout_mlp_options());
    model->checkpoint_every(every);
    const torch::Tensor images = torch::rand({16, 1, 28, 28});
    torch::manual_seed(78);
    torch::Tensor loss;
    {
      workbook::AutocastGuard autocast(c10::DeviceType::CPU, torch::kBFloat16);
      loss = torch::nn::functional::cross_entropy(model->forward(images), torch::arange(16) % 10);
      if (backward_inside) loss.backward();
    }
    if (!backward_inside) loss.backward();
    std::vector<torch::Tensor> gradients;
    for (const torch::Tensor& p : model->parameters())
      gradients.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    return gradients;
  };
  for (bool inside : {false, true}) {
    CAPTURE(inside);
    const std::vector<torch::Tensor> plain = gradients_under_autocast(0, inside);
    const std::vector<torch::Tensor> checkpointed = gradients_under_autocast(2, inside);
    for (size_t i = 0; i < plain.size(); ++i) {
      CAPTURE(i);
      INFO("parameter " << i << ": the recomputation must run under autocast as forward did (in bfloat16), and "
                        "must not reuse weights autocast cast while autograd was off (they have no gradient)");
      REQUIRE(checkpointed[i].defined());
      REQUIRE(torch::equal(checkpointed[i], plain[i]));
    }
  }
}

TEST_CASE("ex9.5 a segment whose input needs no gradient still gives its parameters theirs", "[ex9.5]") {
  torch::manual_seed(12);
  auto model = std::make_shared<ch09::BlockMlp>(dropout_mlp_options());
  model->eval();  // no dropout: the two runs below need no shared draws
  const torch::Tensor images = torch::rand({16, 1, 28, 28});  // requires no gradient
  const torch::Tensor labels = torch::arange(16) % 10;
  // The whole model but its last layer as one segment, straight from the images.
  const ch09::Segment body = [&](const torch::Tensor& x) {
    return model->run_blocks(torch::relu(model->input->forward(x.flatten(1))), 0, model->options().blocks);
  };
  torch::nn::functional::cross_entropy(model->output->forward(body(images)), labels).backward();
  std::vector<torch::Tensor> plain;
  for (const torch::Tensor& p : model->parameters()) plain.push_back(p.grad().clone());
  model->zero_grad();
  const torch::Tensor hidden = ch09::checkpoint(body, images);
  INFO("the segment's output must require a gradient although its input does not: its parameters do");
  REQUIRE(hidden.requires_grad());
  torch::nn::functional::cross_entropy(model->output->forward(hidden), labels).backward();
  const std::vector<torch::Tensor> parameters = model->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    CAPTURE(i);
    INFO("parameter " << i << " inside the segment: its gradient, as without the checkpoint");
    REQUIRE(parameters[i].grad().defined());
    REQUIRE(torch::allclose(parameters[i].grad(), plain[i], 1e-5, 1e-7));
  }
}

TEST_CASE("ex9.5 a checkpointed forward keeps its input, not its activations (bytes counted from the tensors)",
          "[ex9.5]") {
  ch09::BlockMlpOptions options;
  options.blocks = 4;
  options.width = 256;
  options.dropout = 0.1;
  torch::manual_seed(13);
  auto model = std::make_shared<ch09::BlockMlp>(options);
  const torch::Tensor images = torch::rand({64, 1, 28, 28});
  auto kept_by_forward = [&](int64_t every) {
    model->checkpoint_every(every);
    const int64_t before = workbook::tensor_bytes(torch::kCPU).current;
    torch::Tensor loss = model->forward(images).sum();
    const int64_t kept = workbook::tensor_bytes(torch::kCPU).current - before;
    loss.backward();
    model->zero_grad();
    return kept;
  };
  kept_by_forward(0);  // once, so that the gradients exist in both measurements alike
  const int64_t plain = kept_by_forward(0);
  const int64_t one_segment = kept_by_forward(4);
  const int64_t activation = 64 * 256 * 4;  // one [64, 256] float32 activation: 64 KiB
  INFO("kept after forward: " << plain << " bytes without a checkpoint, " << one_segment
                              << " with the 4 blocks in one: the checkpoint must keep its input (and the model its "
                                 "output and the first layer's), not the two or more each block saves");
  REQUIRE(plain >= 8 * activation);
  REQUIRE(one_segment <= 3 * activation);
}

TEST_CASE("ex9.5 under Chapter 4's reducer each parameter's hook fires once per step, and DDP's gradients match",
          "[ex9.5][np3]") {
  auto comm = mpi_test::communicator();
  auto averaged_gradients = [&](int64_t every, std::vector<int64_t>* hook_calls) {
    torch::manual_seed(14);
    auto model = std::make_shared<ch09::BlockMlp>(dropout_mlp_options());
    model->checkpoint_every(every);
    const std::vector<torch::Tensor> parameters = model->parameters();
    std::vector<unsigned> handles;
    if (hook_calls != nullptr) {
      hook_calls->assign(parameters.size(), 0);
      for (size_t i = 0; i < parameters.size(); ++i)
        handles.push_back(parameters[i].register_hook([hook_calls, i](torch::Tensor) { ++(*hook_calls)[i]; }));
    }
    ch04::ReducerOptions options;
    options.first_bucket_bytes = 4096;  // several buckets, launched from the hooks
    options.bucket_cap_bytes = 8192;
    options.rebuild_buckets = false;
    ch04::BucketReducer reducer(parameters, *comm, options);
    torch::manual_seed(200 + comm->rank());  // each rank its own batch and dropout masks
    const torch::Tensor images = torch::rand({8, 1, 28, 28});
    torch::nn::functional::cross_entropy(model->forward(images), torch::arange(8) % 10).backward();
    reducer.finish();
    std::vector<torch::Tensor> gradients;
    for (size_t i = 0; i < parameters.size(); ++i) {
      gradients.push_back(parameters[i].grad().clone());
      if (hook_calls != nullptr) parameters[i].remove_hook(handles[i]);
    }
    return gradients;
  };
  const std::vector<torch::Tensor> plain = averaged_gradients(0, nullptr);
  std::vector<int64_t> hook_calls;
  const std::vector<torch::Tensor> checkpointed = averaged_gradients(2, &hook_calls);
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    INFO("parameter " << i << "'s hook fired " << hook_calls[i] << " time(s) in one backward: a reducer counts a "
                      "second call as a second gradient (Note [a checkpoint and DDP's hooks])");
    REQUIRE(mpi_test::all_ranks(hook_calls[i] == 1));
    INFO("the averaged gradient equals DDP's without checkpoints");
    REQUIRE(mpi_test::all_ranks(torch::allclose(checkpointed[i], plain[i], 1e-5, 1e-7)));
  }
}
