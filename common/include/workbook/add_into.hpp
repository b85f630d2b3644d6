// add_into.hpp — accumulator += incoming, element-wise, where the tensors
// live: the reduction step of a collective written by hand (Chapter 4's ring).
#pragma once
#include <torch/torch.h>

namespace workbook {

// Both tensors contiguous, of one dtype and size, on one device. On the CPU
// it is LibTorch's vectorized add_. On a GPU it is the kernel in
// common/src/add_into_kernel.cu, launched on LibTorch's current stream, the
// stream NCCL's transfers go on, so it runs after the receive that filled
// `incoming` and before the next send of `accumulator`.
void add_into(torch::Tensor& accumulator, const torch::Tensor& incoming);

}  // namespace workbook
