// memory.hpp — peak memory: the process's resident set on CPU, the CUDA
// caching allocator's peak on GPU.
#pragma once
#include <cstdint>

#include <torch/torch.h>

namespace workbook {

// The peak memory of `device` so far, in bytes: for the CPU, the process's
// peak resident set (VmHWM); for a CUDA device, the caching allocator's peak
// of allocated bytes (0 when LibTorch was built without CUDA).
int64_t peak_memory_bytes(const torch::Device& device);

// "312.4 MiB"
std::string format_bytes(int64_t bytes);

}  // namespace workbook
