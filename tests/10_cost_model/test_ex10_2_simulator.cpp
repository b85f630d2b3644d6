// Tests for ex10.2: the simulator's clocks. Chapter 4's ring, run unchanged
// on simulated ranks, must take the time recorded from the reference; small
// schedules pin down what each clock may and may not do.
#include "catch2_compat.hpp"

#include "ring.hpp"
#include "simulator.hpp"
#include "workbook/errors.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

const ch10::Link kGigabit{25e-6, 8.0 / 1e9};  // 25 µs, 1 Gbit/s

torch::Tensor rank_values(int rank, int64_t count) {
  return torch::arange(count, torch::kFloat32).remainder(17) * static_cast<float>(rank + 1);
}

// Chapter 4's ring all-reduce of `count` floats on `p` simulated ranks, one
// message per step (each segment whole); its sums checked on every rank.
ch10::SimulatedRun simulated_ring(int p, int64_t count, const ch10::Link& link) {
  std::vector<torch::Tensor> results(p);
  const ch10::SimulatedRun run = ch10::simulate(p, link, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = rank_values(comm.rank(), count);
    ch04::RingOptions whole_segments;
    whole_segments.chunk_elements = count / p;
    ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, comm, whole_segments);
    results[comm.rank()] = buffer;
  });
  for (int r = 0; r < p; ++r) {
    CAPTURE(p, r);
    REQUIRE(torch::equal(results[r], rank_values(0, count) * static_cast<float>(p * (p + 1) / 2)));
  }
  return run;
}

}  // namespace

TEST_CASE("ex10.2 Chapter 4's ring all-reduce, simulated, takes the recorded time on every rank", "[ex10.2]") {
  // 60,000 floats, at 25 µs and 1 Gbit/s. Recorded from the reference
  // solution; any correct implementation gives these to within 1e-12.
  const int64_t count = 60000;
  const std::pair<int, double> recorded[] = {{2, 0.00197}, {3, 0.00266}, {4, 0.00303}, {5, 0.003272},
                                             {6, 0.00345}};
  for (const auto& [p, seconds] : recorded) {
    const ch10::SimulatedRun run = simulated_ring(p, count, kGigabit);
    CAPTURE(p, run.seconds(), seconds, run.messages);
    REQUIRE(run.seconds() == Approx(seconds).epsilon(1e-12));
    for (int r = 0; r < p; ++r) {
      CAPTURE(r, run.finish_s[r]);
      REQUIRE(run.finish_s[r] == Approx(seconds).epsilon(1e-12));
    }
  }
}

TEST_CASE("ex10.2 the ring on a unit α with no β counts its steps; on a unit β with no α, its bytes", "[ex10.2]") {
  // Recorded from the reference solution: {p, steps, bytes} of the ring
  // above's critical path (60,000 floats, 240,000 bytes).
  struct Recorded {
    int p;
    double steps, bytes;
  };
  for (const Recorded e : {Recorded{2, 2, 240000}, Recorded{3, 4, 320000}, Recorded{5, 8, 384000},
                           Recorded{6, 10, 400000}}) {
    const ch10::SimulatedRun steps = simulated_ring(e.p, 60000, ch10::Link{1.0, 0.0});
    const ch10::SimulatedRun bytes = simulated_ring(e.p, 60000, ch10::Link{0.0, 1.0});
    CAPTURE(e.p, steps.seconds(), bytes.seconds());
    REQUIRE(steps.seconds() == Approx(e.steps).epsilon(1e-12));
    REQUIRE(bytes.seconds() == Approx(e.bytes).epsilon(1e-12));
  }
}

TEST_CASE("ex10.2 a relay: a rank cannot pass on what it has not received", "[ex10.2]") {
  // 0 → 1 → 2 → 3, each forwarding what it got.
  const int64_t count = 250000;
  const ch10::SimulatedRun run = ch10::simulate(4, kGigabit, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = torch::full({count}, static_cast<float>(comm.rank()));
    if (comm.rank() > 0) comm.recv(buffer, comm.rank() - 1);
    if (comm.rank() < 3) comm.send(buffer, comm.rank() + 1);
    if (comm.rank() == 3) REQUIRE(buffer[0].item<float>() == 0.0f);
  });
  const double hop = kGigabit.seconds(count * 4.0);
  CAPTURE(run.finish_s);
  REQUIRE(run.finish_s[3] == Approx(3 * hop).epsilon(1e-12));
  REQUIRE(run.finish_s[1] == Approx(2 * hop).epsilon(1e-12));  // received at 1 hop, its own send arrived at 2
}

TEST_CASE("ex10.2 a rank that computes first receives late, and never goes back in time", "[ex10.2]") {
  const ch10::SimulatedRun run = ch10::simulate(2, kGigabit, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = torch::zeros({1000});
    if (comm.rank() == 0) comm.send(buffer, 1);
    if (comm.rank() == 1) {
      ch10::compute_for(comm, 1.0);  // long after the message arrived
      comm.recv(buffer, 0);
    }
  });
  CAPTURE(run.finish_s);
  REQUIRE(run.finish_s[0] == Approx(kGigabit.seconds(4000)).epsilon(1e-12));
  REQUIRE(run.finish_s[1] == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("ex10.2 an exchange travels while its rank computes, then wait() costs only what is left", "[ex10.2]") {
  // Each rank starts an exchange, computes, then waits for it: rank 0 for
  // half the exchange's time, rank 1 for twice it.
  const int64_t count = 250000;
  const double hop = kGigabit.seconds(count * 4.0);
  const ch10::SimulatedRun run = ch10::simulate(2, kGigabit, [&](workbook::Communicator& comm) {
    torch::Tensor out = torch::ones({count}), in = torch::zeros({count});
    workbook::PendingExchange exchange = comm.start_exchange(out, 1 - comm.rank(), in, 1 - comm.rank());
    ch10::compute_for(comm, comm.rank() == 0 ? 0.5 * hop : 2.0 * hop);
    exchange.wait();
  });
  CAPTURE(run.finish_s, hop);
  INFO("an exchange started before computing travels during it: a rank that computes for less than the "
       "exchange takes waits for the rest, one that computes longer does not wait at all");
  REQUIRE(run.finish_s[0] == Approx(hop).epsilon(1e-12));
  REQUIRE(run.finish_s[1] == Approx(2 * hop).epsilon(1e-12));
}

TEST_CASE("ex10.2 one link: two messages handed to it at once arrive one after the other", "[ex10.2]") {
  const int64_t count = 100000;
  std::vector<double> arrived(3);
  const ch10::SimulatedRun run = ch10::simulate(3, kGigabit, [&](workbook::Communicator& comm) {
    torch::Tensor out = torch::ones({count}), in = torch::zeros({count});
    if (comm.rank() == 0) {
      workbook::PendingExchange first = comm.start_exchange(out, 1, in, 1);
      torch::Tensor in2 = torch::zeros({count});
      workbook::PendingExchange second = comm.start_exchange(out, 2, in2, 2);
      first.wait();
      second.wait();
    } else {
      comm.exchange(out, 0, in, 0);
    }
  });
  const double hop = kGigabit.seconds(count * 4.0);
  CAPTURE(run.finish_s);
  // Rank 1 gets rank 0's first message at one hop; rank 2 the second at two:
  // it waited for the link.
  REQUIRE(run.finish_s[1] == Approx(hop).epsilon(1e-12));
  REQUIRE(run.finish_s[2] == Approx(2 * hop).epsilon(1e-12));
  REQUIRE(run.finish_s[0] == Approx(2 * hop).epsilon(1e-12));
}

TEST_CASE("ex10.2 the simulator's own refusals: a deadlock, a collective", "[ex10.2]") {
  // Each rank sends first, then receives: fine (sends are buffered). Then
  // both receive first: every rank waits, none for a message there.
  const ch10::SimulatedRun fine = ch10::simulate(2, kGigabit, [&](workbook::Communicator& comm) {
    torch::Tensor t = torch::zeros({10});
    comm.send(t, 1 - comm.rank());
    comm.recv(t, 1 - comm.rank());
  });
  REQUIRE(fine.seconds() == Approx(kGigabit.seconds(40)).epsilon(1e-12));
  REQUIRE_THROWS_WITH(ch10::simulate(2, kGigabit,
                                     [&](workbook::Communicator& comm) {
                                       torch::Tensor t = torch::zeros({10});
                                       comm.recv(t, 1 - comm.rank());
                                     }),
                      ContainsSubstring("that no rank will send"));
  REQUIRE_THROWS_WITH(ch10::simulate(2, kGigabit,
                                     [&](workbook::Communicator& comm) {
                                       torch::Tensor t = torch::zeros({10});
                                       comm.all_reduce(t, workbook::ReduceOp::Sum);
                                     }),
                      ContainsSubstring("point-to-point messages only"));
}
