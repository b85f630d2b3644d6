// Tests for ex5.4: convert_sync_batchnorm replaces every BatchNorm2d and keeps
// its tensors; a converted FashionCNN then computes what one FashionCNN
// computes on the global batch.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "oracles.hpp"
#include "sync_bn.hpp"
#include "sync_bn_data.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"

namespace {

// A block with a BatchNorm2d one level down, called through the registry as
// FashionCNN calls its own.
struct InnerImpl : torch::nn::Module {
  InnerImpl() { register_module("bn", torch::nn::BatchNorm2d(3)); }
};
struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    register_module("inner", std::make_shared<InnerImpl>());
    register_module("norm", torch::nn::BatchNorm2d(2));
  }
};

}  // namespace

TEST_CASE("ex5.4 convert_sync_batchnorm replaces FashionCNN's two BatchNorm2d and keeps their tensors", "[ex5.4]") {
  auto comm = mpi_test::communicator();
  torch::manual_seed(81);
  auto model = std::make_shared<workbook::FashionCNN>();
  {
    torch::NoGradGuard no_grad;
    for (auto& b : model->named_buffers())
      if (b.value().is_floating_point()) b.value().uniform_(0.5, 1.5);  // running statistics worth keeping
  }
  model->eval();
  const auto parameters_before = model->named_parameters();
  const auto buffers_before = model->named_buffers();
  const int replaced = ch05::convert_sync_batchnorm(*model, *comm);
  REQUIRE(replaced == 2);
  for (const char* name : {"bn1", "bn2"}) {
    CAPTURE(name);
    auto layer = model->named_children()[name];
    INFO("the child must now be a ch05::SyncBatchNorm2dImpl, registered under the same name");
    REQUIRE(layer->as<ch05::SyncBatchNorm2dImpl>() != nullptr);
    INFO("in the model's mode (eval here)");
    REQUIRE_FALSE(layer->is_training());
  }
  const auto parameters_after = model->named_parameters();
  const auto buffers_after = model->named_buffers();
  REQUIRE(parameters_after.keys() == parameters_before.keys());
  REQUIRE(buffers_after.keys() == buffers_before.keys());
  for (const auto& p : parameters_before) {
    CAPTURE(p.key());
    INFO("the same tensor, not a copy: an optimizer built before the conversion must still update it");
    REQUIRE(parameters_after[p.key()].is_same(p.value()));
    REQUIRE(parameters_after[p.key()].requires_grad());
  }
  for (const auto& b : buffers_before) {
    CAPTURE(b.key());
    REQUIRE(buffers_after[b.key()].is_same(b.value()));
  }
}

TEST_CASE("ex5.4 convert_sync_batchnorm finds BatchNorm2d at any depth", "[ex5.4]") {
  auto comm = mpi_test::communicator();
  auto block = std::make_shared<BlockImpl>();
  REQUIRE(ch05::convert_sync_batchnorm(*block, *comm) == 2);
  REQUIRE(block->named_children()["norm"]->as<ch05::SyncBatchNorm2dImpl>() != nullptr);
  REQUIRE(block->named_children()["inner"]->named_children()["bn"]->as<ch05::SyncBatchNorm2dImpl>() != nullptr);
  REQUIRE(ch05::convert_sync_batchnorm(*block, *comm) == 0);  // nothing left to convert
}

TEST_CASE("ex5.4 convert_sync_batchnorm refuses what it cannot convert, and changes nothing", "[ex5.4]") {
  auto comm = mpi_test::communicator();
  // A Sequential calls its own list of layers: a replaced child would never run.
  struct ModelImpl : torch::nn::Module {
    ModelImpl() {
      register_module("first", torch::nn::BatchNorm2d(2));
      register_module("layers", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 1)),
                                                      torch::nn::BatchNorm2d(3)));
    }
  };
  auto model = std::make_shared<ModelImpl>();
  INFO("a BatchNorm2d inside a Sequential must be a workbook::UserError (WB_CHECK) naming it");
  REQUIRE_THROWS_AS(ch05::convert_sync_batchnorm(*model, *comm), workbook::UserError);
  INFO("checked before anything is replaced: the model must be left as it was");
  REQUIRE(model->named_children()["first"]->as<torch::nn::BatchNorm2d>() != nullptr);
  // Without weights there is nothing to take over.
  struct PlainImpl : torch::nn::Module {
    PlainImpl() { register_module("bn", torch::nn::BatchNorm2d(torch::nn::BatchNormOptions(2).affine(false))); }
  };
  auto plain = std::make_shared<PlainImpl>();
  REQUIRE_THROWS_AS(ch05::convert_sync_batchnorm(*plain, *comm), workbook::UserError);
}

TEST_CASE("ex5.4 a converted FashionCNN's gradients equal one FashionCNN's on the global batch", "[ex5.4][np3]") {
  // This test runs the converted model: it needs ex5.1-ex5.3 as well.
  auto comm = mpi_test::communicator();
  const int rank = comm->rank(), n = comm->size();
  const std::vector<int64_t> counts = n == 2 ? std::vector<int64_t>{3, 1} : std::vector<int64_t>{3, 1, 2};
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0});
  torch::manual_seed(82);
  auto single = std::make_shared<workbook::FashionCNN>();
  single->dropout->options.p(0.0);  // dropout's masks would differ between the split and the whole batch
  auto converted = std::dynamic_pointer_cast<workbook::FashionCNN>(oracle::copy_of(*single));
  converted->dropout->options.p(0.0);
  REQUIRE(ch05::convert_sync_batchnorm(*converted, *comm) == 2);
  const torch::Tensor images = torch::rand({total, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {total});
  namespace F = torch::nn::functional;
  const auto sum = F::CrossEntropyFuncOptions().reduction(torch::kSum);

  // The loss summed over every rank's samples: one model on the whole batch,
  // or each rank on its part, the parameter gradients then summed over ranks.
  single->zero_grad();
  F::cross_entropy(single->forward(images), labels, sum).backward();
  converted->zero_grad();
  F::cross_entropy(converted->forward(images.narrow(0, offset, counts[rank])), labels.narrow(0, offset, counts[rank]),
                   sum)
      .backward();
  auto expected = single->named_parameters();
  double largest = 0.0;
  for (const auto& p : expected) largest = std::max(largest, p.value().grad().abs().max().item<double>());
  for (const auto& p : converted->named_parameters()) {
    torch::Tensor grad = p.value().grad().clone();
    comm->all_reduce(grad, workbook::ReduceOp::Sum);
    CAPTURE(p.key());
    // A convolution's bias followed by BatchNorm is subtracted out again with
    // the mean: its gradient is zero in exact arithmetic, and what remains is
    // rounding. It is compared on the scale of the largest gradient instead.
    if (expected[p.key()].grad().abs().max().item<double>() < 1e-4 * largest) {
      REQUIRE(mpi_test::all_ranks(grad.abs().max().item<double>() < 1e-4 * largest));
      continue;
    }
    INFO("gradient summed over ranks vs one FashionCNN on the global batch (relative error <= 1e-4: a deep net in float32)");
    REQUIRE(mpi_test::all_ranks(sync_bn_data::relative_error(grad, expected[p.key()].grad()) <= 1e-4));
  }
  INFO("running statistics: the global batch's, on every rank");
  for (const auto& b : converted->named_buffers())
    REQUIRE(mpi_test::all_ranks(sync_bn_data::relative_error(b.value(), single->named_buffers()[b.key()]) <= 1e-5));
}
