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
  WB_NOT_IMPLEMENTED("ex12.1");  // TODO(ex12.1): your code here
}

Partial merge(const Partial& a, const Partial& b) {
  WB_ASSERT(a.max.sizes() == b.max.sizes() && a.out.sizes() == b.out.sizes(),
            "merge: two Partials of the same rows, got max {} and {}, out {} and {}", a.max.sizes(), b.max.sizes(),
            a.out.sizes(), b.out.sizes());
  WB_NOT_IMPLEMENTED("ex12.1");  // TODO(ex12.1): your code here
}

torch::Tensor log_sum_exp(const Partial& partial) { return partial.max + partial.sum.log(); }

}  // namespace ch12
