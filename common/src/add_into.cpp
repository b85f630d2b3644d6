// add_into.cpp — accumulator += incoming on the CPU (LibTorch) or the GPU
// (add_into_kernel.cu), see add_into.hpp.
#include "workbook/add_into.hpp"

#include <fmt/format.h>

#include "workbook/errors.hpp"

#if defined(WORKBOOK_TORCH_CUDA) && defined(WORKBOOK_WITH_CUDA_KERNELS)
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

cudaError_t workbook_add_into_float(float* accumulator, const float* incoming, int64_t count, cudaStream_t stream);
cudaError_t workbook_add_into_double(double* accumulator, const double* incoming, int64_t count, cudaStream_t stream);
#endif

namespace workbook {

void add_into(torch::Tensor& accumulator, const torch::Tensor& incoming) {
  WB_ASSERT(accumulator.numel() == incoming.numel() && accumulator.scalar_type() == incoming.scalar_type() &&
                accumulator.device() == incoming.device() && accumulator.is_contiguous() && incoming.is_contiguous(),
            "add_into: {} {} on {} += {} {} on {}: need one size, dtype and device, contiguous", accumulator.numel(),
            c10::toString(accumulator.scalar_type()), accumulator.device().str(), incoming.numel(),
            c10::toString(incoming.scalar_type()), incoming.device().str());
  if (!accumulator.is_cuda()) {
    accumulator.add_(incoming);
    return;
  }
#if defined(WORKBOOK_TORCH_CUDA) && defined(WORKBOOK_WITH_CUDA_KERNELS)
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(accumulator.device().index()).stream();
  cudaError_t launched = cudaSuccess;
  if (accumulator.scalar_type() == torch::kFloat32)
    launched = workbook_add_into_float(accumulator.data_ptr<float>(), incoming.data_ptr<float>(), incoming.numel(), stream);
  else if (accumulator.scalar_type() == torch::kFloat64)
    launched = workbook_add_into_double(accumulator.data_ptr<double>(), incoming.data_ptr<double>(), incoming.numel(), stream);
  else
    accumulator.add_(incoming);  // integer dtypes: LibTorch's kernel
  WB_ASSERT(launched == cudaSuccess, "add_into: the kernel launch failed: {}", cudaGetErrorString(launched));
#else
  accumulator.add_(incoming);  // a build without nvcc: LibTorch's own CUDA kernel
#endif
}

}  // namespace workbook
