// expert_mlp.cpp — ex13.3: the expert layer's forward, dispatch to combine.
#include "expert_mlp.hpp"

#include "group_ops.hpp"
#include "workbook/errors.hpp"

namespace ch13 {

torch::Tensor ExpertMlpImpl::forward(const torch::Tensor& h) {
  WB_ASSERT(h.dim() == 2 && h.size(1) == options.width, "ExpertMlp: h must be [tokens, {}], got {}", options.width,
            h.sizes());
  // BEGIN SOLUTION ex13.3
  const int ranks = comm->size();
  const int64_t top_k = options.top_k, experts = options.experts;
  const torch::Tensor x = norm(h);
  routing = route(router(x), top_k, expert_capacity(h.size(0), experts, top_k, options.capacity_factor));
  balancing_loss = load_balancing_loss(routing, *comm);

  // Note: [dispatch in expert order] The kept assignments, sorted by expert
  // (stable, so by token within an expert): an expert's owner is expert /
  // local_experts, so this is also rank order, and each rank's run is its
  // experts' runs one after another. Only the owner learns how many rows of
  // each of its experts come from each rank, in one small all-to-all of the
  // per-expert counts, before the rows move.
  const torch::Tensor kept = routing.kept.reshape({-1}).nonzero().squeeze(1);  // assignment ids: token·k + choice
  const torch::Tensor expert_of = routing.experts.reshape({-1}).index_select(0, kept);
  const torch::Tensor order = std::get<1>(expert_of.sort(/*stable=*/true, 0, /*descending=*/false));
  const torch::Tensor outgoing = kept.index_select(0, order);
  const torch::Tensor token = outgoing.div(top_k, "floor");
  const torch::Tensor per_expert = torch::bincount(expert_of, {}, experts).to(torch::kInt64);
  torch::Tensor arriving = torch::empty({experts}, per_expert.options());  // [ranks, local]: rank s's rows per expert of mine
  const std::vector<int64_t> locals(ranks, local_experts);
  comm->all_to_all(per_expert, locals, arriving, locals);
  const torch::Tensor send_per_rank = per_expert.view({ranks, local_experts}).sum(1);
  const torch::Tensor recv_per_rank = arriving.view({ranks, local_experts}).sum(1);
  const std::vector<int64_t> send_counts(send_per_rank.data_ptr<int64_t>(), send_per_rank.data_ptr<int64_t>() + ranks);
  const std::vector<int64_t> recv_counts(recv_per_rank.data_ptr<int64_t>(), recv_per_rank.data_ptr<int64_t>() + ranks);
  const torch::Tensor rows = exchange_rows(x.index_select(0, token), send_counts, recv_counts, *comm);

  // The rows arrive by rank, each rank's by expert: regroup them by expert,
  // run each expert once over all its rows, and put the outputs back in the
  // order the rows came, which is the order the exchange back needs.
  const torch::Tensor local_of_row =
      torch::repeat_interleave(torch::arange(local_experts).repeat({ranks}), arriving);
  const torch::Tensor by_expert = std::get<1>(local_of_row.sort(/*stable=*/true, 0, false));
  const torch::Tensor per_local = arriving.view({ranks, local_experts}).sum(0);
  const torch::Tensor grouped = rows.index_select(0, by_expert);
  std::vector<torch::Tensor> outputs;
  int64_t start = 0;
  for (int64_t j = 0; j < local_experts; ++j) {
    const int64_t count = per_local[j].item<int64_t>();
    const torch::Tensor mine = grouped.narrow(0, start, count);
    const torch::Tensor hidden = torch::gelu(torch::addmm(expand_bias[j], mine, expand_weight[j]));
    outputs.push_back(torch::addmm(contract_bias[j], hidden, contract_weight[j]));
    start += count;
  }
  const torch::Tensor computed = torch::cat(outputs).index_select(0, torch::argsort(by_expert));
  const torch::Tensor back = exchange_rows(computed, recv_counts, send_counts, *comm);

  // Combine: every kept assignment's output, weighted, onto its token; a
  // token with nothing kept gets nothing added and passes through.
  const torch::Tensor weight = routing.weights.reshape({-1}).index_select(0, outgoing).to(back.scalar_type());
  return h.index_add(0, token, back * weight.unsqueeze(1));
  // END SOLUTION
}

}  // namespace ch13
