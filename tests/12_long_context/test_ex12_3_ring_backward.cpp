// Tests for ex12.3: ring attention's gradients against autograd through
// causal attention over the whole sequence (float64), at 2, 3 and 4 ranks.
#include <fmt/format.h>

#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "ring_attention.hpp"
#include "ring_cases.hpp"

namespace {

struct Grads {
  torch::Tensor q, k, v;
};

// The whole sequence's gradients for an upstream gradient `upstream`.
Grads whole_grads(const ring_cases::Whole& w) {
  const torch::Tensor q = w.q.clone().requires_grad_(true), k = w.k.clone().requires_grad_(true),
                      v = w.v.clone().requires_grad_(true);
  ring_cases::whole_causal_attention(q, k, v).backward(w.upstream);
  return {q.grad(), k.grad(), v.grad()};
}

}  // namespace

TEST_CASE("ex12.3 each rank's gradients of q, k and v are the whole sequence's at its positions",
          "[ex12.3][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  for (const int64_t T : {4 * cp, 6 * cp}) {
    const ring_cases::Whole w = ring_cases::whole_sequence(T, 40 + T);
    const Grads expected = whole_grads(w);
    for (const auto& layout : ring_cases::layouts(T, cp)) {
      for (const bool overlap : {true, false}) {
        CAPTURE(cp, T, layout.name, overlap);
        const torch::Tensor held = layout.positions[comm->rank()];
        const torch::Tensor q = ring_cases::mine(w.q, held).requires_grad_(true);
        const torch::Tensor k = ring_cases::mine(w.k, held).requires_grad_(true);
        const torch::Tensor v = ring_cases::mine(w.v, held).requires_grad_(true);
        ch12::ring_attention(q, k, v, layout.positions, *comm, ch12::RingOptions{overlap})
            .backward(ring_cases::mine(w.upstream, held));
        for (const auto& [name, got, want] : {std::tuple{"q", q.grad(), expected.q}, std::tuple{"k", k.grad(), expected.k},
                                              std::tuple{"v", v.grad(), expected.v}}) {
          const torch::Tensor mine = ring_cases::mine(want, held);
          const bool same = got.defined() && got.sizes() == mine.sizes() && torch::allclose(got, mine, 1e-9, 1e-11);
          INFO("rank " << comm->rank() << ": the gradient of " << name
                       << (got.defined() ? " differs from the whole sequence's by up to " +
                                               fmt::format("{:.3g}", (got - mine).abs().max().item<double>())
                                         : std::string(" is missing"))
                       << " (" << layout.name << " layout)");
          REQUIRE(mpi_test::all_ranks(same));
        }
      }
    }
  }
}

TEST_CASE("ex12.3 backward gathers nothing: no collective, a bounded number of elements sent", "[ex12.3][np3]") {
  auto comm = mpi_test::communicator();
  const int cp = comm->size();
  const int64_t T = 8 * cp;
  const ring_cases::Whole w = ring_cases::whole_sequence(T, 6);
  const auto layout = ring_cases::layouts(T, cp)[2];  // shuffled
  const torch::Tensor held = layout.positions[comm->rank()];
  const torch::Tensor q = ring_cases::mine(w.q, held).requires_grad_(true);
  const torch::Tensor k = ring_cases::mine(w.k, held).requires_grad_(true);
  const torch::Tensor v = ring_cases::mine(w.v, held).requires_grad_(true);
  const torch::Tensor out = ch12::ring_attention(q, k, v, layout.positions, *comm);
  const workbook::CommStats before = comm->stats();
  out.backward(ring_cases::mine(w.upstream, held));
  const workbook::CommStats after = comm->stats();
  const int64_t collectives = after.collectives() - before.collectives();
  const int64_t sent = after.elements_sent() - before.elements_sent();
  const int64_t block = k.numel() + v.numel();
  INFO("rank " << comm->rank() << " of " << cp << ": " << collectives << " collective calls and " << sent
               << " elements sent point to point in backward; a block of keys and values is " << block
               << " elements, and " << 2 * cp << " blocks' worth is " << 2 * cp * block);
  REQUIRE(mpi_test::all_ranks(collectives == 0 && sent <= 2 * cp * block + 64));
}
