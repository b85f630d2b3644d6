// cuda_events.cpp — CudaEventTimer over the CUDA runtime API; every return code checked.
#include "workbook/cuda_events.hpp"

#include <stdexcept>
#include <string>

#ifdef WORKBOOK_WITH_NCCL
#include <cuda_runtime_api.h>
#endif

namespace workbook {

#ifdef WORKBOOK_WITH_NCCL
namespace {
void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(status));
}
}  // namespace

struct CudaEventTimer::Events {
  cudaEvent_t begin = nullptr, end = nullptr;
};

CudaEventTimer::CudaEventTimer(int device_index) : events_(new Events), device_index_(device_index) {
  check(cudaSetDevice(device_index_), "cudaSetDevice");
  check(cudaEventCreate(&events_->begin), "cudaEventCreate");
  check(cudaEventCreate(&events_->end), "cudaEventCreate");
}

CudaEventTimer::~CudaEventTimer() {
  if (events_->begin) cudaEventDestroy(events_->begin);
  if (events_->end) cudaEventDestroy(events_->end);
}

void CudaEventTimer::start() { check(cudaEventRecord(events_->begin, nullptr), "cudaEventRecord"); }

double CudaEventTimer::stop() {
  check(cudaEventRecord(events_->end, nullptr), "cudaEventRecord");
  check(cudaEventSynchronize(events_->end), "cudaEventSynchronize");
  float milliseconds = 0.0f;
  check(cudaEventElapsedTime(&milliseconds, events_->begin, events_->end), "cudaEventElapsedTime");
  return milliseconds / 1000.0;
}

bool built_with_cuda_runtime() { return true; }

#else

struct CudaEventTimer::Events {};
CudaEventTimer::CudaEventTimer(int device_index) : device_index_(device_index) {
  throw std::runtime_error("CudaEventTimer: this build has no CUDA runtime");
}
CudaEventTimer::~CudaEventTimer() = default;
void CudaEventTimer::start() {}
double CudaEventTimer::stop() { return 0.0; }
bool built_with_cuda_runtime() { return false; }

#endif

}  // namespace workbook
