// Tests for ex8.8 and ex8.9: the tensor and data groups of every layout the
// ranks allow (their properties, and the groups recorded from the reference),
// and a hybrid step against one process on the global batch: a Linear, then
// the whole FashionCNN, each data group's samples a batch of their own for
// BatchNorm (float64, within 1e-9).
#include "catch2_compat.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include <fmt/ranges.h>

#include "hybrid.hpp"
#include "mpi_test.hpp"
#include "tp_oracles.hpp"

namespace {

// The world ranks of a group, gathered from its members (in the group's order).
std::vector<int64_t> members_of(workbook::Communicator& group, int world_rank) {
  const torch::Tensor all = group.all_gather(torch::tensor({int64_t{world_rank}}, torch::kInt64));
  return {all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + group.size()};
}

using Groups = std::vector<std::vector<int64_t>>;

// The groups make_hybrid_groups gives for every layout the tests run,
// recorded from the reference solution.
struct Recorded {
  int ranks, tensor_ranks;
  ch08::TensorGroups placement;
  Groups tensor, data;
};

const std::vector<Recorded>& recorded() {
  using ch08::TensorGroups;
  static const std::vector<Recorded> layouts = {
      {1, 1, TensorGroups::Consecutive, {{0}}, {{0}}},
      {1, 1, TensorGroups::Strided, {{0}}, {{0}}},
      {2, 1, TensorGroups::Consecutive, {{0}, {1}}, {{0, 1}}},
      {2, 1, TensorGroups::Strided, {{0}, {1}}, {{0, 1}}},
      {2, 2, TensorGroups::Consecutive, {{0, 1}}, {{0}, {1}}},
      {2, 2, TensorGroups::Strided, {{0, 1}}, {{0}, {1}}},
      {3, 1, TensorGroups::Consecutive, {{0}, {1}, {2}}, {{0, 1, 2}}},
      {3, 1, TensorGroups::Strided, {{0}, {1}, {2}}, {{0, 1, 2}}},
      {3, 3, TensorGroups::Consecutive, {{0, 1, 2}}, {{0}, {1}, {2}}},
      {3, 3, TensorGroups::Strided, {{0, 1, 2}}, {{0}, {1}, {2}}},
      {4, 1, TensorGroups::Consecutive, {{0}, {1}, {2}, {3}}, {{0, 1, 2, 3}}},
      {4, 1, TensorGroups::Strided, {{0}, {1}, {2}, {3}}, {{0, 1, 2, 3}}},
      {4, 2, TensorGroups::Consecutive, {{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}},
      {4, 2, TensorGroups::Strided, {{0, 2}, {1, 3}}, {{0, 1}, {2, 3}}},
      {4, 4, TensorGroups::Consecutive, {{0, 1, 2, 3}}, {{0}, {1}, {2}, {3}}},
      {4, 4, TensorGroups::Strided, {{0, 1, 2, 3}}, {{0}, {1}, {2}, {3}}},
  };
  return layouts;
}

const Recorded& recorded_for(int ranks, int tensor_ranks, ch08::TensorGroups placement) {
  for (const Recorded& layout : recorded())
    if (layout.ranks == ranks && layout.tensor_ranks == tensor_ranks && layout.placement == placement) return layout;
  FAIL("no recorded layout for " << ranks << " ranks, " << tensor_ranks << " tensor ranks");
  std::abort();
}

// The index of the group that holds `rank`.
int group_of(const Groups& groups, int rank) {
  for (size_t i = 0; i < groups.size(); ++i)
    if (std::find(groups[i].begin(), groups[i].end(), rank) != groups[i].end()) return static_cast<int>(i);
  return -1;
}

// ex8.9's groups, made from the recorded lists (not by ex8.8's code).
ch08::HybridGroups recorded_groups(workbook::Communicator& world, int t, ch08::TensorGroups placement) {
  const Recorded& layout = recorded_for(world.size(), t, placement);
  ch08::HybridGroups groups;
  groups.tensor = world.split(group_of(layout.tensor, world.rank()), 0, "tensor group");
  groups.data = world.split(group_of(layout.data, world.rank()), 0, "data group");
  return groups;
}

std::string describe(const std::vector<int64_t>& ranks) { return fmt::format("{{{}}}", fmt::join(ranks, ", ")); }

// Whether every rank's group (each of `size` members, containing the rank)
// is either the same as or disjoint from every other rank's: a partition.
bool partitions_the_world(workbook::Communicator& world, const std::vector<int64_t>& group) {
  const int64_t size = static_cast<int64_t>(group.size());
  const torch::Tensor all = world.all_gather(torch::tensor(group, torch::kInt64));  // [n, size]
  for (int r = 0; r < world.size(); ++r)
    for (int s = 0; s < world.size(); ++s) {
      const torch::Tensor a = all[r], b = all[s];
      const bool same = torch::equal(a, b);
      const bool disjoint = !torch::isin(a, b).any().item<bool>();
      if (!same && !disjoint) return false;
    }
  return size > 0;
}

}  // namespace

TEST_CASE("ex8.8 make_hybrid_groups: the groups of every layout, and their properties", "[ex8.8][np3][np4]") {
  auto world = mpi_test::communicator();
  const int n = world->size(), rank = world->rank();
  for (int t = 1; t <= n; ++t) {
    if (n % t != 0) continue;
    const int d = n / t;
    for (const auto placement : {ch08::TensorGroups::Consecutive, ch08::TensorGroups::Strided}) {
      const bool consecutive = placement == ch08::TensorGroups::Consecutive;
      CAPTURE(n, t, consecutive);
      ch08::HybridGroups groups = ch08::make_hybrid_groups(*world, t, placement);
      REQUIRE(mpi_test::all_ranks(groups.tensor && groups.data));
      const std::vector<int64_t> tensor = members_of(*groups.tensor, rank), data = members_of(*groups.data, rank);
      INFO("rank " << rank << ": tensor group " << describe(tensor) << ", data group " << describe(data)
                   << " (each listed in the group's own order)");
      INFO("a tensor group must have " << t << " ranks and a data group " << d);
      REQUIRE(mpi_test::all_ranks(tensor.size() == static_cast<size_t>(t) && data.size() == static_cast<size_t>(d)));
      INFO("a group's ranks must be numbered in the world's order");
      REQUIRE(mpi_test::all_ranks(std::is_sorted(tensor.begin(), tensor.end()) &&
                                  std::is_sorted(data.begin(), data.end())));
      INFO("the tensor group and the data group of a rank must meet in that rank and nowhere else");
      std::vector<int64_t> both;
      std::set_intersection(tensor.begin(), tensor.end(), data.begin(), data.end(), std::back_inserter(both));
      REQUIRE(mpi_test::all_ranks(both == std::vector<int64_t>{rank}));
      INFO("the tensor groups (or the data groups) must split the world: two ranks' groups are the same or disjoint");
      const bool tensor_partition = partitions_the_world(*world, tensor);
      const bool data_partition = partitions_the_world(*world, data);
      REQUIRE(mpi_test::all_ranks(tensor_partition && data_partition));
      INFO("the ranks of a data group must hold the same part of the model: the same place in their tensor groups");
      const torch::Tensor places = groups.data->all_gather(torch::tensor({int64_t{groups.tensor->rank()}}, torch::kInt64));
      REQUIRE(mpi_test::all_ranks((places == groups.tensor->rank()).all().item<bool>()));
      if (consecutive) {
        INFO("consecutive placement: a tensor group must be a run of consecutive ranks (a node, with T ranks per node)");
        REQUIRE(mpi_test::all_ranks(tensor.back() - tensor.front() == t - 1));
      } else {
        INFO("strided placement: a data group must be a run of consecutive ranks (a node, with D ranks per node)");
        REQUIRE(mpi_test::all_ranks(data.back() - data.front() == d - 1));
      }
      const Recorded& layout = recorded_for(n, t, placement);
      const std::vector<int64_t>& tensor_recorded = layout.tensor.at(static_cast<size_t>(group_of(layout.tensor, rank)));
      const std::vector<int64_t>& data_recorded = layout.data.at(static_cast<size_t>(group_of(layout.data, rank)));
      INFO("recorded from the reference solution: tensor group " << describe(tensor_recorded) << ", data group "
                                                                 << describe(data_recorded));
      REQUIRE(mpi_test::all_ranks(tensor == tensor_recorded && data == data_recorded));
    }
  }
}

TEST_CASE("ex8.9 a hybrid step trains what one process trains on the global batch", "[ex8.9][np3][np4]") {
  // A Linear (float64) on each rank. The ranks of a tensor group see the same
  // samples but hold different parameters (here each tensor-group place starts
  // its own Linear, standing in for the parts of a split model); the data
  // groups see different samples. After each step every rank's Linear must be
  // what one process, starting from the same parameters, trains on all the
  // data groups' samples (the mean loss over the global batch).
  auto world = mpi_test::communicator();
  const int n = world->size();
  for (int t = 1; t <= n; ++t) {
    if (n % t != 0) continue;
    for (const auto placement : {ch08::TensorGroups::Consecutive, ch08::TensorGroups::Strided}) {
      CAPTURE(n, t, placement == ch08::TensorGroups::Consecutive);
      ch08::HybridGroups groups = recorded_groups(*world, t, placement);
      const int d = groups.data->size(), data_rank = groups.data->rank();
      torch::manual_seed(21 + static_cast<uint64_t>(groups.tensor->rank()));
      torch::nn::Linear whole(5, 3), mine(5, 3);
      whole->to(torch::kFloat64);
      mine->to(torch::kFloat64);
      workbook::copy_state(*whole, *mine);
      torch::optim::SGD whole_sgd(whole->parameters(), torch::optim::SGDOptions(0.1));
      torch::optim::SGD sgd(mine->parameters(), torch::optim::SGDOptions(0.1));
      for (int64_t step = 0; step < 2; ++step) {
        torch::manual_seed(400 + static_cast<uint64_t>(step));
        const torch::Tensor inputs = torch::randn({2 * d, 5}, torch::kFloat64);
        const torch::Tensor labels = torch::arange(2 * d, torch::kInt64) % 3;
        whole_sgd.zero_grad();
        torch::nn::functional::cross_entropy(whole(inputs), labels).backward();
        whole_sgd.step();
        torch::Tensor given;
        const torch::Tensor loss = ch08::hybrid_train_step(*mine, sgd, [&] {
          given = torch::nn::functional::cross_entropy(mine(inputs.narrow(0, 2 * data_rank, 2)),
                                                       labels.narrow(0, 2 * data_rank, 2));
          return given;
        }, groups);
        INFO("the step returned something other than the value loss() gave");
        REQUIRE(mpi_test::all_ranks(loss.defined() && given.defined() && loss.dim() == 0 &&
                                    torch::equal(loss.detach(), given.detach())));
        const double difference = std::max(tp_oracle::max_difference(mine->weight, whole->weight),
                                           tp_oracle::max_difference(mine->bias, whole->bias));
        INFO("after step " << step << ", this rank's parameters differ from one process's on the global batch by "
                           << difference);
        REQUIRE(mpi_test::all_ranks(difference < 1e-12));
      }
    }
  }
}

TEST_CASE("hybrid: tensor groups and data groups together train the whole FashionCNN on the global batch", "[np3][np4]") {
  // Untagged: ex8.1 to ex8.4, ex8.8 and ex8.9 together.
  auto world = mpi_test::communicator();
  const int n = world->size();
  for (int t = 1; t <= n; ++t) {
    if (n % t != 0 || (t == 1 && n > 2)) continue;  // t = 1 is Chapter 3's DDP: once is enough
    for (const auto placement : {ch08::TensorGroups::Consecutive, ch08::TensorGroups::Strided}) {
      CAPTURE(n, t, placement == ch08::TensorGroups::Consecutive);
      ch08::HybridGroups groups = ch08::make_hybrid_groups(*world, t, placement);
      const int d = groups.data->size(), data_rank = groups.data->rank();
      torch::manual_seed(11);
      auto whole = std::make_shared<workbook::FashionCNN>();
      whole->to(torch::kFloat64);
      whole->dropout->options.p(0.0);
      ch08::TensorParallelFashionCNN model(*whole, *groups.tensor, /*dropout_p=*/0.0);
      torch::optim::SGD whole_sgd(whole->parameters(), torch::optim::SGDOptions(0.05));
      torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.05));
      const int64_t global = 4 * d;
      for (int64_t step = 0; step < 2; ++step) {
        torch::manual_seed(300 + static_cast<uint64_t>(step));
        const torch::Tensor images = torch::rand({global, 1, 28, 28}, torch::kFloat64);
        const torch::Tensor labels = torch::arange(global, torch::kInt64).add(step) % 10;
        // BatchNorm normalizes each data group's 4 samples by their own
        // statistics (Chapter 5): the whole model sees the same batches, one
        // after the other, their losses averaged by accumulating gradients.
        whole_sgd.zero_grad();
        for (int g = 0; g < d; ++g)
          (torch::nn::functional::cross_entropy(whole->forward(images.narrow(0, 4 * g, 4)), labels.narrow(0, 4 * g, 4)) /
           static_cast<double>(d)).backward();
        whole_sgd.step();
        const int64_t data_before = groups.data->stats().count(workbook::CommOp::AllReduce);
        const int64_t tensor_before = groups.tensor->stats().count(workbook::CommOp::AllReduce);
        const torch::Tensor my_images = images.narrow(0, 4 * data_rank, 4), my_labels = labels.narrow(0, 4 * data_rank, 4);
        ch08::hybrid_train_step(model, sgd, [&] {
          return torch::nn::functional::cross_entropy(model.forward(my_images), my_labels);
        }, groups);
        const int64_t data_all_reduces = groups.data->stats().count(workbook::CommOp::AllReduce) - data_before;
        const int64_t tensor_all_reduces = groups.tensor->stats().count(workbook::CommOp::AllReduce) - tensor_before;
        INFO("this data group's 4 samples of the global " << global << ": the step made " << data_all_reduces
             << " all-reduce(s) in the data group and " << tensor_all_reduces << " in the tensor group, where the "
             "README's cost of a hybrid step counts 1 and 2");
        REQUIRE(mpi_test::all_ranks(data_all_reduces == 1 && tensor_all_reduces == 2));
        const int tr = groups.tensor->rank();
        const double difference = std::max(
            {tp_oracle::max_difference(model.fc1->weight, tp_oracle::rows_of(whole->fc1->weight, tr, t)),
             tp_oracle::max_difference(model.fc2->weight, tp_oracle::columns_of(whole->fc2->weight, tr, t)),
             tp_oracle::max_difference(model.fc2->bias, whole->fc2->bias),
             tp_oracle::max_difference(model.conv1->weight, whole->conv1->weight),
             tp_oracle::max_difference(model.fc3->weight, whole->fc3->weight)});
        INFO("after step " << step << ", the weights differ from the whole model's by " << difference);
        REQUIRE(mpi_test::all_ranks(difference < 1e-9));
      }
    }
  }
}
