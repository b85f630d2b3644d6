// causal_split.cpp — ex12.2: the balanced causal split and its inverse.
#include "causal_split.hpp"

#include "workbook/errors.hpp"

namespace ch12 {

Split parse_split(const std::string& name) {
  if (name == "contiguous") return Split::Contiguous;
  if (name == "balanced") return Split::Balanced;
  throw workbook::UserError("--split must be contiguous or balanced, got '" + name + "'");
}

const char* split_name(Split split) { return split == Split::Contiguous ? "contiguous" : "balanced"; }

torch::Tensor held_positions(int64_t T, int rank, int ranks, Split split) {
  WB_ASSERT(ranks > 0 && rank >= 0 && rank < ranks, "held_positions: rank {} of {}", rank, ranks);
  if (split == Split::Contiguous) {
    WB_CHECK(T % ranks == 0, "a context of {} does not split evenly among {} ranks", T, ranks);
    const int64_t block = T / ranks;
    return torch::arange(rank * block, (rank + 1) * block, torch::kInt64);
  }
  WB_CHECK(T % (2 * ranks) == 0, "a context of {} cannot be split among {} ranks with equal causal work: the balanced "
           "split takes multiples of {}", T, ranks, 2 * ranks);
  // BEGIN SOLUTION ex12.2
  // Note: [two chunks from opposite ends] Cut the sequence into 2·ranks
  // chunks; rank r takes chunk r and chunk 2·ranks − 1 − r. Chunk c's work
  // grows with c, and the pairs (0, 2p−1), (1, 2p−2), ... each sum to the
  // same total: the same work on every rank.
  const int64_t chunk = T / (2 * ranks);
  const int64_t last = 2 * ranks - 1 - rank;
  return torch::cat({torch::arange(rank * chunk, (rank + 1) * chunk, torch::kInt64),
                     torch::arange(last * chunk, (last + 1) * chunk, torch::kInt64)});
  // END SOLUTION
}

torch::Tensor to_sequence_order(const torch::Tensor& gathered, int64_t dim, int ranks, Split split) {
  const int64_t T = gathered.size(dim);
  // BEGIN SOLUTION ex12.2
  // Note: [the inverse of a permutation] Concatenated in rank order, the
  // blocks hold the positions `held`; entry e of `gathered` is position
  // held[e]. The sequence's position p is therefore entry argsort(held)[p]:
  // index_select by the inverse, whose backward scatters each gradient back
  // to the entry it came from.
  std::vector<torch::Tensor> blocks;
  for (int r = 0; r < ranks; ++r) blocks.push_back(held_positions(T, r, ranks, split));
  const torch::Tensor held = torch::cat(blocks);
  const torch::Tensor inverse = torch::argsort(held).to(gathered.device());
  return gathered.index_select(dim, inverse);
  // END SOLUTION
}

int64_t causal_pairs(int64_t T, int rank, int ranks, Split split) {
  return (held_positions(T, rank, ranks, split) + 1).sum().item<int64_t>();
}

}  // namespace ch12
