// torch_compat.hpp — what differs between the LibTorch versions the workbook
// builds against (2.6, Debian 13's, to 2.15, the pinned wheel), in one place.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

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

// Note: [a group's own options] Newer LibTorch releases merge a parameter
// group's options into the optimizer's defaults field by field, but only for
// the options classes of LibTorch's own optimizers; a group of any other
// optimizer (LARS, LAMB here) silently gets the defaults instead of its own
// options. A hand-written optimizer's constructor hands the groups it was
// given to this function, which puts each group's own options back (in older
// releases, which kept them, it changes nothing).
inline void keep_group_options(std::vector<torch::optim::OptimizerParamGroup>& installed,
                               const std::vector<torch::optim::OptimizerParamGroup>& given) {
  TORCH_CHECK(installed.size() == given.size(), "keep_group_options: ", installed.size(), " groups installed, ",
              given.size(), " given");
  for (size_t i = 0; i < given.size(); ++i)
    if (given[i].has_options()) installed[i].set_options(given[i].options().clone());
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

// The bytes the allocator's blocks hold for tensors now (AGGREGATE, as above).
inline int64_t cuda_allocated_bytes(int device_index) {
  constexpr size_t kAggregate = 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
  return stats.allocated_bytes[kAggregate].current;
}

inline void cuda_reset_peak(int device_index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device_index));
}
#endif

}  // namespace workbook::torch_compat
