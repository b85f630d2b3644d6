// tensor_bytes.hpp — the bytes that live tensors hold on a device, counted as
// LibTorch allocates and frees them, never computed from shapes: what Chapter
// 9 measures activation checkpointing by (the activations a forward pass
// leaves saved for backward are the bytes it allocated and did not free).
#pragma once
#include <cstdint>

#include <torch/torch.h>

namespace workbook {

struct TensorBytes {
  int64_t current = 0;  // held by live tensors now
  int64_t peak = 0;     // the most held at once since the last reset_peak_tensor_bytes
};

// Note: [counting the CPU's tensors] On a GPU the caching allocator keeps
// these statistics itself. On the CPU LibTorch keeps none, so the first call
// of either function below puts a counting allocator in front of LibTorch's
// own (c10::SetCPUAllocator): every CPU tensor allocated from then on is
// counted when it is made and when it is freed; tensors made before are not
// (their bytes are outside `current`, before and after). Measure differences:
// bytes after a forward pass minus bytes before it.
TensorBytes tensor_bytes(const torch::Device& device);

// Peak := current, from here on.
void reset_peak_tensor_bytes(const torch::Device& device);

}  // namespace workbook
