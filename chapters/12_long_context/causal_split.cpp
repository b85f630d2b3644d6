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
  WB_NOT_IMPLEMENTED("ex12.2");  // TODO(ex12.2): your code here
}

torch::Tensor to_sequence_order(const torch::Tensor& gathered, int64_t dim, int ranks, Split split) {
  const int64_t T = gathered.size(dim);
  WB_NOT_IMPLEMENTED("ex12.2");  // TODO(ex12.2): your code here
}

int64_t causal_pairs(int64_t T, int rank, int ranks, Split split) {
  return (held_positions(T, rank, ranks, split) + 1).sum().item<int64_t>();
}

}  // namespace ch12
