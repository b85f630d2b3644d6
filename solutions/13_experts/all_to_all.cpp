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
  // BEGIN SOLUTION ex13.1
  // Note: [counts before rows] A receiver must size its buffer before the
  // rows arrive, and only the sender knows how many it sends: the counts go
  // first, in the same pairing as the rows. Round s pairs every rank with
  // the one s ahead (to send) and the one s behind (to receive), so every
  // rank is in exactly one exchange of each direction per round: p − 1
  // rounds, none waiting on a rank busy elsewhere.
  const auto ahead = [&](int s) { return (me + s) % ranks; };
  const auto behind = [&](int s) { return (me - s + ranks) % ranks; };
  std::vector<int64_t> recv_counts(ranks, 0);
  recv_counts[me] = send_counts[me];
  const auto count_options = torch::TensorOptions().dtype(torch::kInt64).device(send.device());
  for (int s = 1; s < ranks; ++s) {
    const torch::Tensor mine = torch::full({1}, send_counts[ahead(s)], count_options);
    torch::Tensor theirs = torch::empty({1}, count_options);
    comm.exchange(mine, ahead(s), theirs, behind(s));
    recv_counts[behind(s)] = theirs.cpu().item<int64_t>();
  }
  std::vector<int64_t> send_offset(ranks, 0), recv_offset(ranks, 0);
  for (int r = 1; r < ranks; ++r) {
    send_offset[r] = send_offset[r - 1] + send_counts[r - 1];
    recv_offset[r] = recv_offset[r - 1] + recv_counts[r - 1];
  }
  std::vector<int64_t> shape = send.sizes().vec();
  shape[0] = recv_offset[ranks - 1] + recv_counts[ranks - 1];
  torch::Tensor rows = torch::empty(shape, send.options());
  const torch::Tensor outgoing = send.contiguous();
  rows.narrow(0, recv_offset[me], recv_counts[me]).copy_(outgoing.narrow(0, send_offset[me], send_counts[me]));
  // Each run lands straight in its place: a narrow of dim 0 is contiguous.
  for (int s = 1; s < ranks; ++s) {
    torch::Tensor landing = rows.narrow(0, recv_offset[behind(s)], recv_counts[behind(s)]);
    comm.exchange(outgoing.narrow(0, send_offset[ahead(s)], send_counts[ahead(s)]), ahead(s), landing, behind(s));
  }
  return {rows, recv_counts};
  // END SOLUTION
}

ch10::Cost all_to_all_cost(int64_t bytes, int ranks) {
  WB_ASSERT(bytes >= 0 && ranks >= 1, "all_to_all_cost: {} bytes over {} ranks", bytes, ranks);
  // BEGIN SOLUTION ex13.1
  // Note: [two messages a round] Each of the p − 1 rounds is two exchanges
  // one after the other: the count (8 bytes), then the run of n/p bytes. So
  // 2(p − 1) α's, and (p − 1)/p·n bytes plus the counts' 8 each.
  const double p = ranks, rounds = p - 1;
  return {2 * rounds, rounds * (static_cast<double>(bytes) / p + sizeof(int64_t))};
  // END SOLUTION
}

}  // namespace ch13
