// memory.cpp — what a run holds in memory, and how the CPU allocator is tuned (memory.hpp,
// allocator.hpp: both are about the heap a run grows).
#include "workbook/memory.hpp"
#include "workbook/allocator.hpp"

#include <malloc.h>

#include <limits>

#include "workbook/communicator.hpp"
#include "workbook/torch_compat.hpp"

namespace workbook {

void tune_cpu_allocator() {
#ifdef __GLIBC__
  constexpr int kTrimThreshold = std::numeric_limits<int>::max();  // give back only beyond 2 GiB of free heap
  constexpr int kTopPad = 64 << 20;                                 // grow the heap in 64 MiB steps
  mallopt(M_MMAP_MAX, 0);     // never mmap(): every block, however large, comes from the heap and is reused
  mallopt(M_ARENA_MAX, 1);    // one heap for every thread (Chapter 2's replica threads reuse its blocks too)
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  mallopt(M_TOP_PAD, kTopPad);
#endif
}


int64_t peak_memory_bytes(const torch::Device& device) {
  if (device.is_cuda()) {
#ifdef WORKBOOK_TORCH_CUDA
    return torch_compat::cuda_peak_allocated_bytes(device.index());
#else
    return 0;
#endif
  }
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    std::getline(status, key);
  }
  return 0;
}

int64_t largest_peak_memory_bytes(Communicator& comm) {
  const torch::Tensor mine = torch::full({1}, peak_memory_bytes(comm.device()),
                                         torch::TensorOptions().dtype(torch::kInt64).device(comm.device()));
  return comm.all_gather(mine).max().item<int64_t>();
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace workbook
