// cost_model.hpp — Chapter 10: predict, then measure. A link is two numbers,
// α (the seconds every message costs, however small) and β (the seconds
// each byte costs). From them, and from a compute time per layer, a
// collective's time and a training step's time can be written down before
// anything runs, and held against what the emulated cluster measures.
//
//   ex10.1  fit_link          α and β from ping-pong timings, least squares;
//           fit_shaped_link   and from a shaped link's, whose burst is no line
//   ex10.4  collective_cost   a collective's cost in α's and bytes: ring,
//                             recursive doubling, Rabenseifner, binomial tree
//   ex10.2  (simulator.hpp)   an event simulator that runs Chapter 4's ring
//   ex10.5  (step_model.hpp)  a training step's time, per layout
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ch10 {

// A link in the α–β model: a message of n bytes takes α + n·β seconds from
// the moment it leaves to the moment it has arrived.
struct Link {
  double alpha_s = 0.0;          // seconds per message
  double beta_s_per_byte = 0.0;  // seconds per byte: 8 / (bits per second)
  double seconds(double bytes) const { return alpha_s + bytes * beta_s_per_byte; }
  double bits_per_s() const { return beta_s_per_byte > 0 ? 8.0 / beta_s_per_byte : 0.0; }
  // A link of `bits_per_s` with `alpha_s` per message.
  static Link of_rate(double bits_per_s, double alpha_s) { return {alpha_s, 8.0 / bits_per_s}; }
};

// One measured message: `bytes` moved one way in `seconds`.
struct Timing {
  int64_t bytes = 0;
  double seconds = 0.0;
};

// ---- ex10.1 -------------------------------------------------------------------
// Note: [fit in seconds, not in logarithms]
// The line t = α + n·β fitted by least squares to the timings as they are:
// minimise Σ (t_i − α − n_i·β)². Fitted to log t instead (a straight line
// on the log-log plot everyone draws), the small messages, whose times are
// all α, weigh as much as the large ones that alone carry β, and the errors
// are relative: the fit bends β towards whatever the latency-bound end
// wants. At least two distinct sizes, or a UserError; α is not clamped (a
// negative α says the timings are not a line, which the caller should see).
Link fit_link(const std::vector<Timing>& timings);

// The link the predictions use, from a ping-pong over one of the emulated
// cluster's shaped links (sizes from 1 byte to 4 MiB or more, each timed a
// few times, a few per cent of noise). Its shaper lets a burst of up to
// 64 KiB through at no rate after any pause (a link without a shaper has
// none), so a message costs about α + max(0, n − burst)·β: the timings are
// not one line, and fit_link through every size finds a negative α. The
// α–β model has no term for a burst. Return the α and β that predict both
// ends right: α what a small message costs, β what each byte of a large one
// costs. Which timings decide which is yours to choose.
Link fit_shaped_link(const std::vector<Timing>& timings);

// ---- ex10.4 -------------------------------------------------------------------
enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast };
enum class Algorithm { Ring, RecursiveDoubling, Rabenseifner, BinomialTree, ScatterAllGather };
const char* collective_name(Collective collective);
const char* algorithm_name(Algorithm algorithm);  // "ring", ..., "scatter_all_gather"
std::optional<Algorithm> algorithm_named(const std::string& name);

// A collective's cost in the α–β model, kept as its two terms (so that the
// crossover between two algorithms is algebra, not a search): `messages`
// α's on the critical path, and `bytes` β's.
struct Cost {
  double messages = 0.0;  // α's: the steps one after another, each one message deep
  double bytes = 0.0;     // bytes on the critical path, each charged β
  double seconds(const Link& link) const { return messages * link.alpha_s + bytes * link.beta_s_per_byte; }
};

// The cost of `collective` by `algorithm` on `ranks` ranks for a buffer of
// `bytes` bytes (the whole buffer each rank holds: for reduce-scatter the
// input, for all-gather the output), as its two terms: the α's on the
// critical path and the bytes one rank's critical path carries. The pairs
// are the programs of ex10.3 and Chapter 4:
//
//   ring                 reduce-scatter, all-gather, all-reduce (Chapter 4's)
//   recursive doubling   all-reduce
//   Rabenseifner         all-reduce
//   binomial tree        broadcast
//   scatter_all_gather   broadcast (the scatter as your ex10.3 sends it)
//
// Recursive doubling and Rabenseifner need p a power of two (Open MPI's
// versions fold the others into one: a UserError here). One rank costs
// nothing. Any other pair is a UserError naming both. The closed forms are
// the exercise: simulate() times each program at any p, on a link that
// counts only messages (α = 1 s, β = 0) or only bytes (α = 0, β = 1 s per
// byte); find the expression in p and n that every p agrees with.
Cost collective_cost(Collective collective, Algorithm algorithm, int64_t bytes, int ranks);

// Given: the size in bytes at which `first` and `second` cost the same on
// `link` (both costs are a + b·n: the crossover is the n where they meet),
// or none when they never do at a positive size.
std::optional<double> crossover_bytes(Collective collective, Algorithm first, Algorithm second, int ranks,
                                      const Link& link);

}  // namespace ch10
