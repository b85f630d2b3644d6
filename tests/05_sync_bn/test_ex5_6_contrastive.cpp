// Tests for ex5.6: the gather-distributed NT-Xent loss and its gradients equal
// the single-process loss on the global batch of real Fashion-MNIST views.
#include "catch2_compat.hpp"

#include "gather.hpp"
#include "mpi_test.hpp"
#include "sync_bn_data.hpp"
#include "workbook/fashion_mnist.hpp"

namespace {

namespace F = torch::nn::functional;

// The oracle, written out for one process: 2N embeddings, every pair's
// similarity, the diagonal excluded, the other view as the class.
torch::Tensor single_process_nt_xent(const torch::Tensor& z1, const torch::Tensor& z2, double temperature) {
  const int64_t count = z1.size(0);
  const torch::Tensor z = F::normalize(torch::cat({z1, z2}), F::NormalizeFuncOptions().dim(1));
  const torch::Tensor self = torch::eye(2 * count, torch::kBool);
  const torch::Tensor logits = z.matmul(z.t()).div(temperature).masked_fill(self, -INFINITY);
  const torch::Tensor targets = torch::cat({torch::arange(count, 2 * count), torch::arange(0, count)});
  return F::cross_entropy(logits, targets);
}

// The first `count` training images of Fashion-MNIST, the same on every rank.
torch::Tensor fashion_images(int64_t count) {
  workbook::LoadOptions options;
  options.train_samples = 64;
  static const workbook::FashionMnist data =
      workbook::load_fashion_mnist(workbook::find_fashion_mnist(std::nullopt), options);
  return data.train.images.narrow(0, 0, count);
}

}  // namespace

TEST_CASE("ex5.6 nt_xent_loss over ranks equals the single-process loss and gradients", "[ex5.6][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  const int64_t per_rank = 6, global = per_rank * n;
  const auto [view1, view2] = ch05::two_views(fashion_images(global), 91);
  torch::manual_seed(92);
  ch05::Encoder single, distributed;
  {
    torch::NoGradGuard copying;
    for (auto& p : distributed->named_parameters()) p.value().copy_(single->named_parameters()[p.key()]);
  }
  for (double temperature : {0.5, 0.1}) {
    CAPTURE(temperature);
    const torch::Tensor expected_loss = single_process_nt_xent(single->forward(view1), single->forward(view2), temperature);
    const auto expected = torch::autograd::grad({expected_loss}, single->parameters());

    const torch::Tensor z1 = distributed->forward(view1.narrow(0, rank * per_rank, per_rank));
    const torch::Tensor z2 = distributed->forward(view2.narrow(0, rank * per_rank, per_rank));
    const torch::Tensor loss = ch05::nt_xent_loss(z1, z2, temperature, *comm);
    const auto grads = torch::autograd::grad({loss}, distributed->parameters());
    // What DDP does with each rank's loss and gradients: the mean over ranks.
    torch::Tensor mean_loss = loss.detach().clone().view({1});
    comm->all_reduce(mean_loss, workbook::ReduceOp::Average);
    INFO("the mean over ranks of each rank's loss (the mean over its 2B anchors) is the global batch's loss");
    REQUIRE(mpi_test::all_ranks(sync_bn_data::relative_error(mean_loss[0], expected_loss.detach()) <= 1e-5));
    for (size_t i = 0; i < grads.size(); ++i) {
      torch::Tensor averaged = grads[i].clone();
      comm->all_reduce(averaged, workbook::ReduceOp::Average);
      CAPTURE(i);
      INFO("gradients averaged over ranks equal the single-process gradients on the global batch (relative "
           "error <= 1e-5): negatives from every rank, positives at their global index");
      REQUIRE(mpi_test::all_ranks(sync_bn_data::relative_error(averaged, expected[i]) <= 1e-5));
    }
  }
}
