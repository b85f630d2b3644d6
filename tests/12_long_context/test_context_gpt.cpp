// The GPT over a context group (context_gpt.hpp, given code built on
// ex12.3's ring attention) against the whole GPT in one process (float64): the same logits
// at each rank's positions, and, averaged over the ranks, the same gradients.
// The whole GPT takes its softmax in float32 (workbook::causal_attention):
// the two agree to float32's rounding, 1e-6, not float64's.
#include "catch2_compat.hpp"

#include "context_gpt.hpp"
#include "mpi_test.hpp"

namespace {

workbook::Gpt small_gpt(int64_t context) {
  workbook::GptOptions options;
  options.layers = 2;
  options.width = 16;
  options.heads = 2;
  options.context = context;
  torch::manual_seed(12);
  workbook::Gpt gpt(options);
  gpt->to(torch::kFloat64);
  return gpt;
}

// The contiguous split (given code), and a shuffled one: every rank some
// positions from anywhere, in no order (not ex12.2's, which its own tests check).
std::vector<ch12::ContextLayout> test_layouts(int64_t T, int cp) {
  torch::manual_seed(77);
  return {ch12::make_layout(T, cp, ch12::Split::Contiguous),
          {ch12::Split::Contiguous, T, torch::randperm(T, torch::kInt64).view({cp, T / cp})}};
}

}  // namespace

TEST_CASE("ex12.3 the GPT over a context group gives the whole GPT's logits at each rank's positions", "[ex12.3][np4]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  const int64_t T = 4 * cp;
  workbook::Gpt gpt = small_gpt(T);
  torch::manual_seed(3);
  const torch::Tensor bytes = torch::randint(0, 256, {2, T}, torch::kInt64);
  const torch::Tensor whole = gpt->forward(bytes);
  for (const ch12::ContextLayout& layout : test_layouts(T, cp)) {
    CAPTURE(cp, layout.positions);
    const torch::Tensor logits =
        ch12::context_parallel_logits(*gpt, ch12::my_columns(bytes, layout, comm->rank()), layout, *comm);
    const torch::Tensor want = ch12::my_columns(whole, layout, comm->rank());
    INFO("rank " << comm->rank() << ": the logits differ from the whole GPT's by up to "
                 << (logits - want).abs().max().item<double>());
    REQUIRE(mpi_test::all_ranks(torch::allclose(logits, want, 1e-6, 1e-6)));
  }
}

TEST_CASE("ex12.3 averaged over the group, the ranks' gradients are the whole GPT's", "[ex12.3][np3]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  const int64_t T = 4 * cp;
  workbook::Gpt gpt = small_gpt(T);
  torch::manual_seed(4);
  const torch::Tensor bytes = torch::randint(0, 256, {2, T}, torch::kInt64);
  const torch::Tensor targets = torch::randint(0, 256, {2, T}, torch::kInt64);
  gpt->loss(bytes, targets).backward();
  std::vector<torch::Tensor> whole;
  for (const auto& p : gpt->parameters()) {
    whole.push_back(p.grad().clone());
    p.mutable_grad().zero_();
  }
  const ch12::ContextLayout layout = test_layouts(T, cp)[1];
  const torch::Tensor logits =
      ch12::context_parallel_logits(*gpt, ch12::my_columns(bytes, layout, comm->rank()), layout, *comm);
  torch::nn::functional::cross_entropy(logits.reshape({-1, 256}),
                                       ch12::my_columns(targets, layout, comm->rank()).reshape({-1}))
      .backward();
  double worst = 0.0;
  size_t i = 0;
  for (const auto& p : gpt->parameters()) {
    torch::Tensor grad = p.grad().clone();
    comm->all_reduce(grad, workbook::ReduceOp::Average);
    worst = std::max(worst, (grad - whole[i++]).abs().max().item<double>());
  }
  INFO("rank " << comm->rank() << ": the averaged gradients differ from the whole GPT's by up to " << worst);
  REQUIRE(mpi_test::all_ranks(worst < 1e-6));
}
