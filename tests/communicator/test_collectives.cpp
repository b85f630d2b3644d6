// The Communicator's operations on exact data: integer-valued floats, whose
// sums are exact in any order, so every result is compared for equality.
// Run at 2 ranks, and at 1 and 3 ([np1], [np3]).
#include "catch2_compat.hpp"

#include "gpu_tests.hpp"
#include "mpi_test.hpp"
#include "workbook/errors.hpp"

using workbook::ReduceOp;

namespace {

// Element counts: none, one, fewer than the ranks, not divisible by them, large.
const int64_t kCounts[] = {0, 1, 2, 7, 1000003};

torch::Tensor exact_values(int64_t count, int64_t scale, torch::ScalarType dtype) {
  // 0, 1, ..., wrapping at 1000 so that sums stay exact in float32 and small in uint8.
  const int64_t wrap = dtype == torch::kUInt8 ? 50 : 1000;
  return (torch::arange(count, torch::kInt64).remainder(wrap) * scale).to(dtype);
}

}  // namespace

TEST_CASE("message_bytes is the same on every rank: 512 KiB with every rank on one node", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t bytes = comm->message_bytes();
  const torch::Tensor all = comm->all_gather(torch::tensor({bytes}, torch::kInt64));
  REQUIRE(mpi_test::all_ranks(torch::all(all == bytes).item<bool>()));
  // The tests' ranks run on this machine: Note [the message size follows the link].
  REQUIRE(mpi_test::all_ranks(bytes == int64_t{512} << 10));
}

TEST_CASE("barrier returns on every rank and is counted", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  comm->barrier();
  comm->barrier();
  REQUIRE(comm->stats().count(workbook::CommOp::Barrier) == 2);
  REQUIRE(comm->stats().collectives() == 2);
}

TEST_CASE("broadcast gives every rank the root's tensor", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64, torch::kInt32, torch::kInt64, torch::kUInt8})
    for (int64_t count : kCounts)
      for (int root = 0; root < comm->size(); ++root) {
        CAPTURE(c10::toString(dtype), count, root);
        torch::Tensor tensor = exact_values(count, comm->rank() + 1, dtype);
        comm->broadcast(tensor, root);
        REQUIRE(torch::equal(tensor, exact_values(count, root + 1, dtype)));
      }
}

TEST_CASE("all_reduce sums and averages exactly", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t n = comm->size();
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64, torch::kInt64, torch::kInt32})
    for (int64_t count : kCounts) {
      CAPTURE(c10::toString(dtype), count);
      torch::Tensor tensor = exact_values(count, comm->rank() + 1, dtype);  // rank r holds (r + 1) * x
      comm->all_reduce(tensor, ReduceOp::Sum);
      REQUIRE(torch::equal(tensor, exact_values(count, n * (n + 1) / 2, dtype)));  // (1 + ... + n) * x
    }
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64}) {
    // rank r holds 2r * x: the mean is (n - 1) * x, exact.
    torch::Tensor tensor = exact_values(1000003, 2 * comm->rank(), dtype);
    comm->all_reduce(tensor, ReduceOp::Average);
    REQUIRE(torch::equal(tensor, exact_values(1000003, n - 1, dtype)));
  }
}

TEST_CASE("all_reduce and reduce_scatter with Max keep the largest, in every dtype, negative values too",
          "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t n = comm->size(), r = comm->rank();
  for (torch::ScalarType dtype :
       {torch::kFloat32, torch::kFloat64, torch::kInt64, torch::kInt32, torch::kFloat16, torch::kBFloat16}) {
    CAPTURE(c10::toString(dtype));
    // Element i: the largest is on rank i % n, the others lower; below zero, so that a bit pattern
    // compared as an unsigned number (a 16-bit value's) would pick a wrong one.
    const torch::Tensor i = torch::arange(7 * n, torch::kInt64);
    const torch::Tensor mine = (-100 - ((i - r) % n + n) % n).to(dtype);
    torch::Tensor largest = mine.clone();
    comm->all_reduce(largest, ReduceOp::Max);
    REQUIRE(torch::equal(largest, torch::full({7 * n}, -100, torch::kInt64).to(dtype)));
    torch::Tensor chunk = torch::empty({7}, mine.options());
    comm->reduce_scatter(mine, chunk, ReduceOp::Max);
    REQUIRE(torch::equal(chunk, torch::full({7}, -100, torch::kInt64).to(dtype)));
  }
}

TEST_CASE("all_gather puts rank r's tensor at slot r", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  for (int64_t count : kCounts) {
    CAPTURE(count);
    torch::Tensor mine = exact_values(count, comm->rank() + 1, torch::kFloat32);
    torch::Tensor all = comm->all_gather(mine);
    REQUIRE(all.sizes() == torch::IntArrayRef({comm->size(), count}));
    for (int r = 0; r < comm->size(); ++r) REQUIRE(torch::equal(all[r], exact_values(count, r + 1, torch::kFloat32)));
  }
}

TEST_CASE("all_gather in place: the input is this rank's own chunk of the output", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t n = comm->size();
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{333334}}) {
    CAPTURE(count);
    torch::Tensor flat = torch::full({n * count}, -1.0f);
    torch::Tensor mine = flat.narrow(0, comm->rank() * count, count);
    mine.copy_(exact_values(count, comm->rank() + 1, torch::kFloat32));
    comm->all_gather(mine, flat);
    for (int r = 0; r < n; ++r)
      REQUIRE(torch::equal(flat.narrow(0, r * count, count), exact_values(count, r + 1, torch::kFloat32)));
  }
  INFO("an input that overlaps the output elsewhere than at this rank's chunk is refused, on every rank, before any "
       "message is sent");
  torch::Tensor spare = torch::zeros({n * 4 + 1});
  torch::Tensor output = spare.narrow(0, 0, n * 4);
  REQUIRE_THROWS_AS(comm->all_gather(spare.narrow(0, comm->rank() * 4 + 1, 4), output), workbook::InternalError);
  torch::Tensor buffer = torch::zeros({n * 2});
  torch::Tensor inside = buffer.narrow(0, 0, 2);
  REQUIRE_THROWS_AS(comm->reduce_scatter(buffer, inside, ReduceOp::Sum), workbook::InternalError);
}

TEST_CASE("reduce_scatter gives rank r the reduction of chunk r", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t n = comm->size();
  for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{333334}}) {
    CAPTURE(chunk);
    torch::Tensor input = exact_values(n * chunk, comm->rank() + 1, torch::kFloat64);
    torch::Tensor output = torch::empty({chunk}, torch::kFloat64);
    comm->reduce_scatter(input, output, ReduceOp::Sum);
    const torch::Tensor expected = exact_values(n * chunk, n * (n + 1) / 2, torch::kFloat64);
    REQUIRE(torch::equal(output, expected.narrow(0, comm->rank() * chunk, chunk)));
    comm->reduce_scatter(input, output, ReduceOp::Average);
    REQUIRE(torch::allclose(output, expected.narrow(0, comm->rank() * chunk, chunk) / static_cast<double>(n)));
  }
}

TEST_CASE("send and recv pass a tensor around the ring", "[communicator][np3]") {
  auto comm = mpi_test::communicator();
  if (comm->size() == 1) return;
  const int next = (comm->rank() + 1) % comm->size(), previous = (comm->rank() + comm->size() - 1) % comm->size();
  for (int64_t count : {int64_t{1}, int64_t{100000}}) {
    torch::Tensor outgoing = exact_values(count, comm->rank() + 1, torch::kFloat32);
    torch::Tensor incoming = torch::empty({count}, torch::kFloat32);
    // Even ranks send first, odd ranks receive first: no cycle of ranks all waiting to send.
    if (comm->rank() % 2 == 0) {
      comm->send(outgoing, next);
      comm->recv(incoming, previous);
    } else {
      comm->recv(incoming, previous);
      comm->send(outgoing, next);
    }
    REQUIRE(torch::equal(incoming, exact_values(count, previous + 1, torch::kFloat32)));
  }
  REQUIRE(comm->stats().count(workbook::CommOp::Send) == 2);
  REQUIRE(comm->stats().count(workbook::CommOp::Recv) == 2);
  REQUIRE(comm->stats().elements[static_cast<int>(workbook::CommOp::Send)] == 100001);
  REQUIRE(comm->stats().collectives() == 0);
}

TEST_CASE("exchange sends right and receives from the left at once, in the order started", "[communicator][np3]") {
  auto comm = mpi_test::communicator();
  if (comm->size() == 1) return;
  const int next = (comm->rank() + 1) % comm->size(), previous = (comm->rank() + comm->size() - 1) % comm->size();
  // Every rank sends first and receives second: with blocking sends of 4 MB
  // this would deadlock; an exchange cannot. Two in flight at once match in order.
  const int64_t large = 1000003, small = 3;
  torch::Tensor out_large = exact_values(large, comm->rank() + 1, torch::kFloat32);
  torch::Tensor out_small = exact_values(small, comm->rank() + 7, torch::kFloat64);
  torch::Tensor in_large = torch::empty({large}, torch::kFloat32), in_small = torch::empty({small}, torch::kFloat64);
  torch::Tensor in_empty = torch::empty({0}, torch::kFloat32);
  workbook::PendingExchange first = comm->start_exchange(out_large, next, in_large, previous);
  workbook::PendingExchange second = comm->start_exchange(out_small, next, in_small, previous);
  second.wait();
  first.wait();
  comm->exchange(torch::empty({0}, torch::kFloat32), next, in_empty, previous);  // nothing to send is fine
  REQUIRE(torch::equal(in_large, exact_values(large, previous + 1, torch::kFloat32)));
  REQUIRE(torch::equal(in_small, exact_values(small, previous + 7, torch::kFloat64)));
  REQUIRE(comm->stats().count(workbook::CommOp::Exchange) == 3);
  REQUIRE(comm->stats().elements_sent() == large + small);
  REQUIRE(comm->stats().collectives() == 0);
}

namespace {

// How many elements rank `from` sends rank `to` in the all-to-all tests: 0 to
// 3, some pairs nothing at all.
int64_t pair_count(int from, int to, int salt) { return (from * 3 + to * 5 + salt) % 4; }

// The elements `from` sends `to`: from·1000 + to·100 + 0, 1, ...: each says where it came from.
torch::Tensor pair_values(int from, int to, int salt, torch::ScalarType dtype) {
  return (torch::arange(pair_count(from, to, salt), torch::kInt64) + from * 1000 + to * 100).to(dtype);
}

}  // namespace

TEST_CASE("all_to_all delivers runs of any length, none included, in rank order", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int p = comm->size(), me = comm->rank();
  for (const int salt : {0, 1, 2, 3}) {
    for (const auto dtype : {torch::kFloat32, torch::kInt64, torch::kBFloat16}) {
      CAPTURE(p, salt, dtype);
      std::vector<int64_t> send_counts, recv_counts;
      std::vector<torch::Tensor> sent, expected;
      for (int r = 0; r < p; ++r) {
        send_counts.push_back(pair_count(me, r, salt));
        recv_counts.push_back(pair_count(r, me, salt));
        sent.push_back(pair_values(me, r, salt, dtype));
        expected.push_back(pair_values(r, me, salt, dtype));
      }
      const torch::Tensor send = torch::cat(sent);
      torch::Tensor recv = torch::full({torch::cat(expected).numel()}, -1, torch::TensorOptions().dtype(dtype));
      const int64_t calls = comm->stats().count(workbook::CommOp::AllToAll);
      comm->all_to_all(send, send_counts, recv, recv_counts);
      REQUIRE(mpi_test::all_ranks(torch::equal(recv, torch::cat(expected))));
      REQUIRE(comm->stats().count(workbook::CommOp::AllToAll) == calls + 1);
    }
  }
}

TEST_CASE("all_to_all of nothing at all returns on every rank", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const std::vector<int64_t> none(static_cast<size_t>(comm->size()), 0);
  torch::Tensor recv = torch::empty({0});
  comm->all_to_all(torch::empty({0}), none, recv, none);
  REQUIRE(mpi_test::all_ranks(recv.numel() == 0));
}

TEST_CASE("all_to_all counts that do not match fail on every rank, the pair named, before any data moves",
          "[communicator][np3]") {
  auto comm = mpi_test::communicator();
  if (comm->size() == 1) return;
  const int p = comm->size(), me = comm->rank();
  std::vector<int64_t> send_counts(static_cast<size_t>(p), 2), recv_counts(static_cast<size_t>(p), 2);
  if (me == 0) recv_counts[1] = 3;  // rank 1 sends 2
  torch::Tensor recv = torch::zeros({2 * p + (me == 0 ? 1 : 0)});
  const std::string named = me == 0 ? "rank 1 sends 2 element(s) to rank 0, which expects 3" : "another rank's message";
  REQUIRE_THROWS_WITH(comm->all_to_all(torch::ones({2 * p}), send_counts, recv, recv_counts),
                      Catch::Matchers::ContainsSubstring("counts do not match") &&
                          Catch::Matchers::ContainsSubstring(named));
  INFO("nothing was received");
  REQUIRE(mpi_test::all_ranks(torch::equal(recv, torch::zeros_like(recv))));
}

TEST_CASE("a recv whose count differs from the send's is an error, not garbage", "[communicator]") {
  auto comm = mpi_test::communicator();
  if (comm->size() < 2 || comm->rank() > 1) return;
  if (comm->rank() == 0) {
    comm->send(torch::ones({5}), 1);
  } else {
    torch::Tensor buffer = torch::zeros({10});
    REQUIRE_THROWS_WITH(comm->recv(buffer, 0), Catch::Matchers::ContainsSubstring("expected 10 elements and got 5"));
  }
}

TEST_CASE("bad arguments are caught before any data moves", "[communicator][np1]") {
  auto comm = mpi_test::communicator();
  torch::Tensor integers = torch::ones({4}, torch::kInt64);
  REQUIRE_THROWS_WITH(comm->all_reduce(integers, ReduceOp::Average), Catch::Matchers::ContainsSubstring("floating-point"));
  torch::Tensor strided = torch::ones({4, 4}).t();
  REQUIRE_THROWS_WITH(comm->all_reduce(strided, ReduceOp::Sum), Catch::Matchers::ContainsSubstring("contiguous"));
  torch::Tensor shorts = torch::ones({4}, torch::kInt16);  // float16 and bfloat16 are supported (Chapter 9)
  REQUIRE_THROWS_WITH(comm->broadcast(shorts, 0), Catch::Matchers::ContainsSubstring("not supported"));
  torch::Tensor wrong_size = torch::ones({3});
  REQUIRE_THROWS_WITH(comm->all_gather(torch::ones({2}), wrong_size), Catch::Matchers::ContainsSubstring("all_gather"));
  REQUIRE(comm->stats().collectives() == 0);  // nothing was sent: every rank threw alike
}

TEST_CASE("the communicator agrees with the launcher", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  REQUIRE(comm->rank() == mpi_test::env().rank);
  REQUIRE(comm->size() == mpi_test::env().world_size);
  REQUIRE(comm->backend() == workbook::Backend::Mpi);
  REQUIRE(comm->device() == torch::Device(torch::kCPU));
  // Every rank sees the same ranks, each once.
  torch::Tensor ranks = comm->all_gather(torch::full({1}, comm->rank(), torch::kInt64)).flatten();
  REQUIRE(torch::equal(ranks, torch::arange(comm->size(), torch::kInt64)));
}

// Registered at one rank (a machine with one GPU runs world size 1 on NCCL);
// run it with as many ranks as GPUs for more.
TEST_CASE("the NCCL backend reduces CUDA tensors exactly", "[communicator][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  if (static_cast<int>(torch::cuda::device_count()) < mpi_test::env().world_size) {
    WARN("the NCCL backend needs one GPU per rank on this node: skipped (run it with as many ranks as GPUs)");
    return;
  }
  auto comm = workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                          workbook::CommunicatorOptions::from_environment());
  REQUIRE(comm->device().is_cuda());
  const int64_t n = comm->size();
  torch::Tensor tensor = exact_values(1000003, comm->rank() + 1, torch::kFloat32).to(comm->device());
  comm->all_reduce(tensor, ReduceOp::Sum);
  REQUIRE(torch::equal(tensor.cpu(), exact_values(1000003, n * (n + 1) / 2, torch::kFloat32)));
  torch::Tensor all = comm->all_gather(
      torch::full({3}, comm->rank(), torch::TensorOptions().dtype(torch::kFloat32).device(comm->device())));
  REQUIRE(torch::equal(all.cpu().select(1, 0), torch::arange(n, torch::kFloat32)));
  for (int root = 0; root < comm->size(); ++root) {
    torch::Tensor b = exact_values(1001, comm->rank() + 1, torch::kFloat64).to(comm->device());
    comm->broadcast(b, root);
    REQUIRE(torch::equal(b.cpu(), exact_values(1001, root + 1, torch::kFloat64)));
  }
  // NCCL's average multiplies by 1/n before summing: close to MPI's sum-then-divide, not bit-equal.
  torch::Tensor mean = exact_values(1000, 2 * comm->rank(), torch::kFloat32).to(comm->device());
  comm->all_reduce(mean, ReduceOp::Average);
  REQUIRE(torch::allclose(mean.cpu(), exact_values(1000, n - 1, torch::kFloat32)));
  torch::Tensor input = exact_values(n * 7, comm->rank() + 1, torch::kFloat32).to(comm->device());
  torch::Tensor output = torch::empty({7}, input.options());
  comm->reduce_scatter(input, output, ReduceOp::Sum);
  REQUIRE(torch::equal(output.cpu(), exact_values(n * 7, n * (n + 1) / 2, torch::kFloat32).narrow(0, comm->rank() * 7, 7)));
  // all_to_all: a send and a receive per peer in one group. With one GPU (the
  // GPU check runs one rank) the only peer is the rank itself, so this holds
  // the exchange with itself and the counts' check; uneven counts between
  // ranks are held over MPI by the tests above.
  for (const int salt : {0, 1, 2, 3}) {
    std::vector<int64_t> send_counts, recv_counts;
    std::vector<torch::Tensor> sent, expected;
    for (int r = 0; r < comm->size(); ++r) {
      send_counts.push_back(pair_count(comm->rank(), r, salt));
      recv_counts.push_back(pair_count(r, comm->rank(), salt));
      sent.push_back(pair_values(comm->rank(), r, salt, torch::kFloat32));
      expected.push_back(pair_values(r, comm->rank(), salt, torch::kFloat32));
    }
    torch::Tensor received = torch::full({torch::cat(expected).numel()}, -1.0f, tensor.options());
    comm->all_to_all(torch::cat(sent).to(comm->device()), send_counts, received, recv_counts);
    REQUIRE(torch::equal(received.cpu(), torch::cat(expected)));
  }
  comm->barrier();
}

TEST_CASE("split makes groups of ranks that talk among themselves, named in their messages", "[communicator][np1][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  // Even and odd ranks, numbered from the highest down (key = -rank).
  const int color = rank % 2;
  auto group = comm->split(color, -rank, fmt::format("parity group {}", color));
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == color) members.push_back(r);
  const int expected_rank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  INFO("rank " << rank << " of " << n << ": group rank " << group->rank() << " of " << group->size() << ", expected "
               << expected_rank << " of " << members.size());
  REQUIRE(mpi_test::all_ranks(group->size() == static_cast<int>(members.size()) && group->rank() == expected_rank));
  REQUIRE(mpi_test::all_ranks(comm->stats().count(workbook::CommOp::Split) == 1));
  // An all-reduce in the group sums its members only: Σ (r + 1) over them.
  torch::Tensor sum = torch::full({5}, static_cast<double>(rank + 1), torch::kFloat64);
  group->all_reduce(sum, ReduceOp::Sum);
  double expected = 0;
  for (int r : members) expected += r + 1;
  REQUIRE(mpi_test::all_ranks(torch::equal(sum, torch::full({5}, expected, torch::kFloat64))));
  // Point to point inside the group uses its own numbering.
  if (group->size() > 1) {
    torch::Tensor received = torch::empty({2}, torch::kInt64);
    group->exchange(torch::full({2}, int64_t{rank}, torch::kInt64), (group->rank() + 1) % group->size(), received,
                    (group->rank() + group->size() - 1) % group->size());
    const int from = members[static_cast<size_t>((group->rank() + group->size() - 1) % group->size())];
    REQUIRE(torch::equal(received, torch::full({2}, int64_t{from}, torch::kInt64)));
  }
  INFO("a group's label names the group and the job's rank: " << group->launch_env().label());
  REQUIRE(mpi_test::all_ranks(
      group->launch_env().label() ==
      fmt::format("rank {} of {} in parity group {} (rank {} of {} in the job)", expected_rank, members.size(), color, rank, n)));
  // The job's communicator goes on as before, and a group's collectives are checked within the group.
  torch::Tensor all = torch::ones({1}, torch::kFloat64);
  comm->all_reduce(all, ReduceOp::Sum);
  REQUIRE(mpi_test::all_ranks(all.item<double>() == n));
  REQUIRE(mpi_test::all_ranks(group->options().check_collectives == comm->options().check_collectives));
}
