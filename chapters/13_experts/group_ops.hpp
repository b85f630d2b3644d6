// group_ops.hpp — two collectives that autograd can pass through, given:
// the expert layer (ex13.3) and its balancing loss (ex13.2) stand on them.
//
// Note: [whose gradient] Every rank runs backward on its own loss; then the
// replicated weights' gradients are averaged over the group, as in any
// data-parallel step. A collective's backward must leave each rank holding
// the share of the gradient that averaging turns into the right one:
//   sum_over_group  forward: the sum over the group's ranks; backward: the
//                   same sum of the incoming gradients, for every rank's
//                   loss used the sum and each contribution fed all of them
//   exchange_rows   forward: rows to the ranks they are addressed to;
//                   backward: each row's gradient back to where the row
//                   came from (the same exchange, counts swapped)
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch13 {

// The elementwise sum of `tensor` over the group's ranks (every rank passes
// the same shape), differentiable.
torch::Tensor sum_over_group(const torch::Tensor& tensor, workbook::Communicator& comm);

// `rows` [Σ send_counts, ...]: send_counts[s] rows for rank s, in rank order.
// Returns [Σ recv_counts, ...]: recv_counts[s] rows from rank s, in rank
// order. recv_counts[s] must be what rank s sends here (the Communicator's
// all_to_all says which pair does not match). Differentiable in `rows`.
torch::Tensor exchange_rows(const torch::Tensor& rows, const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts, workbook::Communicator& comm);

}  // namespace ch13
