// all_to_all.hpp — Chapter 13: every rank sends rows to every rank, a
// different number to each, and nobody knows in advance how many will come.
//
//   start:  rank r holds `send`: the rows for rank 0, then those for rank 1,
//           ..., and send_counts[s], how many rows go to rank s (0 allowed,
//           to itself too)
//   end:    rank r holds every row any rank addressed to it, rank 0's first,
//           then rank 1's, ..., each run in the order it was sent; and
//           recv_counts[s], how many rows came from rank s
//
// A mixture of experts does this twice per layer: tokens to the ranks that
// hold their experts, and the experts' outputs back. The router decides the
// counts a moment before, so they differ at every step and on every rank.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "cost_model.hpp"  // Chapter 10: Cost, Link
#include "workbook/communicator.hpp"

namespace ch13 {

struct Received {
  torch::Tensor rows;               // [Σ counts, ...], the rows from rank 0 first
  std::vector<int64_t> counts;      // counts[s]: rows that came from rank s
};

// ex13.1. The exchange above, from point-to-point calls only (send, recv,
// exchange, start_exchange: no collective of the Communicator), so that it
// cannot deadlock however large the runs. `send` is [Σ send_counts, ...] of
// any dtype; send_counts has one entry per rank, none negative. Collective
// over `comm`: every rank calls it, with rows of the same trailing shape
// and dtype.
Received all_to_all_from_pairs(const torch::Tensor& send, const std::vector<int64_t>& send_counts,
                               workbook::Communicator& comm);

// ex13.1. What your all_to_all_from_pairs costs in Chapter 10's α–β model
// (cost_model.hpp's Cost: the α's one after another on a rank's path, and the
// bytes charged β), when every rank sends `bytes` rows' worth in all, bytes /
// ranks to each rank, itself included: every message your code sends counts
// (a send, or an exchange's send), whatever it carries, and every byte it
// sends; a rank's run to itself is a copy, and costs nothing. The test holds
// it to what your code sends, counted (CommStats); `workbook bench ch13`
// holds it against the measured time.
ch10::Cost all_to_all_cost(int64_t bytes, int ranks);

}  // namespace ch13
