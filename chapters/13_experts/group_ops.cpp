// group_ops.cpp — the differentiable collectives of group_ops.hpp.
#include "group_ops.hpp"

#include <numeric>

#include "autograd_comm.hpp"

namespace ch13 {
namespace {

class SumOverGroup : public torch::autograd::Function<SumOverGroup> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& tensor,
                               workbook::Communicator* comm) {
    ch05::save_communicator(ctx, comm);
    torch::Tensor sum = tensor.detach().clone().contiguous();
    comm->all_reduce(sum, workbook::ReduceOp::Sum);
    return sum;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    torch::Tensor grad = grad_outputs[0].contiguous().clone();
    ch05::saved_communicator(ctx).all_reduce(grad, workbook::ReduceOp::Sum);
    return {grad, torch::Tensor()};
  }
};

// The rows of `rows` [Σ send, ...] to their ranks; elements, not rows, for
// the Communicator.
torch::Tensor move_rows(const torch::Tensor& rows, const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& recv_counts, workbook::Communicator& comm) {
  int64_t row_size = 1;  // rows[0] would not exist on a rank with none
  for (int64_t d = 1; d < rows.dim(); ++d) row_size *= rows.size(d);
  std::vector<int64_t> send_elements, recv_elements;
  for (const int64_t c : send_counts) send_elements.push_back(c * row_size);
  for (const int64_t c : recv_counts) recv_elements.push_back(c * row_size);
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  torch::Tensor received = torch::empty(shape, rows.options());
  comm.all_to_all(rows.contiguous(), send_elements, received, recv_elements);
  return received;
}

class ExchangeRows : public torch::autograd::Function<ExchangeRows> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts,
                               workbook::Communicator* comm) {
    ch05::save_communicator(ctx, comm);
    ctx->saved_data["send"] = send_counts;
    ctx->saved_data["recv"] = recv_counts;
    return move_rows(rows.detach(), send_counts, recv_counts, *comm);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const std::vector<int64_t> sent = ctx->saved_data["send"].toIntVector();
    const std::vector<int64_t> received = ctx->saved_data["recv"].toIntVector();
    return {move_rows(grad_outputs[0], received, sent, ch05::saved_communicator(ctx)), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sum_over_group(const torch::Tensor& tensor, workbook::Communicator& comm) {
  return SumOverGroup::apply(tensor, &comm);
}

torch::Tensor exchange_rows(const torch::Tensor& rows, const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts, workbook::Communicator& comm) {
  return ExchangeRows::apply(rows, send_counts, recv_counts, &comm);
}

}  // namespace ch13
