// online_softmax.cpp — ex12.1: a row's attention from pieces of its keys.
#include "online_softmax.hpp"

#include <cmath>
#include <limits>

#include "workbook/errors.hpp"

namespace ch12 {

Partial attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& visible) {
  WB_ASSERT(q.dim() >= 2 && k.dim() == q.dim() && v.sizes() == k.sizes() && q.size(-1) == k.size(-1),
            "attend: q [..., rows, d], k and v [..., keys, d], got {}, {} and {}", q.sizes(), k.sizes(), v.sizes());
  WB_ASSERT(visible.dim() == 2 && visible.size(0) == q.size(-2) && visible.size(1) == k.size(-2),
            "attend: visible must be [rows, keys] = [{}, {}], got {}", q.size(-2), k.size(-2), visible.sizes());
  // BEGIN SOLUTION ex12.1
  // Note: [scores in float32 at least] A 16-bit exp(s − max) summed over
  // thousands of keys loses the small terms; float64 stays float64 (the
  // tests' oracle).
  const auto score_type = q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor scores =
      torch::matmul(q.to(score_type), k.to(score_type).transpose(-2, -1)).mul_(scale)
          .masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
  const torch::Tensor max = std::get<0>(scores.max(-1));
  // Note: [an empty row] Its max is −inf and s − max would be −inf − −inf =
  // NaN: shift it by 0 instead; every exp is then exp(−inf) = 0, its sum 0.
  const torch::Tensor shift = max.masked_fill(max.isinf(), 0.0);
  const torch::Tensor weights = (scores - shift.unsqueeze(-1)).exp_();
  const torch::Tensor sum = weights.sum(-1);
  const torch::Tensor out = torch::matmul(weights, v.to(score_type))
                                .div_(sum.clamp_min(std::numeric_limits<float>::min()).unsqueeze(-1));
  return {out.to(q.scalar_type()), max, sum};
  // END SOLUTION
}

Partial merge(const Partial& a, const Partial& b) {
  WB_ASSERT(a.max.sizes() == b.max.sizes() && a.out.sizes() == b.out.sizes(),
            "merge: two Partials of the same rows, got max {} and {}, out {} and {}", a.max.sizes(), b.max.sizes(),
            a.out.sizes(), b.out.sizes());
  // BEGIN SOLUTION ex12.1
  // Note: [rescale both] Each piece's sum and output are relative to its own
  // maximum. Bring both to the larger one: exp(max_a − max) ≤ 1, so nothing
  // overflows; the union's output is the two outputs weighted by their
  // share of the union's sum. A row empty in both keeps max −inf (its
  // factors are taken as 0, not exp(−inf − −inf) = NaN).
  const torch::Tensor max = torch::maximum(a.max, b.max);
  const torch::Tensor shift = max.masked_fill(max.isinf(), 0.0);
  const torch::Tensor weight_a = a.sum * (a.max - shift).exp();
  const torch::Tensor weight_b = b.sum * (b.max - shift).exp();
  const torch::Tensor sum = weight_a + weight_b;
  const torch::Tensor denominator = sum.clamp_min(std::numeric_limits<float>::min());
  const torch::Tensor share_a = (weight_a / denominator).unsqueeze(-1);
  const torch::Tensor share_b = (weight_b / denominator).unsqueeze(-1);
  const torch::Tensor out = a.out.to(share_a.scalar_type()) * share_a + b.out.to(share_b.scalar_type()) * share_b;
  return {out.to(a.out.scalar_type()), max, sum};
  // END SOLUTION
}

torch::Tensor log_sum_exp(const Partial& partial) { return partial.max + partial.sum.log(); }

}  // namespace ch12
