// plan_axes.hpp — Chapter 13: the two axes that split what a rank holds,
// context (Chapter 12) and experts (this chapter), in numbers, before
// anything runs: what one rank sends in a training step, and what it keeps
// for backward.
//
//   workload (the GPT's sizes, the experts, N sequences of T positions)
//   layout   cp: the ranks that split each sequence (ring attention)
//            ep: the ranks the experts are spread over (the all-to-all)
//   ──► per rank, one step: ring bytes, all-to-all bytes, bytes kept for backward
//
// Chapter 11's plan ranks layouts of data, tensor and pipeline ranks from
// such counts; these are the counts the two new axes add.
#pragma once
#include <cstdint>

#include "expert_mlp.hpp"  // MoeOptions
#include "workbook/gpt.hpp"

namespace ch13 {

struct AxesLayout {
  int context = 1;  // cp ≥ 1: each sequence's T positions split over cp ranks, T/cp each
  int experts = 1;  // ep ≥ 1: the experts spread over ep ranks
};

struct AxesWorkload {
  workbook::GptOptions gpt;  // layers L, width w, heads, context T, vocabulary V
  MoeOptions moe;            // top_k k (the experts' own sizes do not enter these counts)
  int64_t sequences = 1;     // N: the sequences a rank holds positions of, in one step
};

struct AxesPlan {
  // float32 bytes this rank sends round the context ring in one training
  // step, forward and backward, as Chapter 12's reference does it: in
  // forward each block of keys and values (k and v of the T/cp positions a
  // rank holds, all heads) travels cp − 1 hops; in backward the blocks go
  // round again (cp − 1 hops) and each block's gradients (dk and dv) travel
  // with them, cp hops, until they are home. Nothing travels when cp = 1.
  int64_t ring_bytes = 0;
  // float32 bytes of token rows this rank sends to the other ranks of the
  // expert group in one training step, forward and backward, when the
  // routing is perfectly even and nothing is dropped: in every block's
  // expert layer, the rows out to the experts and the experts' outputs back,
  // and in backward their gradients the other way. The counts are left out.
  int64_t all_to_all_bytes = 0;
  // The bytes one forward pass of Chapter 11's dense GPT (workbook::Gpt, its
  // MLP width → 4w → width) over the rank's positions, and its cross-entropy
  // loss, leave alive for backward: what Chapter 12 counts from the tensors
  // (tensor_bytes.hpp). An estimate: within 20% of the count.
  int64_t kept_bytes = 0;
};

// ex13.4. A UserError when T does not split into cp equal parts.
AxesPlan plan_axes(const AxesWorkload& workload, const AxesLayout& layout);

}  // namespace ch13
