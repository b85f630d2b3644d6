// device.hpp — choosing a device, waiting for it, and how many CPU threads to use.
#pragma once
#include <string>
#include <vector>

#include <torch/torch.h>

namespace workbook {

// "cpu", "cuda" or "cuda:N". A CUDA device that is not there is a UserError
// that says so (and whether this LibTorch was built without CUDA at all).
torch::Device parse_device(const std::string& name);

// The devices DataParallel (Chapter 2) runs `count` replicas on: on the CPU,
// `cpu` repeated `count` times (the replicas share the cores, one thread each);
// on CUDA, the given GPU (cuda:0 when none is named), then the next ones,
// wrapping around when there are fewer GPUs than replicas (several replicas on one GPU still teach the mechanics).
std::vector<torch::Device> replica_devices(const torch::Device& device, int count);

// A UserError unless `devices` is non-empty and all CPU or all CUDA, with every
// CUDA index present. `who` names the caller in the message.
void check_devices(const std::vector<torch::Device>& devices, const std::string& who);

// Intra-op threads for each of `replicas` threads sharing `threads` cores: at least 1.
int threads_per_replica(int threads, int replicas);

// Waits until all work queued on `device` is done. CUDA kernels run
// asynchronously, so a clock read without this measures only the launches.
// On the CPU, work is synchronous and this returns at once.
void synchronize(const torch::Device& device);
void synchronize(const std::vector<torch::Device>& devices);

// The cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

// Sets LibTorch's intra-op threads (LibTorch may start with 1) and one inter-op thread.
void set_threads(int threads);

// True when stdout is a terminal (progress bars are drawn only there).
bool stdout_is_terminal();

}  // namespace workbook
