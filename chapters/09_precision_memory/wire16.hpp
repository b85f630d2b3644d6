// wire16.hpp — ex9.4: gradients averaged with 16 bits on the wire, as DDP's
// bf16_compress_hook and fp16_compress_hook do.
//
//   float32 gradient g_r on rank r
//     × 1/n        in float32, BEFORE anything is rounded or summed
//     → 16 bits    half the bytes: what the ring sends
//     ring sum     Chapter 4's ring, adding in 16 bits
//     → float32    back into the gradient, for the float32 optimizer
//
// Note: [divide first] float16's largest number is 65504. A gradient of
// 40000 on each of two ranks sums to 80000, inf in float16, while its mean
// is 40000. A partial sum of the ring is a sum of k of the shares g_r / n
// (k <= n), so dividing first bounds every partial sum by the largest
// |g_r| of any one rank: if each rank's gradient fits in float16, every
// partial sum does. Dividing after the 16-bit rounding is no better: a
// share of 100000 is inf before it is divided. bfloat16 has float32's
// range, and dividing first costs it nothing.
#pragma once
#include <torch/torch.h>

#include "reducer.hpp"  // Chapter 4: ring_all_reduce, RingOptions, AllReduceFn
#include "workbook/communicator.hpp"

namespace ch09 {

// ex9.4: `flat` (float32, 1-D, contiguous) on every rank becomes the mean over
// the ranks, computed as drawn above: the ring moves `wire` (float16 or
// bfloat16) elements only, 2 (n-1)/n × count of them per rank, 2 bytes each.
// Collective.
void average_in_16_bits(torch::Tensor& flat, torch::ScalarType wire, workbook::Communicator& comm,
                        const ch04::RingOptions& ring = {});

// Given: the same as a bucket's all-reduce for Chapter 4's BucketReducer
// (ReducerOptions::all_reduce), as DDP registers a communication hook.
inline ch04::AllReduceFn average_in_16_bits_hook(torch::ScalarType wire) {
  return [wire](torch::Tensor& flat, workbook::Communicator& comm) { average_in_16_bits(flat, wire, comm); };
}

}  // namespace ch09
