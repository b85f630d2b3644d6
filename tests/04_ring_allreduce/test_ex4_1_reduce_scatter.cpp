// Tests for ex4.1: after the ring reduce-scatter, rank r's segment
// (r + 1) mod n holds the exact sum, and each rank sent n-1 segments.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "ring.hpp"
#include "ring_data.hpp"

TEST_CASE("ex4.1 ring_reduce_scatter leaves the exact sum in segment (rank + 1) mod n", "[ex4.1][np1][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  // Small chunks too: many chunks per step, and segments whose last chunk is short or empty.
  for (int64_t chunk : {int64_t{32768}, int64_t{3}}) {
    for (int64_t count : ring_data::hard_counts(n)) {
      if (chunk == 3 && count > 100000) continue;  // 300,000 tiny messages prove nothing more
      CAPTURE(n, count, chunk);
      torch::Tensor buffer = ring_data::rank_values(count, comm->rank());
      const int64_t sent_before = comm->stats().elements_sent();
      ch04::ring_reduce_scatter(buffer, *comm, ch04::RingOptions{chunk});
      const ch04::Span mine = ring_data::owned_segment(count, n, comm->rank());
      const torch::Tensor expected = ring_data::sum_over_ranks(count, n).narrow(0, mine.begin, mine.size());
      INFO("segment " << (comm->rank() + 1) % n << " (elements " << mine.begin << ".." << mine.end
                      << ") must hold the sum over all " << n << " ranks");
      REQUIRE(mpi_test::all_ranks(torch::equal(buffer.narrow(0, mine.begin, mine.size()), expected)));
      // A ring rank sends every segment but the one it ends up owning: n-1
      // segments, (n-1)/n of the buffer, however many ranks there are.
      const int64_t sent = comm->stats().elements_sent() - sent_before;
      INFO("elements sent: " << sent << ", a ring sends count - (the owned segment) = " << count - mine.size());
      REQUIRE(mpi_test::all_ranks(sent == count - mine.size()));
    }
  }
  INFO("a ring is point to point only: no collective calls");
  REQUIRE(comm->stats().collectives() == 0);
}

TEST_CASE("ex4.1 ring_reduce_scatter's default chunk is the Communicator's message size", "[ex4.1][np3]") {
  auto comm = mpi_test::communicator();  // its own: the counts below are this test's alone
  const int n = comm->size();
  // The given code's part: 0 resolves to the Communicator's size, in elements of the buffer.
  const int64_t chunk = ch04::RingOptions{}.for_buffer(*comm, torch::empty({0}, torch::kFloat32)).chunk_elements;
  REQUIRE(chunk == comm->message_bytes() / 4);
  REQUIRE(ch04::RingOptions{}.for_buffer(*comm, torch::empty({0}, torch::kFloat64)).chunk_elements ==
          comm->message_bytes() / 8);
  REQUIRE(ch04::RingOptions{3}.for_buffer(*comm, torch::empty({0}, torch::kFloat64)).chunk_elements == 3);
  torch::Tensor too_small = torch::zeros({8});
  REQUIRE_THROWS(ch04::ring_reduce_scatter(too_small, *comm, ch04::RingOptions{-1}));
  if (n == 1) return;  // one rank sends nothing

  // The exercise's part, with the default options: every step's segment is three chunks.
  const int64_t count = 3 * chunk * n;
  torch::Tensor buffer = ring_data::rank_values(count, comm->rank());
  ch04::ring_reduce_scatter(buffer, *comm);
  const int64_t exchanges = comm->stats().count(workbook::CommOp::Exchange);
  CAPTURE(n, count, chunk, exchanges);
  INFO("ex4.1: with the default options a step's segment of " << 3 * chunk << " elements goes in chunks of "
       "options.chunk_elements = " << chunk << " (the Communicator's message size): " << 3 * (n - 1)
       << " exchanges in " << n - 1 << " steps");
  REQUIRE(mpi_test::all_ranks(exchanges == 3 * (n - 1)));
  const ch04::Span mine = ring_data::owned_segment(count, n, comm->rank());
  REQUIRE(mpi_test::all_ranks(torch::equal(buffer.narrow(0, mine.begin, mine.size()),
                                            ring_data::sum_over_ranks(count, n).narrow(0, mine.begin, mine.size()))));
}

// Segments differ by one element: cut into chunks of 3, the largest (4
// elements) needs two chunks and the others (3) one. Every rank's exchanges
// must still pair up (Note: [chunks]).
TEST_CASE("ex4.1 ring_reduce_scatter when segments need different numbers of chunks", "[ex4.1][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  if (n == 1) return;  // one rank sends nothing
  const int64_t chunk = 3, count = 3 * n + 1;
  torch::Tensor buffer = ring_data::rank_values(count, comm->rank());
  ch04::ring_reduce_scatter(buffer, *comm, ch04::RingOptions{chunk});
  const ch04::Span mine = ring_data::owned_segment(count, n, comm->rank());
  CAPTURE(n, count, chunk);
  INFO("ex4.1: with segments of 4 and 3 elements and chunks of 3, segment " << (comm->rank() + 1) % n
       << " must still hold the sum over all " << n << " ranks: in every step the ranks' exchanges must pair up");
  REQUIRE(mpi_test::all_ranks(torch::equal(buffer.narrow(0, mine.begin, mine.size()),
                                           ring_data::sum_over_ranks(count, n).narrow(0, mine.begin, mine.size()))));
}

TEST_CASE("ex4.1 ring_reduce_scatter sums float64 exactly", "[ex4.1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t count = 100001;
  torch::Tensor buffer = ring_data::rank_values(count, comm->rank(), torch::kFloat64);
  ch04::ring_reduce_scatter(buffer, *comm);
  const ch04::Span mine = ring_data::owned_segment(count, comm->size(), comm->rank());
  REQUIRE(mpi_test::all_ranks(torch::equal(
      buffer.narrow(0, mine.begin, mine.size()),
      ring_data::sum_over_ranks(count, comm->size(), torch::kFloat64).narrow(0, mine.begin, mine.size()))));
}

TEST_CASE("ex4.1 ring_reduce_scatter sends in chunks, the next already on its way while the last is added",
          "[ex4.1][np3]") {
  auto comm = mpi_test::communicator();  // its own: the counts below are this test's alone
  const int n = comm->size();
  if (n == 1) return;  // one rank sends nothing
  const int64_t count = 1000 * n, chunk = 64;  // segments of 1000 elements: 16 chunks each
  torch::Tensor buffer = ring_data::rank_values(count, comm->rank());
  ch04::ring_reduce_scatter(buffer, *comm, ch04::RingOptions{chunk});
  const workbook::CommStats& stats = comm->stats();
  const int64_t exchanges = stats.count(workbook::CommOp::Exchange), sent = stats.elements_sent();
  CAPTURE(n, count, chunk, exchanges, sent);
  INFO("ex4.1: " << sent << " elements went in " << exchanges << " exchange(s); with chunk_elements = " << chunk
                 << " a step's segment goes in pieces of at most " << chunk << " elements (RingOptions::chunk_elements)");
  REQUIRE(mpi_test::all_ranks(exchanges * chunk >= sent));
  INFO("ex4.1: at most " << stats.most_exchanges_in_flight << " exchange(s) were in flight at once: start chunk k+1's "
       "exchange before adding chunk k (Note: [chunks]), so that receiving and adding overlap");
  REQUIRE(mpi_test::all_ranks(stats.most_exchanges_in_flight >= 2));
}
