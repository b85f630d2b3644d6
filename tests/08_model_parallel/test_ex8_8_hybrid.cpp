// Tests for ex8.8 and ex8.9: the tensor and data groups of every layout the
// ranks allow, and a hybrid step against the whole FashionCNN in one process
// on the global batch, each data group's samples a batch of their own for
// BatchNorm (float64, within 1e-9).
#include "catch2_compat.hpp"

#include <fmt/ranges.h>

#include "hybrid.hpp"
#include "mpi_test.hpp"
#include "tp_oracles.hpp"

namespace {

// The world ranks of a group, gathered from its members.
std::vector<int64_t> members_of(workbook::Communicator& group, int world_rank) {
  const torch::Tensor all = group.all_gather(torch::tensor({int64_t{world_rank}}, torch::kInt64));
  return {all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + group.size()};
}

std::vector<int64_t> expected_tensor_group(int rank, int n, int t, ch08::TensorGroups placement) {
  const int d = n / t;
  std::vector<int64_t> members;
  for (int r = 0; r < n; ++r) {
    const bool same = placement == ch08::TensorGroups::Consecutive ? r / t == rank / t : r % d == rank % d;
    if (same) members.push_back(r);
  }
  return members;
}

std::vector<int64_t> expected_data_group(int rank, int n, int t, ch08::TensorGroups placement) {
  const int d = n / t;
  std::vector<int64_t> members;
  for (int r = 0; r < n; ++r) {
    const bool same = placement == ch08::TensorGroups::Consecutive ? r % t == rank % t : r / d == rank / d;
    if (same) members.push_back(r);
  }
  return members;
}

// The groups as the tests' own splits make them (not ex8.8's code), for ex8.9's test.
ch08::HybridGroups groups_for(workbook::Communicator& world, int t, ch08::TensorGroups placement) {
  const int rank = world.rank();
  const std::vector<int64_t> tensor = expected_tensor_group(rank, world.size(), t, placement);
  const std::vector<int64_t> data = expected_data_group(rank, world.size(), t, placement);
  ch08::HybridGroups groups;
  groups.tensor = world.split(static_cast<int>(tensor.front()), rank, "tensor group");  // its lowest rank names it
  groups.data = world.split(static_cast<int>(data.front()), rank, "data group");
  return groups;
}

std::string describe(const std::vector<int64_t>& ranks) { return fmt::format("{{{}}}", fmt::join(ranks, ", ")); }

}  // namespace

TEST_CASE("ex8.8 make_hybrid_groups: tensor groups consecutive or strided, data groups across them", "[ex8.8][np3][np4]") {
  auto world = mpi_test::communicator();
  const int n = world->size(), rank = world->rank();
  for (int t = 1; t <= n; ++t) {
    if (n % t != 0) continue;
    for (const auto placement : {ch08::TensorGroups::Consecutive, ch08::TensorGroups::Strided}) {
      const bool consecutive = placement == ch08::TensorGroups::Consecutive;
      CAPTURE(n, t, consecutive);
      ch08::HybridGroups groups = ch08::make_hybrid_groups(*world, t, placement);
      REQUIRE(mpi_test::all_ranks(groups.tensor && groups.data));
      const std::vector<int64_t> tensor = members_of(*groups.tensor, rank), data = members_of(*groups.data, rank);
      INFO("rank " << rank << ": tensor group " << describe(tensor) << ", expected "
                   << describe(expected_tensor_group(rank, n, t, placement)) << "; data group " << describe(data)
                   << ", expected " << describe(expected_data_group(rank, n, t, placement))
                   << " (each in the world's order)");
      REQUIRE(mpi_test::all_ranks(tensor == expected_tensor_group(rank, n, t, placement) &&
                                  data == expected_data_group(rank, n, t, placement)));
    }
  }
}

TEST_CASE("ex8.9 a hybrid step averages the gradients over the data group, and only over it", "[ex8.9][np3][np4]") {
  // A replicated Linear (float64): the ranks of a tensor group see the same
  // samples, the data groups different ones; the step must train what one
  // process trains on all of them (the mean loss over the global batch).
  auto world = mpi_test::communicator();
  const int n = world->size();
  for (int t = 1; t <= n; ++t) {
    if (n % t != 0) continue;
    for (const auto placement : {ch08::TensorGroups::Consecutive, ch08::TensorGroups::Strided}) {
      CAPTURE(n, t, placement == ch08::TensorGroups::Consecutive);
      ch08::HybridGroups groups = groups_for(*world, t, placement);
      const int d = groups.data->size(), data_rank = groups.data->rank();
      torch::manual_seed(21);
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
        const int64_t data_before = groups.data->stats().count(workbook::CommOp::AllReduce);
        const int64_t tensor_before = groups.tensor->stats().count(workbook::CommOp::AllReduce);
        const torch::Tensor loss = ch08::hybrid_train_step(*mine, sgd, [&] {
          return torch::nn::functional::cross_entropy(mine(inputs.narrow(0, 2 * data_rank, 2)),
                                                      labels.narrow(0, 2 * data_rank, 2));
        }, groups);
        INFO("the step returns the loss of this rank's samples, averages over the data group (one all-reduce) and "
             "never over the tensor group, whose ranks hold different parts of a split model");
        REQUIRE(mpi_test::all_ranks(loss.defined() && loss.dim() == 0 &&
                                    groups.data->stats().count(workbook::CommOp::AllReduce) - data_before == 1 &&
                                    groups.tensor->stats().count(workbook::CommOp::AllReduce) == tensor_before));
        const double difference = std::max(tp_oracle::max_difference(mine->weight, whole->weight),
                                           tp_oracle::max_difference(mine->bias, whole->bias));
        INFO("after step " << step << ", the weights differ from one process's on the global batch by " << difference
             << " (the data groups hold different samples; a tensor group's ranks the same ones)");
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
        INFO("this data group's 4 samples of the global " << global << "; gradients averaged over the data group "
             "(one all-reduce), the tensor group's two all-reduces inside forward and backward");
        REQUIRE(mpi_test::all_ranks(groups.data->stats().count(workbook::CommOp::AllReduce) - data_before == 1 &&
                                    groups.tensor->stats().count(workbook::CommOp::AllReduce) - tensor_before == 2));
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
