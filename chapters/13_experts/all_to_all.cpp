// all_to_all.cpp — ex13.1: an all-to-all of uneven runs from point-to-point calls.
#include "all_to_all.hpp"

#include <numeric>

#include "workbook/errors.hpp"

namespace ch13 {

Received all_to_all_from_pairs(const torch::Tensor& send, const std::vector<int64_t>& send_counts,
                               workbook::Communicator& comm) {
  const int ranks = comm.size(), me = comm.rank();
  WB_ASSERT(static_cast<int>(send_counts.size()) == ranks, "all_to_all_from_pairs: {} send counts for {} ranks",
            send_counts.size(), ranks);
  WB_ASSERT(send.dim() >= 1 && std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0}) == send.size(0),
            "all_to_all_from_pairs: the send counts must add up to send's {} rows", send.dim() ? send.size(0) : 0);
  for (const int64_t count : send_counts) WB_ASSERT(count >= 0, "all_to_all_from_pairs: a negative count ({})", count);
  WB_NOT_IMPLEMENTED("ex13.1");  // TODO(ex13.1): your code here
}

ch10::Cost all_to_all_cost(int64_t bytes, int ranks) {
  WB_ASSERT(bytes >= 0 && ranks >= 1, "all_to_all_cost: {} bytes over {} ranks", bytes, ranks);
  WB_NOT_IMPLEMENTED("ex13.1");  // TODO(ex13.1): your code here
}

}  // namespace ch13
