// segments.cpp — how a buffer is cut into one segment per rank (given).
#include "ring.hpp"

#include "workbook/errors.hpp"

namespace ch04 {

Span ring_segment(int64_t count, int ranks, int index) {
  WB_ASSERT(count >= 0 && ranks >= 1 && index >= 0 && index < ranks, "segment {} of {} elements over {} ranks",
            index, count, ranks);
  const int64_t base = count / ranks, extra = count % ranks;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace ch04
