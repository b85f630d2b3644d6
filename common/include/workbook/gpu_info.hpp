// gpu_info.hpp — what the CUDA runtime and NCCL this build linked say about the machine.
#pragma once
#include <string>

namespace workbook {

struct GpuRuntimeInfo {
  bool built_with_nccl = false;  // the CUDA toolkit and NCCL were found at configure time
  std::string cuda_runtime;      // e.g. "13.0", empty when not built with CUDA
  std::string nccl;              // e.g. "2.28.3"
  int devices = 0;               // CUDA devices visible now (0 on a machine without a GPU)
  std::string note;              // why no device is visible, when none is
};

GpuRuntimeInfo gpu_runtime_info();

// One CUDA device as the runtime names it. The PCI bus id is the same for a
// GPU whatever CUDA_VISIBLE_DEVICES renumbers it to, so two ranks that
// report one bus id share one GPU.
struct GpuDevice {
  std::string name;        // e.g. "NVIDIA H100 80GB HBM3"; empty when unknown
  std::string pci_bus_id;  // e.g. "0000:17:00.0"; empty when unknown
};
GpuDevice gpu_device(int index);

}  // namespace workbook
