// ring_attention.cpp — ex12.3: ring attention, forward and backward.
#include "ring_attention.hpp"

#include <cmath>

#include "autograd_comm.hpp"  // Chapter 5's: the Communicator kept in an autograd context
#include "workbook/errors.hpp"

namespace ch12 {
// BEGIN SOLUTION NOTE ex12.3

namespace {

// A run of consecutive positions: indices [first, first + length) of a
// rank's block, holding positions p, p + 1, ..., p + length − 1.
struct Run {
  int64_t first, length;
};

std::vector<Run> runs_of(const torch::Tensor& positions) {
  const auto held = positions.contiguous();
  const int64_t* p = held.data_ptr<int64_t>();
  std::vector<Run> runs;
  for (int64_t i = 0; i < held.numel(); ++i) {
    if (i > 0 && p[i] == p[i - 1] + 1) ++runs.back().length;
    else runs.push_back({i, 1});
  }
  return runs;
}

// Which keys of the run `keys` of `theirs` each query of the run `rows` of
// `mine` sees: [rows, keys], true where the key's position ≤ the query's.
torch::Tensor visible_between(const torch::Tensor& mine, const Run& rows, const torch::Tensor& theirs,
                              const Run& keys) {
  return mine.narrow(0, rows.first, rows.length).unsqueeze(1) >= theirs.narrow(0, keys.first, keys.length).unsqueeze(0);
}

}  // namespace
// END SOLUTION NOTE

torch::Tensor RingAttention::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                     const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& positions,
                                     workbook::Communicator* comm, RingOptions options) {
  WB_ASSERT(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
            "ring_attention: q, k and v of one shape [N, heads, T/cp, head_size], got {}, {} and {}", q.sizes(),
            k.sizes(), v.sizes());
  WB_ASSERT(positions.dim() == 2 && positions.size(0) == comm->size() && positions.size(1) == q.size(2),
            "ring_attention: positions must be [cp, T/cp] = [{}, {}], got {}", comm->size(), q.size(2),
            positions.sizes());
  ch05::save_communicator(ctx, comm);
  ctx->saved_data["overlap"] = options.overlap;
  // BEGIN SOLUTION ex12.3
  // Note: [the ring's schedule] At step s rank r holds the keys and values
  // of rank (r − s) mod cp: it computes their Partial while the block
  // travels on to r + 1 and the next arrives from r − 1. cp − 1 exchanges;
  // the last block is not sent on.
  // Note: [the mask from global positions] Which keys a query sees depends
  // on where both sit in the whole sequence, not in their blocks: position
  // i sees j ≤ i.
  // Note: [skip what the mask hides] A block is cut into runs of
  // consecutive positions (a split's chunks); a pair of runs the mask hides
  // entirely is never computed. Computing it and masking it would give every
  // rank of the balanced split the work of whole blocks, and the balance
  // would buy nothing.
  const int cp = comm->size();
  const int rank = comm->rank();
  const int next = (rank + 1) % cp;
  const int previous = (rank + cp - 1) % cp;
  const torch::Tensor mine = positions[rank];
  const std::vector<Run> query_runs = runs_of(mine);
  std::vector<Partial> partials(query_runs.size());
  torch::Tensor block = torch::stack({k, v}).contiguous();  // travels as one message
  for (int step = 0; step < cp; ++step) {
    const int owner = (rank + cp - step) % cp;
    torch::Tensor arriving;
    workbook::PendingExchange exchange;
    if (step + 1 < cp) {
      arriving = torch::empty_like(block);
      exchange = comm->start_exchange(block, next, arriving, previous);
      if (!options.overlap) exchange.wait();
    }
    const torch::Tensor theirs = positions[owner];
    for (size_t i = 0; i < query_runs.size(); ++i) {
      const Run& rows = query_runs[i];
      for (const Run& keys : runs_of(theirs)) {
        const torch::Tensor visible = visible_between(mine, rows, theirs, keys);
        if (!visible.any().item<bool>()) continue;
        const Partial part = attend(q.narrow(2, rows.first, rows.length), block[0].narrow(2, keys.first, keys.length),
                                    block[1].narrow(2, keys.first, keys.length), visible);
        partials[i] = partials[i].out.defined() ? merge(partials[i], part) : part;
      }
    }
    if (exchange.pending()) exchange.wait();
    if (step + 1 < cp) block = arriving;
  }
  // Every run saw at least itself: each Partial is defined.
  std::vector<torch::Tensor> outs, sums;
  for (const Partial& partial : partials) {
    outs.push_back(partial.out);
    sums.push_back(log_sum_exp(partial));
  }
  const torch::Tensor out = torch::cat(outs, 2);
  // Backward recomputes each block's softmax from one number per row.
  ctx->save_for_backward({q, k, v, positions, out, torch::cat(sums, 2)});
  return out;
  // END SOLUTION
}

torch::autograd::variable_list RingAttention::backward(torch::autograd::AutogradContext* ctx,
                                                       torch::autograd::variable_list grad_outputs) {
  workbook::Communicator& comm = ch05::saved_communicator(ctx);
  const bool overlap = ctx->saved_data.at("overlap").toBool();
  // BEGIN SOLUTION ex12.3
  // Note: [a softmax's backward from its log-sum-exp] With P = exp(S − lse)
  // (the forward's probabilities, recomputed block by block from one number
  // per row) and D = Σ_d dO ∘ O per row: dV = Pᵀ·dO, dS = P ∘ (dO·Vᵀ − D),
  // dQ = dS·K / √d, dK = dSᵀ·Q / √d. D needs no other block: it is the row
  // sum of the output's gradient times the output.
  // Note: [gradients that follow their block] The keys and values go round
  // as in forward. Each block's dK and dV travel one hop behind it: rank r
  // adds its share to what arrives from r − 1 and sends the sum on. After
  // cp hops a block's gradient, complete, is back at its owner.
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &positions = saved[3], &out = saved[4],
                      &lse = saved[5];
  const int cp = comm.size();
  const int rank = comm.rank();
  const int next = (rank + 1) % cp;
  const int previous = (rank + cp - 1) % cp;
  const auto type = lse.scalar_type();
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor q_f = q.to(type), grad_out = grad_outputs[0].to(type);
  const torch::Tensor row_dot = (grad_out * out.to(type)).sum(-1, /*keepdim=*/true);
  const torch::Tensor mine = positions[rank];
  const std::vector<Run> query_runs = runs_of(mine);
  torch::Tensor grad_q = torch::zeros_like(q_f);
  torch::Tensor block = torch::stack({k, v}).contiguous();
  torch::Tensor block_grad;       // the block held now: the sum of the ranks before this one
  torch::Tensor arriving_grad;    // the next block's, on its way
  workbook::PendingExchange grad_exchange;
  for (int step = 0; step < cp; ++step) {
    const int owner = (rank + cp - step) % cp;
    torch::Tensor arriving;
    workbook::PendingExchange exchange;
    if (step + 1 < cp) {
      arriving = torch::empty_like(block);
      exchange = comm.start_exchange(block, next, arriving, previous);
      if (!overlap) exchange.wait();
    }
    torch::Tensor share = torch::zeros({2, q.size(0), q.size(1), q.size(2), q.size(3)}, q_f.options());
    const torch::Tensor theirs = positions[owner];
    for (const Run& rows : query_runs) {
      for (const Run& keys : runs_of(theirs)) {
        const torch::Tensor visible = visible_between(mine, rows, theirs, keys);
        if (!visible.any().item<bool>()) continue;
        const torch::Tensor q_rows = q_f.narrow(2, rows.first, rows.length);
        const torch::Tensor grad_rows = grad_out.narrow(2, rows.first, rows.length);
        const torch::Tensor k_f = block[0].narrow(2, keys.first, keys.length).to(type);
        const torch::Tensor v_f = block[1].narrow(2, keys.first, keys.length).to(type);
        const torch::Tensor scores = torch::matmul(q_rows, k_f.transpose(-2, -1)).mul_(scale);
        const torch::Tensor probabilities = (scores - lse.narrow(2, rows.first, rows.length).unsqueeze(-1))
                                                .exp_()
                                                .masked_fill_(visible.logical_not(), 0.0);
        share[1].narrow(2, keys.first, keys.length).add_(torch::matmul(probabilities.transpose(-2, -1), grad_rows));
        const torch::Tensor row_terms = row_dot.narrow(2, rows.first, rows.length);
        const torch::Tensor grad_scores = probabilities * (torch::matmul(grad_rows, v_f.transpose(-2, -1)) - row_terms);
        grad_q.narrow(2, rows.first, rows.length).add_(torch::matmul(grad_scores, k_f), scale);
        share[0].narrow(2, keys.first, keys.length).add_(torch::matmul(grad_scores.transpose(-2, -1), q_rows), scale);
      }
    }
    if (cp == 1) {  // a ring of one: the block's gradient is home already
      block_grad = share;
      break;
    }
    if (step > 0) {
      grad_exchange.wait();
      share.add_(arriving_grad);
    }
    arriving_grad = torch::empty_like(share);
    block_grad = share;
    grad_exchange = comm.start_exchange(block_grad, next, arriving_grad, previous);
    if (exchange.pending()) exchange.wait();
    if (step + 1 < cp) block = arriving;
  }
  if (cp == 1) arriving_grad = block_grad;
  grad_exchange.wait();  // this rank's own block, every rank's share summed
  return {grad_q.to(q.scalar_type()), arriving_grad[0].to(k.scalar_type()), arriving_grad[1].to(v.scalar_type()),
          torch::Tensor(), torch::Tensor(), torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch12
