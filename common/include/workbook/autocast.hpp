// autocast.hpp — LibTorch's autocast in a scope, as Python's `with
// torch.autocast(device, dtype)`: inside it, the ops autocast lists (matrix
// products, convolutions) compute in `dtype`, the ops that need the range or
// the precision (the losses; on CUDA softmax and log-softmax too) in float32,
// whatever their inputs' dtype. LibTorch's C++ API has the switches but no guard.
#pragma once
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace workbook {

class AutocastGuard {
 public:
  // CPU: bfloat16 (or float16); CUDA: float16 or bfloat16.
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype)
      : device_type_(device_type),
        was_enabled_(at::autocast::is_autocast_enabled(device_type)),
        previous_dtype_(at::autocast::get_autocast_dtype(device_type)) {
    at::autocast::set_autocast_enabled(device_type_, true);
    at::autocast::set_autocast_dtype(device_type_, dtype);
    at::autocast::increment_nesting();
  }
  // Note: [the cast cache] Inside autocast, a float32 weight cast to 16
  // bits is cached for the scope's life, so a layer used twice casts once;
  // the outermost guard's end drops the cache, as Python's does, so the
  // next step casts the updated weights.
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_type_, was_enabled_);
    at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool was_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace workbook
