// Tests for ex11.2: the vocabulary-parallel cross-entropy against LibTorch's
// cross_entropy of the whole logits (computed on every rank, from the same
// seed, in float64), at 1, 2 and 4 tensor ranks.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "vocab_parallel.hpp"

namespace {

struct Case {
  torch::Tensor whole, targets;  // [rows, 256] float64, [rows] int64: the same on every rank
};

Case random_case(int64_t rows, double scale, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({rows, 256}, torch::kFloat64) * scale, torch::randint(0, 256, {rows}, torch::kInt64)};
}

// Backward starts from the loss times this, not from the loss itself: a
// backward that ignores the gradient it is handed (a stage that divides its
// loss by the micro-batches, say, hands it 1/m) would be refused.
constexpr double kIncoming = 0.375;

// The loss and this rank's columns' gradient, from the student's function on float32 shards.
std::pair<double, torch::Tensor> split_loss(workbook::Communicator& comm, const Case& c) {
  const int64_t columns = 256 / comm.size();
  torch::Tensor shard = c.whole.narrow(1, comm.rank() * columns, columns).to(torch::kFloat32).requires_grad_(true);
  const torch::Tensor loss = ch11::vocab_parallel_cross_entropy(shard, c.targets, comm);
  (loss * kIncoming).backward();
  return {loss.item<double>(), shard.grad().to(torch::kFloat64)};
}

std::pair<double, torch::Tensor> whole_loss(const Case& c, int64_t first, int64_t columns) {
  torch::Tensor whole = c.whole.clone().requires_grad_(true);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(whole, c.targets);
  (loss * kIncoming).backward();
  return {loss.item<double>(), whole.grad().narrow(1, first, columns)};
}

}  // namespace

TEST_CASE("ex11.2 the loss and this rank's gradient are the whole vocabulary's cross-entropy", "[ex11.2][np4]") {
  auto comm = mpi_test::communicator();
  const int64_t columns = 256 / comm->size();
  for (const auto& [rows, scale] : {std::pair<int64_t, double>{1, 1.0}, {37, 3.0}, {64, 0.1}}) {
    CAPTURE(comm->size(), rows, scale);
    const Case c = random_case(rows, scale, 11 + rows);
    const auto [loss, grad] = split_loss(*comm, c);
    const auto [expected, expected_grad] = whole_loss(c, comm->rank() * columns, columns);
    INFO("loss " << loss << ", the whole vocabulary's cross-entropy " << expected);
    REQUIRE(mpi_test::all_ranks(std::abs(loss - expected) < 1e-5 * std::max(1.0, expected)));
    INFO("this rank's columns of the gradient differ from the whole's by up to "
         << (grad - expected_grad).abs().max().item<double>());
    REQUIRE(mpi_test::all_ranks(torch::allclose(grad, expected_grad, 1e-5, 1e-7)));
  }
}

TEST_CASE("ex11.2 logits of 1e4 give the finite, exact loss", "[ex11.2][np4]") {
  auto comm = mpi_test::communicator();
  const int64_t columns = 256 / comm->size();
  // Each row's largest logit lies in a different rank's columns, 1e4 above the rest.
  Case c = random_case(8, 1.0, 5);
  for (int64_t row = 0; row < 8; ++row) c.whole[row][(row * 67) % 256] += 1e4;
  const auto [loss, grad] = split_loss(*comm, c);
  const auto [expected, expected_grad] = whole_loss(c, comm->rank() * columns, columns);
  INFO("loss " << loss << ", expected " << expected);
  REQUIRE(mpi_test::all_ranks(std::isfinite(loss) && std::abs(loss - expected) < 1e-2));
  REQUIRE(mpi_test::all_ranks(torch::allclose(grad, expected_grad, 1e-4, 1e-6)));
}

TEST_CASE("ex11.2 no rank receives the others' logits: a few numbers per row travel", "[ex11.2][np4]") {
  auto comm = mpi_test::communicator();
  const Case c = random_case(64, 1.0, 3);
  const workbook::CommStats before = comm->stats();
  split_loss(*comm, c);
  const workbook::CommStats after = comm->stats();
  int64_t elements = 0;
  for (size_t op = 0; op < after.elements.size(); ++op) elements += after.elements[op] - before.elements[op];
  INFO("forward and backward handed " << elements << " elements to the Communicator for 64 rows: more than 4 per row, "
       << "where the loss needs a few numbers per row and the logits are 256 per row");
  REQUIRE(mpi_test::all_ranks(elements <= 4 * 64));
}
