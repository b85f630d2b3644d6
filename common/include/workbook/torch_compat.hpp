// torch_compat.hpp — what differs between the LibTorch versions the workbook
// builds against (2.6, Debian 13's, to 2.15, the pinned wheel), in one place.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#ifdef WORKBOOK_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace workbook::torch_compat {

// Note: [an optimizer's state key] A LibTorch optimizer keeps each
// parameter's state (Adam's moments, say) in state(), keyed by the parameter's
// TensorImpl: in older releases by its address as text (c10::guts::to_string,
// now gone), in newer ones by the address itself (void*). A hand-written optimizer must use
// the same key, so that LibTorch's own serialization and state() agree with it.
template <typename Map>
struct MapKey;
template <typename K, typename V, typename... Rest>
struct MapKey<ska::flat_hash_map<K, V, Rest...>> {
  using type = K;
};
using OptimizerStateKey =
    typename MapKey<std::remove_cv_t<std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>>>::type;

template <typename Key = OptimizerStateKey>  // a template, so that only the branch for this LibTorch compiles
Key optimizer_state_key(const torch::Tensor& parameter) {
  void* address = parameter.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // what c10::guts::to_string wrote
    text << address;
    return text.str();
  } else {
    return address;
  }
}

#ifdef WORKBOOK_TORCH_CUDA
// Note: [the allocator's StatType] The enum that indexes the CUDA allocator's
// statistics has moved between releases (c10::cuda::CUDACachingAllocator,
// then c10::CachingDeviceAllocator, then c10::CachingAllocator); in every one
// AGGREGATE, the sum over its pools, is element 0.
inline int64_t cuda_peak_allocated_bytes(int device_index) {
  constexpr size_t kAggregate = 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
  return stats.allocated_bytes[kAggregate].peak;
}
#endif

}  // namespace workbook::torch_compat
