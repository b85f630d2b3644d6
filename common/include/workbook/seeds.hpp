// seeds.hpp — where a data-parallel run's random numbers come from.
//
// Note: [one formula, two programs] ch03_train and ch04_train draw dropout's
// masks from the same seeds, so that the two differ only in how gradients are
// summed and their weights can be compared bit for bit; a resumed run draws
// what an uninterrupted one would have. Both therefore take the seeds from
// here, never from a formula of their own.
#pragma once
#include <cstdint>

namespace workbook {

// The generator's seed before a rank builds its model. Ranks start from
// different weights on purpose: broadcasting the model must make them one.
inline uint64_t initial_weights_seed(uint64_t seed, int rank) { return seed + static_cast<uint64_t>(rank); }

// The generator's seed at the start of an epoch: dropout's masks, a stream per
// rank and epoch.
inline uint64_t dropout_seed(uint64_t seed, int64_t epoch, int rank) {
  return seed * 1000003 + static_cast<uint64_t>(epoch) * 1009 + static_cast<uint64_t>(rank);
}

}  // namespace workbook
