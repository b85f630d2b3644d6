// stage_split.hpp — ex8.6: which blocks each pipeline stage runs.
//
// A pipeline's stages work at once, each on its own micro-batch, so a step
// runs at the pace of its slowest stage: the others wait for it, every
// micro-batch, forward and backward. Cutting a model into p stages is
// choosing p − 1 cut points between its blocks:
//
//   block costs   3  1  4  1  5  9  2  6          (time, or bytes: any additive cost)
//   3 stages      3  1  4 | 1  5 | 9  2  6  ->  stage costs 8, 6, 17: the step at 17's pace
//                 ?  ?  ?   ?  ?   ?  ?  ?  ->  is there a split whose costliest stage costs less?
//
// blocks_of_stage (pipeline.hpp, given) cuts FashionCNN's five blocks by a
// fixed table; this is the cut for any blocks and any costs.
#pragma once
#include <vector>

namespace ch08 {

// ---- ex8.6 ----------------------------------------------------------------------

// Cuts blocks 0 to n − 1 (n = block_costs.size()), in order, into `stages`
// runs of consecutive blocks, each at least one block long, so that the
// costliest run (the sum of its blocks' costs) costs as little as in any such
// split. Returns the first block of each stage: `stages` ascending indices,
// the first 0. Costs are finite and ≥ 0; 1 ≤ stages ≤ n; anything else is
// refused with a UserError. Where several splits are as good, any of them.
// A model can have hundreds of blocks: the time may grow with a power of n
// and of the stages, not with the number of possible splits.
std::vector<int> balanced_split(const std::vector<double>& block_costs, int stages);

// Given: the cost of the costliest stage of a split (`firsts` as
// balanced_split returns it).
double costliest_stage(const std::vector<double>& block_costs, const std::vector<int>& firsts);

}  // namespace ch08
