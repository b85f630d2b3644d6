// host_reads.hpp — counts how often the host reads a tensor's value
// (item(), to<double>(), a tensor in an `if`), on the calling thread.
#pragma once
#include <ATen/record_function.h>

#include <cstring>
#include <memory>

namespace host_reads {

// Note: [why count host reads] On a GPU, reading a value on the host waits
// for every kernel queued before it: one read per step leaves the GPU idle
// between steps (Chapter 1's rule). On a CPU nothing waits, so the time cannot
// show it; the count can. Every such read ends in the operator
// aten::_local_scalar_dense, which RecordFunction reports on any device.
class Counter {
 public:
  Counter() {
    reads_now() = 0;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start));
  }
  ~Counter() { at::removeCallback(handle_); }
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  int64_t reads() const { return reads_now(); }

 private:
  static int64_t& reads_now() {
    thread_local int64_t reads = 0;
    return reads;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& call) {
    if (std::strcmp(call.name(), "aten::_local_scalar_dense") == 0) ++reads_now();
    return nullptr;
  }
  at::CallbackHandle handle_;
};

}  // namespace host_reads
