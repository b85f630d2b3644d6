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

SimulatedRun simulate_collective(Collective collective, Algorithm algorithm, int ranks, int64_t count,
                                 const Link& link) {
  const bool ring = algorithm == Algorithm::Ring && collective != Collective::Broadcast;
  const bool all_reduce = collective == Collective::AllReduce &&
                          (algorithm == Algorithm::RecursiveDoubling || algorithm == Algorithm::Rabenseifner);
  const bool broadcast = collective == Collective::Broadcast &&
                         (algorithm == Algorithm::BinomialTree || algorithm == Algorithm::ScatterAllGather);
  WB_CHECK(ring || all_reduce || broadcast, "no program here for {} by {}", collective_name(collective),
           algorithm_name(algorithm));
  return simulate(ranks, link, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = torch::ones({count});
    // Each segment travels whole: a chunk as long as the longest segment,
    // which is count / p rounded up where p does not divide count (a chunk of
    // count / p rounded down sent the longer segments in two messages).
    ch04::RingOptions whole_segments;
    whole_segments.chunk_elements = std::max<int64_t>(1, (count + ranks - 1) / ranks);
    switch (algorithm) {
      case Algorithm::Ring:
        if (collective == Collective::ReduceScatter) ch04::ring_reduce_scatter(buffer, comm, whole_segments);
        if (collective == Collective::AllGather) ch04::ring_all_gather(buffer, comm);
        if (collective == Collective::AllReduce) ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, comm, whole_segments);
        break;
      case Algorithm::RecursiveDoubling: recursive_doubling_all_reduce(buffer, comm); break;
      case Algorithm::Rabenseifner: rabenseifner_all_reduce(buffer, comm); break;
      case Algorithm::BinomialTree: binomial_tree_broadcast(buffer, 0, comm); break;
      case Algorithm::ScatterAllGather: scatter_all_gather_broadcast(buffer, 0, comm); break;
    }
  });
}

}  // namespace ch10
