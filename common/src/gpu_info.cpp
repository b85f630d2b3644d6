// gpu_info.cpp — queries the CUDA runtime and NCCL when the build found them.
// This file compiles and links against CUDA and NCCL wherever they are
// installed, GPU or not; on a machine without a GPU it reports none.
#include "workbook/gpu_info.hpp"

#ifdef WORKBOOK_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include <string>

namespace workbook {

GpuRuntimeInfo gpu_runtime_info() {
  GpuRuntimeInfo info;
#ifdef WORKBOOK_WITH_NCCL
  info.built_with_nccl = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    info.cuda_runtime = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    info.nccl = std::to_string(nccl / 10000) + "." + std::to_string(nccl % 10000 / 100) + "." +
                std::to_string(nccl % 100);
  cudaError_t status = cudaGetDeviceCount(&info.devices);
  if (status != cudaSuccess) {
    info.devices = 0;
    info.note = cudaGetErrorString(status);
  }
#else
  info.note = "built without the CUDA toolkit and NCCL";
#endif
  return info;
}

GpuDevice gpu_device(int index) {
  GpuDevice device;
#ifdef WORKBOOK_WITH_NCCL
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, index) == cudaSuccess) device.name = properties.name;
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index) == cudaSuccess) device.pci_bus_id = bus_id;
#else
  (void)index;
#endif
  return device;
}

}  // namespace workbook
