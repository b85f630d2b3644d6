// cuda_events.hpp — timing on the GPU's own clock with a pair of CUDA events.
#pragma once
#include <memory>

namespace workbook {

// Note: an event recorded on a stream is stamped when the GPU reaches it, so
// stop() - start() is the GPU's time for the work queued in between, however
// far ahead of the GPU the host runs. The events go on the legacy default
// stream, which waits for LibTorch's default stream. stop() waits for the stop
// event (a synchronization, as a wall clock would need). Available when the
// build found the CUDA toolkit; otherwise constructing one is an error.
class CudaEventTimer {
 public:
  explicit CudaEventTimer(int device_index);
  ~CudaEventTimer();
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;
  void start();
  double stop();  // seconds between start() and stop() on the GPU

 private:
  struct Events;
  std::unique_ptr<Events> events_;
  int device_index_;
};

// True when this build has the CUDA runtime (CudaEventTimer works on a GPU).
bool built_with_cuda_runtime();

}  // namespace workbook
