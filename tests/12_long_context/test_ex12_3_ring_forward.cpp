// Tests for ex12.3: ring attention's output against causal attention over the
// whole sequence (float64), at 2, 3 and 4 ranks, for three layouts.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "ring_attention.hpp"
#include "ring_cases.hpp"

TEST_CASE("ex12.3 each rank's output is the whole sequence's causal attention at its positions", "[ex12.3][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  for (const int64_t T : {4 * cp, 6 * cp}) {
    const ring_cases::Whole w = ring_cases::whole_sequence(T, 30 + T);
    const torch::Tensor expected = ring_cases::whole_causal_attention(w.q, w.k, w.v);
    for (const auto& layout : ring_cases::layouts(T, cp)) {
      for (const bool overlap : {true, false}) {
        CAPTURE(cp, T, layout.name, overlap);
        const torch::Tensor held = layout.positions[comm->rank()];
        const torch::Tensor out =
            ch12::ring_attention(ring_cases::mine(w.q, held), ring_cases::mine(w.k, held),
                                 ring_cases::mine(w.v, held), layout.positions, *comm, ch12::RingOptions{overlap});
        const torch::Tensor want = ring_cases::mine(expected, held);
        INFO("rank " << comm->rank() << ": the output differs from the whole sequence's by up to "
                     << (out - want).abs().max().item<double>() << " (" << layout.name << " layout)");
        REQUIRE(mpi_test::all_ranks(out.sizes() == want.sizes() && torch::allclose(out, want, 1e-10, 1e-12)));
      }
    }
  }
}

TEST_CASE("ex12.3 the keys and values go round the ring: no collective, each block sent at most cp−1 times",
          "[ex12.3][np3]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  const int64_t T = 8 * cp;
  const ring_cases::Whole w = ring_cases::whole_sequence(T, 5);
  const auto layout = ring_cases::layouts(T, cp)[2];  // shuffled
  const torch::Tensor held = layout.positions[comm->rank()];
  const torch::Tensor q = ring_cases::mine(w.q, held), k = ring_cases::mine(w.k, held), v = ring_cases::mine(w.v, held);
  const workbook::CommStats before = comm->stats();
  ch12::ring_attention(q, k, v, layout.positions, *comm);
  const workbook::CommStats after = comm->stats();
  const int64_t collectives = after.collectives() - before.collectives();
  const int64_t sent = after.elements_sent() - before.elements_sent();
  const int64_t block = k.numel() + v.numel();
  INFO("rank " << comm->rank() << " of " << cp << ": " << collectives << " collective calls and " << sent
               << " elements sent point to point; its own keys and values are " << block
               << " elements, and passing cp − 1 blocks on is " << (cp - 1) * block);
  REQUIRE(mpi_test::all_ranks(collectives == 0 && sent <= (cp - 1) * block + 64));
}

TEST_CASE("ex12.3 float32 inputs give float32 outputs close to float64's", "[ex12.3]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  const int64_t T = 6 * cp;
  const ring_cases::Whole w = ring_cases::whole_sequence(T, 8);
  const torch::Tensor expected = ring_cases::whole_causal_attention(w.q, w.k, w.v);
  const auto layout = ring_cases::layouts(T, cp)[2];  // shuffled
  const torch::Tensor held = layout.positions[comm->rank()];
  const auto f32 = [&](const torch::Tensor& t) { return ring_cases::mine(t, held).to(torch::kFloat32); };
  const torch::Tensor out = ch12::ring_attention(f32(w.q), f32(w.k), f32(w.v), layout.positions, *comm);
  INFO("dtype " << out.scalar_type() << ", differs from float64's by up to "
                << (out.to(torch::kFloat64) - ring_cases::mine(expected, held)).abs().max().item<double>());
  REQUIRE(mpi_test::all_ranks(out.scalar_type() == torch::kFloat32 &&
                              torch::allclose(out.to(torch::kFloat64), ring_cases::mine(expected, held), 1e-4, 1e-5)));
}

TEST_CASE("ex12.3 a ring of one rank is causal attention, forward and backward", "[ex12.3]") {
  auto world = mpi_test::communicator();
  const auto alone = world->split(world->rank(), 0, "a ring of one");
  const int64_t T = 10;
  const ring_cases::Whole w = ring_cases::whole_sequence(T, 9);
  const torch::Tensor q = w.q.clone().requires_grad_(true), k = w.k.clone().requires_grad_(true),
                      v = w.v.clone().requires_grad_(true);
  const torch::Tensor out = ch12::ring_attention(q, k, v, torch::arange(T, torch::kInt64).view({1, T}), *alone);
  out.backward(w.upstream);
  const torch::Tensor q2 = w.q.clone().requires_grad_(true), k2 = w.k.clone().requires_grad_(true),
                      v2 = w.v.clone().requires_grad_(true);
  const torch::Tensor want = ring_cases::whole_causal_attention(q2, k2, v2);
  want.backward(w.upstream);
  INFO("the output differs from causal attention's by up to " << (out - want).abs().max().item<double>());
  REQUIRE(mpi_test::all_ranks(torch::allclose(out, want, 1e-10, 1e-12)));
  INFO("the gradients of q, k and v differ by up to " << (q.grad() - q2.grad()).abs().max().item<double>() << ", "
                                                       << (k.grad() - k2.grad()).abs().max().item<double>() << ", "
                                                       << (v.grad() - v2.grad()).abs().max().item<double>());
  REQUIRE(mpi_test::all_ranks(torch::allclose(q.grad(), q2.grad(), 1e-9, 1e-11) &&
                              torch::allclose(k.grad(), k2.grad(), 1e-9, 1e-11) &&
                              torch::allclose(v.grad(), v2.grad(), 1e-9, 1e-11)));
}
