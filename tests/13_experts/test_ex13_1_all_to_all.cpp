// Tests for ex13.1: the all-to-all of uneven runs, built from point-to-point
// exchanges, against what every rank addressed to every other (exact).
#include <functional>
#include <vector>

#include "catch2_compat.hpp"

#include "all_to_all.hpp"
#include "mpi_test.hpp"

namespace {

using Counts = std::function<int64_t(int from, int to)>;

// The rows rank `from` sends to rank `to`: row i holds (from, to, i), so a
// row in the wrong place names where it came from.
torch::Tensor rows_between(int from, int to, int64_t count, torch::Dtype dtype) {
  const torch::Tensor index = torch::arange(count, torch::kFloat64).unsqueeze(1);
  return torch::cat({torch::full({count, 1}, from, torch::kFloat64), torch::full({count, 1}, to, torch::kFloat64),
                     index},
                    1)
      .to(dtype);
}

void check_exchange(workbook::Communicator& comm, const Counts& counts, torch::Dtype dtype, const std::string& what) {
  const int ranks = comm.size(), me = comm.rank();
  std::vector<torch::Tensor> outgoing, expected;
  std::vector<int64_t> send_counts, expected_counts;
  for (int to = 0; to < ranks; ++to) {
    send_counts.push_back(counts(me, to));
    outgoing.push_back(rows_between(me, to, counts(me, to), dtype));
  }
  for (int from = 0; from < ranks; ++from) {
    expected_counts.push_back(counts(from, me));
    expected.push_back(rows_between(from, me, counts(from, me), dtype));
  }
  const ch13::Received got = ch13::all_to_all_from_pairs(torch::cat(outgoing), send_counts, comm);
  const torch::Tensor want = torch::cat(expected);
  INFO("rank " << me << " of " << ranks << " (" << what << "): expected counts " << torch::tensor(expected_counts)
               << " and got " << torch::tensor(got.counts) << "; expected rows [" << want.size(0)
               << ", 3], got " << got.rows.sizes() << " (each row: from, to, index)");
  REQUIRE(mpi_test::all_ranks(got.counts == expected_counts && got.rows.sizes() == want.sizes() &&
                              got.rows.scalar_type() == dtype && torch::equal(got.rows, want)));
}

}  // namespace

TEST_CASE("ex13.1 every rank receives what each rank sent it, in rank order, whatever the counts", "[ex13.1][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int p = comm->size();
  check_exchange(*comm, [](int from, int to) { return int64_t{(from * 3 + to * 5 + 1) % 4}; }, torch::kFloat32,
                 "uneven counts, some 0, what r sends s not what s sends r");
  check_exchange(*comm, [](int from, int to) { return int64_t{from == to ? 0 : 2 + from}; }, torch::kInt64,
                 "nothing to itself, int64 rows");
  check_exchange(*comm, [](int, int) { return int64_t{0}; }, torch::kFloat64, "nothing at all");
  check_exchange(*comm, [p](int from, int to) { return int64_t{to == p - 1 ? 5 + from : 0}; }, torch::kFloat32,
                 "every rank sends only to the last");
  check_exchange(*comm, [](int from, int) { return int64_t{from == 0 ? 3 : 0}; }, torch::kFloat32,
                 "only rank 0 sends, to every rank");
}

TEST_CASE("ex13.1 point to point only: no collective of the Communicator", "[ex13.1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t before = comm->stats().collectives();
  check_exchange(*comm, [](int from, int to) { return int64_t{1 + (from + 2 * to) % 3}; }, torch::kFloat32,
                 "counting the calls");
  const int64_t collectives = comm->stats().collectives() - before;
  INFO("rank " << comm->rank() << " made " << collectives << " collective call(s)");
  REQUIRE(mpi_test::all_ranks(collectives == 0));
}

TEST_CASE("ex13.1 runs of megabytes to every rank at once come through", "[ex13.1]") {
  auto comm = mpi_test::communicator();
  // 1 MiB for every peer: more than MPI buffers for a send without its receive.
  check_exchange(*comm, [](int from, int to) { return int64_t{from == to ? 1 : 87382 + from}; }, torch::kFloat32,
                 "a megabyte for every peer");
}

TEST_CASE("ex13.1 the cost is what the exchange sends: its messages and its bytes, counted", "[ex13.1][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  for (const int64_t per_peer : {int64_t{0}, int64_t{1}, int64_t{1000}}) {  // float32 elements to each rank
    const int64_t bytes = per_peer * 4 * ranks;
    const std::vector<int64_t> counts(ranks, per_peer);
    const torch::Tensor send = torch::ones({per_peer * ranks, 1});
    const workbook::CommStats before = comm->stats();
    ch13::all_to_all_from_pairs(send, counts, *comm);
    const workbook::CommStats after = comm->stats();
    const auto calls = [&](workbook::CommOp op) { return after.count(op) - before.count(op); };
    // A message is a send, or an exchange's send; a receive costs its sender's message.
    const double messages = calls(workbook::CommOp::Send) + calls(workbook::CommOp::Exchange);
    const double sent = static_cast<double>(after.bytes_sent() - before.bytes_sent());
    const ch10::Cost cost = ch13::all_to_all_cost(bytes, ranks);
    INFO("rank " << comm->rank() << " of " << ranks << ", " << bytes << " bytes from each rank: all_to_all_cost says "
                 << cost.messages << " messages and " << cost.bytes << " bytes; your all_to_all_from_pairs sent "
                 << messages << " messages and " << sent << " bytes");
    REQUIRE(mpi_test::all_ranks(cost.messages == messages && cost.bytes == sent));
  }
  const ch10::Cost alone = ch13::all_to_all_cost(4096, 1);
  INFO("one rank alone: all_to_all_cost says " << alone.messages << " messages and " << alone.bytes << " bytes");
  REQUIRE((alone.messages == 0 && alone.bytes == 0));
}
