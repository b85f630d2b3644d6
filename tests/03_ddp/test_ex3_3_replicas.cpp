// Tests for ex3.3: replicas_disagree names the tensors that differ between
// ranks, bit for bit, the same list on every rank, without sending them.
#include "catch2_compat.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

using Names = std::vector<std::string>;

// Parameters of several shapes (one layer frozen) and a BatchNorm's buffers
// (float statistics and an int64 step count), built alike on every rank.
struct Replica : torch::nn::Module {
  Replica() {
    torch::manual_seed(3);
    a = register_module("a", torch::nn::Linear(6, 4));
    frozen = register_module("frozen", torch::nn::Linear(4, 4));
    bn = register_module("bn", torch::nn::BatchNorm1d(4));
    b = register_module("b", torch::nn::Linear(4, 2));
    for (auto& p : frozen->parameters()) p.set_requires_grad(false);
    torch::NoGradGuard no_grad;
    bn->running_mean.copy_(torch::arange(4, torch::kFloat32) * 0.25);
    bn->num_batches_tracked.fill_(7);
  }
  torch::nn::Linear a{nullptr}, frozen{nullptr}, b{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

std::string joined(const Names& names) {
  std::ostringstream out;
  out << "{";
  for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << '"' << names[i] << '"';
  out << "}";
  return out.str();
}

// Every rank must return `expected`, in that order.
void check_returns(torch::nn::Module& model, workbook::Communicator& comm, const Names& expected) {
  const Names got = ch03::replicas_disagree(model, comm);
  INFO("rank " << comm.rank() << " of " << comm.size() << ": replicas_disagree returned " << joined(got)
               << ", expected " << joined(expected));
  REQUIRE(mpi_test::all_ranks(got == expected));
}

bool last_rank(const workbook::Communicator& comm) { return comm.rank() == comm.size() - 1; }

}  // namespace

TEST_CASE("ex3.3 replicas that agree give an empty list on every rank", "[ex3.3][np3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  check_returns(model, *comm, {});
}

TEST_CASE("ex3.3 a parameter that differs on one rank is named on every rank", "[ex3.3][np3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  torch::NoGradGuard no_grad;
  if (last_rank(*comm)) model.a->weight[1][2].add_(1.0);
  check_returns(model, *comm, {"a.weight"});
}

TEST_CASE("ex3.3 a frozen parameter that differs on rank 0 is named on every rank", "[ex3.3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  torch::NoGradGuard no_grad;
  if (comm->rank() == 0) model.frozen->bias[0].add_(0.5);
  check_returns(model, *comm, {"frozen.bias"});
}

TEST_CASE("ex3.3 buffers that differ are named: running statistics and the step count", "[ex3.3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  if (last_rank(*comm)) {
    model.bn->running_var[0].add_(0.5);
    model.bn->num_batches_tracked.add_(1);
  }
  check_returns(model, *comm, {"bn.running_var", "bn.num_batches_tracked"});
}

TEST_CASE("ex3.3 several differences on several ranks: parameters first, then buffers, in the model's order",
          "[ex3.3][np3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  torch::NoGradGuard no_grad;
  if (comm->rank() == 0) model.b->bias[1].mul_(2.0);
  if (last_rank(*comm)) {
    model.bn->running_mean[3].add_(1.0);
    model.a->bias[0].add_(1.0);
  }
  check_returns(model, *comm, {"a.bias", "b.bias", "bn.running_mean"});
}

TEST_CASE("ex3.3 two elements swapped on one rank: the same values, not the same tensor", "[ex3.3][np3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  torch::NoGradGuard no_grad;
  // Small integers: any sum of them, in any order, is exact.
  model.a->weight.copy_(torch::arange(24, torch::kFloat32).view({4, 6}));
  if (last_rank(*comm)) {
    model.a->weight[0][1].fill_(23.0);
    model.a->weight[3][5].fill_(1.0);
  }
  check_returns(model, *comm, {"a.weight"});
}

TEST_CASE("ex3.3 bit for bit: -0.0 is not 0.0, one ulp is a difference, a NaN agrees with itself", "[ex3.3]") {
  auto comm = mpi_test::communicator();
  Replica model;
  torch::NoGradGuard no_grad;
  model.b->bias.fill_(0.0);
  model.frozen->weight[2][2].fill_(std::numeric_limits<float>::quiet_NaN());  // on every rank: they agree
  const float x = model.a->bias[2].item<float>();
  if (last_rank(*comm)) {
    model.b->bias[0].fill_(-0.0);
    model.a->bias[2].fill_(std::nextafter(x, 2.0f * std::abs(x) + 1.0f));
  }
  check_returns(model, *comm, {"a.bias", "b.bias"});
}

TEST_CASE("ex3.3 a model without tensors: nothing to disagree on", "[ex3.3]") {
  auto comm = mpi_test::communicator();
  torch::nn::Module empty;
  check_returns(empty, *comm, {});
}

TEST_CASE("ex3.3 what it sends: a few numbers a tensor, in a fixed number of calls", "[ex3.3][np3]") {
  auto comm = mpi_test::communicator();
  // 41 tensors: a million-element weight and forty small ones.
  torch::manual_seed(5);
  torch::nn::Module model;
  model.register_parameter("big", torch::randn({1024, 1024}));
  for (int i = 0; i < 20; ++i) model.register_module("small" + std::to_string(i), torch::nn::Linear(2, 2));
  const int64_t tensors = static_cast<int64_t>(model.parameters().size());
  check_returns(model, *comm, {});
  int64_t calls = 0, elements = 0;
  for (int op = 0; op < workbook::kCommOpCount; ++op) {
    calls += comm->stats().calls[static_cast<size_t>(op)];
    elements += comm->stats().elements[static_cast<size_t>(op)];
  }
  INFO("rank " << comm->rank() << ": replicas_disagree made " << calls << " Communicator calls handing them "
               << elements << " elements, for " << tensors << " tensors (one of 1,048,576 elements)");
  // The check itself (all_ranks) uses MPI directly, not this Communicator.
  REQUIRE(mpi_test::all_ranks(calls <= 8));
  REQUIRE(mpi_test::all_ranks(elements <= 8 * tensors + 16));
}
