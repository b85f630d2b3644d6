// tensor_bytes.cpp — counting the bytes of live tensors (tensor_bytes.hpp).
#include "workbook/tensor_bytes.hpp"

#include <atomic>
#include <cstring>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include "workbook/torch_compat.hpp"

namespace workbook {
namespace {

// Note: [a block's size in front of it] Each block is allocated with a
// 64-byte header in front that holds its size, so that freeing it knows
// what to subtract with no table to look it up in. The data pointer is also
// the deleter's context, as LibTorch's raw_allocate (used for some kernels'
// scratch space) requires; 64 bytes keep LibTorch's 64-byte alignment.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    char* header = static_cast<char*>(c10::alloc_cpu(bytes + kHeaderBytes));
    const int64_t size = static_cast<int64_t>(bytes);
    std::memcpy(header, &size, sizeof size);
    add(size);
    void* data = header + kHeaderBytes;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  TensorBytes counted() const { return {current_.load(), peak_.load()}; }
  void reset_peak() { peak_.store(current_.load()); }

 private:
  static constexpr size_t kHeaderBytes = 64;
  static void release(void* data) {
    if (data == nullptr) return;
    char* header = static_cast<char*>(data) - kHeaderBytes;
    int64_t size = 0;
    std::memcpy(&size, header, sizeof size);
    instance().current_.fetch_sub(size);
    c10::free_cpu(header);
  }
  void add(int64_t bytes) {
    const int64_t now = current_.fetch_add(bytes) + bytes;
    int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
  }

 public:
  // Installed once, never removed: tensors allocated through it may outlive any scope.
  static CountingCpuAllocator& instance() {
    static CountingCpuAllocator* counter = [] {
      auto* made = new CountingCpuAllocator();
      c10::SetCPUAllocator(made, /*priority=*/1);
      return made;
    }();
    return *counter;
  }

 private:
  std::atomic<int64_t> current_{0}, peak_{0};
};

CountingCpuAllocator& cpu_counter() { return CountingCpuAllocator::instance(); }

}  // namespace

TensorBytes tensor_bytes(const torch::Device& device) {
  if (device.is_cuda()) {
#ifdef WORKBOOK_TORCH_CUDA
    return {torch_compat::cuda_allocated_bytes(device.index()), torch_compat::cuda_peak_allocated_bytes(device.index())};
#else
    return {};
#endif
  }
  return cpu_counter().counted();
}

void reset_peak_tensor_bytes(const torch::Device& device) {
  if (device.is_cuda()) {
#ifdef WORKBOOK_TORCH_CUDA
    torch_compat::cuda_reset_peak(device.index());
#endif
    return;
  }
  cpu_counter().reset_peak();
}

}  // namespace workbook
