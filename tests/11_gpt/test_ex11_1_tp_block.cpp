// Tests for ex11.1: a transformer block split over the tensor ranks against
// the whole block (workbook::GptBlock) in float64, at 1, 2 and 4 ranks.
#include "catch2_compat.hpp"

#include "gpt_parts.hpp"
#include "mpi_test.hpp"
#include "tp_block.hpp"
#include "workbook/autocast.hpp"
#include "workbook/errors.hpp"

namespace {

constexpr int64_t kWidth = 32, kHeads = 4;

}  // namespace

TEST_CASE("ex11.1 the split block computes the whole block's output and gradients", "[ex11.1][np4]") {
  auto comm = mpi_test::communicator();
  const int64_t t = comm->size(), r = comm->rank();
  torch::manual_seed(21);
  workbook::GptBlock whole(kWidth, kHeads);
  whole->to(torch::kFloat64);
  ch11::TensorParallelBlock split(*whole, *comm);
  const torch::Tensor x_whole = torch::randn({3, 5, kWidth}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor x = x_whole.detach().clone().requires_grad_(true);
  const torch::Tensor upstream = torch::randn({3, 5, kWidth}, torch::kFloat64);
  whole->forward(x_whole).backward(upstream);

  const int64_t reduces_before = comm->stats().count(workbook::CommOp::AllReduce);
  const torch::Tensor y = split->forward(x);
  const int64_t in_forward = comm->stats().count(workbook::CommOp::AllReduce) - reduces_before;
  y.backward(upstream);
  const int64_t in_backward = comm->stats().count(workbook::CommOp::AllReduce) - reduces_before - in_forward;

  const torch::Tensor y_whole = whole->forward(x_whole);
  INFO(t << " ranks: the output differs from the whole block's by " << (y - y_whole).abs().max().item<double>());
  REQUIRE(mpi_test::all_ranks(torch::allclose(y, y_whole, 1e-10, 1e-12)));
  INFO("x's gradient: the whole block's on every rank");
  REQUIRE(mpi_test::all_ranks(torch::allclose(x.grad(), x_whole.grad(), 1e-10, 1e-12)));
  INFO("two all-reduces in forward and two in backward, whatever the ranks: got " << in_forward << " and "
       << in_backward);
  REQUIRE(mpi_test::all_ranks(t == 1 || (in_forward == 2 && in_backward == 2)));

  const int64_t local = kWidth / t, hidden = 4 * kWidth / t;
  // qkv's rows in whatever order this rank keeps them (read from its weights).
  const auto qkv_rows = gpt_parts::rows_like(split->qkv->weight, whole->attention->qkv->weight);
  INFO("this rank's parameters' gradients differ from its parts of the whole block's");
  REQUIRE(mpi_test::all_ranks(
      torch::allclose(split->qkv->weight.grad(), qkv_rows(whole->attention->qkv->weight.grad())) &&
      torch::allclose(split->qkv->bias.grad(), qkv_rows(whole->attention->qkv->bias.grad())) &&
      torch::allclose(split->projection->weight.grad(),
                      whole->attention->projection->weight.grad().narrow(1, r * local, local)) &&
      torch::allclose(split->expand->weight.grad(), whole->expand->weight.grad().narrow(0, r * hidden, hidden)) &&
      torch::allclose(split->contract->weight.grad(), whole->contract->weight.grad().narrow(1, r * hidden, hidden)) &&
      torch::allclose(split->norm1->weight.grad(), whole->norm1->weight.grad())));
}

TEST_CASE("ex11.1 under bfloat16 autocast the LayerNorms keep float32: a stream far from zero keeps its output",
          "[ex11.1][np4]") {
  // Note: [LayerNorm in float32] A stream of 50 ± 0.1 in bfloat16 (8 bits of
  // mantissa: steps of 0.25 there) loses the whole of its variation, and a
  // LayerNorm of it is noise. On the CPU, autocast runs layer_norm in its
  // input's dtype, so the stream the LayerNorms see must stay float32.
  auto comm = mpi_test::communicator();
  torch::manual_seed(23);
  workbook::GptBlock whole(kWidth, kHeads);
  ch11::TensorParallelBlock split(*whole, *comm);
  const torch::Tensor x = 50 + 0.1 * torch::randn({3, 5, kWidth});
  torch::Tensor y;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor expected = whole->forward(x) - x;  // float32, no autocast: what the block adds
    {
      workbook::AutocastGuard bfloat16(torch::kCPU, torch::kBFloat16);
      y = split->forward(x);
    }
    const double error = ((y.to(torch::kFloat32) - x) - expected).abs().max().item<double>(),
                 size = expected.abs().max().item<double>();
    INFO("what the block adds to the stream differs from float32's by " << error << " (its largest is " << size
         << "): bfloat16's matrix products alone stay within 5%");
    REQUIRE(mpi_test::all_ranks(error < 0.05 * size));
  }
  INFO("the stream that leaves the block is float32 under autocast, as the one that entered");
  REQUIRE(mpi_test::all_ranks(y.scalar_type() == torch::kFloat32));
}

TEST_CASE("ex11.1 heads the tensor ranks do not divide are refused", "[ex11.1][np4]") {
  auto comm = mpi_test::communicator();
  if (comm->size() == 1) return;
  workbook::GptBlock whole(kWidth * 3, 3);
  REQUIRE_THROWS_AS(ch11::TensorParallelBlock(*whole, *comm), workbook::UserError);
}
