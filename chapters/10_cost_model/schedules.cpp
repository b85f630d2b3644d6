// schedules.cpp — ex10.3: collectives as programs of messages.
#include "schedules.hpp"

#include "ring.hpp"
#include "workbook/errors.hpp"

namespace ch10 {
namespace {

bool is_power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }

void check_arguments(const torch::Tensor& buffer, int root, const workbook::Communicator& comm, const char* who) {
  WB_CHECK(buffer.dim() == 1 && buffer.is_contiguous(), "{}: a flat, contiguous buffer, not one of shape {}", who,
           fmt::format("{}", buffer.sizes()));
  WB_CHECK(buffer.scalar_type() == torch::kFloat32 || buffer.scalar_type() == torch::kFloat64,
           "{}: float32 or float64, not {}", who, c10::toString(buffer.scalar_type()));
  WB_CHECK(root >= 0 && root < comm.size(), "{}: root {} of {} ranks", who, root, comm.size());
}


}  // namespace

void recursive_doubling_all_reduce(torch::Tensor& buffer, workbook::Communicator& comm) {
  check_arguments(buffer, 0, comm, "recursive_doubling_all_reduce");
  WB_CHECK(is_power_of_two(comm.size()), "recursive_doubling_all_reduce needs a power of two ranks, not {}",
           comm.size());
  WB_NOT_IMPLEMENTED("ex10.3");  // TODO(ex10.3): your code here
}

void rabenseifner_all_reduce(torch::Tensor& buffer, workbook::Communicator& comm) {
  check_arguments(buffer, 0, comm, "rabenseifner_all_reduce");
  WB_CHECK(is_power_of_two(comm.size()), "rabenseifner_all_reduce needs a power of two ranks, not {}", comm.size());
  WB_NOT_IMPLEMENTED("ex10.3");  // TODO(ex10.3): your code here
}

void binomial_tree_broadcast(torch::Tensor& buffer, int root, workbook::Communicator& comm) {
  check_arguments(buffer, root, comm, "binomial_tree_broadcast");
  WB_NOT_IMPLEMENTED("ex10.3");  // TODO(ex10.3): your code here
}

void scatter_all_gather_broadcast(torch::Tensor& buffer, int root, workbook::Communicator& comm) {
  check_arguments(buffer, root, comm, "scatter_all_gather_broadcast");
  WB_NOT_IMPLEMENTED("ex10.3");  // TODO(ex10.3): your code here
}

}  // namespace ch10
