// partition.cpp — ex7.1: parameters in one padded flat buffer, cut into
// one contiguous shard per rank.
#include "sharding.hpp"

#include <algorithm>

#include "workbook/errors.hpp"

namespace ch07 {

int64_t Partition::owned_numel() const {
  return std::clamp<int64_t>(numel - shard_begin(), 0, shard_numel);
}

Partition partition_parameters(const std::vector<int64_t>& parameter_sizes, int world_size, int rank) {
  WB_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size, "rank {} of {}", rank, world_size);
  for (int64_t size : parameter_sizes) WB_ASSERT(size >= 0, "a parameter of {} elements", size);
  Partition partition;
  partition.world_size = world_size;
  partition.rank = rank;
  // BEGIN SOLUTION ex7.1
  for (int64_t size : parameter_sizes) {
    partition.offsets.push_back(partition.numel);
    partition.sizes.push_back(size);
    partition.numel += size;
  }
  // Padding makes every shard the same length: what reduce-scatter and
  // all-gather need (every rank's chunk has one count).
  partition.shard_numel = (partition.numel + world_size - 1) / world_size;
  partition.padded_numel = partition.shard_numel * world_size;
  // The runs of parameters inside [begin, end): a parameter that starts
  // before the shard or ends after it contributes only its overlap.
  const int64_t begin = partition.shard_begin(), end = begin + partition.shard_numel;
  for (size_t i = 0; i < parameter_sizes.size(); ++i) {
    const int64_t first = std::max(begin, partition.offsets[i]);
    const int64_t last = std::min(end, partition.offsets[i] + partition.sizes[i]);
    if (first < last) partition.pieces.push_back({i, first - partition.offsets[i], first - begin, last - first});
  }
  // END SOLUTION
  return partition;
}

}  // namespace ch07
