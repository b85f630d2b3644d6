// add_into_kernel.cu — the GPU reduction of a hand-written collective:
// accumulator[i] += incoming[i]. No LibTorch here: plain CUDA, compiled by
// nvcc wherever the toolkit is found (GPU or not), called from add_into.cpp.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

// A grid-stride loop: any number of elements with a grid of bounded size.
// Each thread adds elements i, i + stride, i + 2 stride, ...: neighbouring
// threads touch neighbouring addresses, so every load and store is coalesced.
template <typename T>
__global__ void add_into_kernel(T* accumulator, const T* incoming, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    accumulator[i] += incoming[i];
}

template <typename T>
cudaError_t launch(T* accumulator, const T* incoming, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  // Enough blocks to fill the GPU several times over, no more: the loop covers the rest.
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 4096 ? wanted : 4096);
  add_into_kernel<T><<<blocks, kThreads, 0, stream>>>(accumulator, incoming, count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t workbook_add_into_float(float* accumulator, const float* incoming, int64_t count, cudaStream_t stream) {
  return launch(accumulator, incoming, count, stream);
}

cudaError_t workbook_add_into_double(double* accumulator, const double* incoming, int64_t count,
                                     cudaStream_t stream) {
  return launch(accumulator, incoming, count, stream);
}
