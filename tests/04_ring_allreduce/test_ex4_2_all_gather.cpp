// Tests for ex4.2: after the ring all-gather, every rank holds every
// rank's owned segment, and each rank sent n-1 segments.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "ring.hpp"
#include "ring_data.hpp"

TEST_CASE("ex4.2 ring_all_gather gives every rank every owner's segment", "[ex4.2][np1][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  for (int64_t count : ring_data::hard_counts(n)) {
    CAPTURE(n, count);
    // Segment j belongs to rank (j - 1) mod n, which holds 1000 (j + 1) + i
    // there; every other element is NaN, so a segment left unfilled shows.
    auto owned_values = [&](int64_t total) {
      torch::Tensor values = torch::empty({total}, torch::kFloat32);
      for (int j = 0; j < n; ++j) {
        const ch04::Span s = ch04::ring_segment(total, n, j);
        values.narrow(0, s.begin, s.size()).copy_(torch::arange(s.size(), torch::kFloat32) + 1000.0f * (j + 1));
      }
      return values;
    };
    const torch::Tensor everything = owned_values(count);
    torch::Tensor buffer = torch::full({count}, std::numeric_limits<float>::quiet_NaN(), torch::kFloat32);
    const ch04::Span mine = ring_data::owned_segment(count, n, comm->rank());
    buffer.narrow(0, mine.begin, mine.size()).copy_(everything.narrow(0, mine.begin, mine.size()));
    const int64_t sent_before = comm->stats().elements_sent();
    ch04::ring_all_gather(buffer, *comm);
    INFO("every segment must hold its owner's values (NaN: a segment never received)");
    REQUIRE(mpi_test::all_ranks(torch::equal(buffer, everything)));
    const int64_t sent = comm->stats().elements_sent() - sent_before;
    const int64_t expected = n == 1 ? 0 : count - ch04::ring_segment(count, n, (comm->rank() + 2) % n).size();
    INFO("elements sent: " << sent << "; a ring forwards every segment but the one its right neighbour owns: "
                           << expected);
    REQUIRE(mpi_test::all_ranks(sent == expected));
  }
  REQUIRE(comm->stats().collectives() == 0);
}
