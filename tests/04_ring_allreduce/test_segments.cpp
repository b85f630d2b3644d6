// The given segment layout: sizes differ by at most one, cover the buffer.
#include <catch2/catch.hpp>

#include "ring.hpp"

TEST_CASE("ring_segment cuts any count into ranks contiguous segments within one element of each other",
          "[segments]") {
  for (int ranks : {1, 2, 3, 4, 7}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{6}, int64_t{1000003}}) {
      CAPTURE(ranks, count);
      int64_t next = 0, smallest = count, largest = 0;
      for (int i = 0; i < ranks; ++i) {
        const ch04::Span s = ch04::ring_segment(count, ranks, i);
        REQUIRE(s.begin == next);
        next = s.end;
        smallest = std::min(smallest, s.size());
        largest = std::max(largest, s.size());
      }
      REQUIRE(next == count);
      REQUIRE(largest - smallest <= 1);
    }
  }
}
