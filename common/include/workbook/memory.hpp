// memory.hpp — peak memory: the process's resident set on CPU, the CUDA
// caching allocator's peak on GPU.
#pragma once
#include <cstdint>

#include <torch/torch.h>

namespace workbook {

class Communicator;

// The peak memory of `device` so far, in bytes: for the CPU, the process's
// peak resident set (VmHWM); for a CUDA device, the caching allocator's peak
// of allocated bytes (0 when LibTorch was built without CUDA).
int64_t peak_memory_bytes(const torch::Device& device);

// The largest peak_memory_bytes(comm.device()) over the ranks of `comm`: what
// one rank needs. Collective: every rank calls it, and every rank gets it.
int64_t largest_peak_memory_bytes(Communicator& comm);

// "312.4 MiB"
std::string format_bytes(int64_t bytes);

}  // namespace workbook
