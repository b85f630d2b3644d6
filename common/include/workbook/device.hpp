// device.hpp — choosing a device, waiting for it, and how many CPU threads to use.
#pragma once
#include <string>

#include <torch/torch.h>

namespace workbook {

// "cpu", "cuda" or "cuda:N". A CUDA device that is not there is a UserError
// that says so (and whether this LibTorch was built without CUDA at all).
torch::Device parse_device(const std::string& name);

// Waits until all work queued on `device` is done. CUDA kernels run
// asynchronously, so a clock read without this measures only the launches.
// On the CPU, work is synchronous and this returns at once.
void synchronize(const torch::Device& device);

// The cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

// Sets LibTorch's intra-op threads (LibTorch may start with 1) and one inter-op thread.
void set_threads(int threads);

// True when stdout is a terminal (progress bars are drawn only there).
bool stdout_is_terminal();

}  // namespace workbook
