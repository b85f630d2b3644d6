// wire16.hpp — ex9.4: gradients averaged with 16 bits on the wire, as DDP's
// bf16_compress_hook and fp16_compress_hook do (with a stronger guarantee
// than theirs: the lesson says where they differ).
//
//   start, on rank r:    flat = g_r                         (float32)
//   end, on every rank:  flat = (g_0 + ... + g_{n-1}) / n   (float32, to
//                                                             16-bit precision)
//   on the wire: 16-bit numbers only (Chapter 4's ring adds in whatever
//   dtype it is given), half the bytes of the float32 ring.
//
// What must hold besides: the 16-bit formats are short of range (float16's
// largest is 65504) and of digits. Element by element, whenever the mean of
// the ranks' absolute values, (|g_0| + ... + |g_{n-1}|) / n, is within the
// wire format's range, the result must be finite and within a few roundings
// of the mean: nothing on the way may overflow. Examples, float16 at n = 2:
// g_0 = g_1 = 40000 (mean 40000), and g_0 = 100000, g_1 = 0 (mean 50000),
// must both come back right. In which order to do what is yours to work out
// (the lesson's question 5).
//
// BEGIN SOLUTION NOTE ex9.4
// Note: [divide first] Divide in float32, then round, then sum in 16 bits.
// A partial sum of the ring is a sum of k of the shares g_r / n (k <= n),
// so dividing first bounds every partial sum by the largest |g_r| of any
// one rank: if each rank's gradient fits in float16, every partial sum does.
// Summing first (the ring's own Average) overflows at 40000 + 40000.
// Rounding first overflows too: a gradient of 100000 is inf in float16
// before anything divides it. PyTorch's hooks round first and divide in 16
// bits (compressed_tensor = buffer.to(dtype).div_(world_size) in
// torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py): safe from
// the sum's overflow, not from the single large gradient, and where n is not
// a power of two the division in 16 bits rounds a second time. bfloat16 has float32's range, and either order costs
// it nothing in range.
// END SOLUTION NOTE
#pragma once
#include <torch/torch.h>

#include "reducer.hpp"  // Chapter 4: ring_all_reduce, RingOptions, AllReduceFn
#include "workbook/communicator.hpp"

namespace ch09 {

// ex9.4: `flat` (float32, 1-D, contiguous; any count, 1 included) on every
// rank becomes the mean over the ranks, as drawn above: the ring moves `wire`
// (float16 or bfloat16) elements only, 2 (n-1)/n × count of them per rank,
// 2 bytes each, and the result is what that format can hold (a value only
// bfloat16 can hold is inf through float16; digits only float16 keeps are
// rounded away through bfloat16). Collective.
void average_in_16_bits(torch::Tensor& flat, torch::ScalarType wire, workbook::Communicator& comm,
                        const ch04::RingOptions& ring = {});

// Given: the same as a bucket's all-reduce for Chapter 4's BucketReducer
// (ReducerOptions::all_reduce), as DDP registers a communication hook.
inline ch04::AllReduceFn average_in_16_bits_hook(torch::ScalarType wire) {
  return [wire](torch::Tensor& flat, workbook::Communicator& comm) { average_in_16_bits(flat, wire, comm); };
}

}  // namespace ch09
