// Tests for ex13.3: the expert layer over the group against the whole
// layer in one process, every expert held (moe_cases.hpp, float64): outputs,
// dropped tokens, gradients, and what travels.
#include <algorithm>

#include "catch2_compat.hpp"

#include "expert_mlp.hpp"
#include "moe_cases.hpp"
#include "mpi_test.hpp"

namespace {

constexpr int64_t kWidth = 6, kHidden = 5;

// The layer on this rank, its weights the slices of `w` it holds.
ch13::ExpertMlp layer_from(const moe_cases::Weights& w, int64_t k, double factor, workbook::Communicator& comm) {
  ch13::MoeOptions options;
  options.width = kWidth;
  options.hidden = kHidden;
  options.experts = w.router.size(0);
  options.top_k = k;
  options.capacity_factor = factor;
  ch13::ExpertMlp layer(options, comm);
  layer->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const int64_t first = layer->first_expert, local = layer->local_experts;
  layer->norm->weight.copy_(w.norm_weight);
  layer->norm->bias.copy_(w.norm_bias);
  layer->router->weight.copy_(w.router);
  layer->expand_weight.copy_(w.expand_weight.narrow(0, first, local));
  layer->expand_bias.copy_(w.expand_bias.narrow(0, first, local));
  layer->contract_weight.copy_(w.contract_weight.narrow(0, first, local));
  layer->contract_bias.copy_(w.contract_bias.narrow(0, first, local));
  return layer;
}

// Every rank's tokens, alike on every rank: rank r has `tokens(r)`.
std::vector<torch::Tensor> every_ranks_tokens(int ranks, const std::function<int64_t(int)>& tokens, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> all;
  for (int r = 0; r < ranks; ++r) all.push_back(torch::randn({tokens(r), kWidth}, torch::kFloat64));
  return all;
}

}  // namespace

TEST_CASE("ex13.3 each rank's output is the whole layer's for its tokens; a token with nothing kept passes through",
          "[ex13.3][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size(), me = comm->rank();
  int64_t passed_through = 0, idle_experts = 0;  // summed over the cases, on this rank
  for (const int64_t per_rank : {1, 2}) {
    const moe_cases::Weights w = moe_cases::draw(kWidth, kHidden, per_rank * ranks, 60 + per_rank);
    for (const int64_t k : {1, 2}) {
      for (const double factor : {0.5, 1.0, 8.0}) {
        const auto all = every_ranks_tokens(ranks, [](int r) { return int64_t{r == 1 ? 0 : 5 + 4 * r}; }, 7 + k);
        ch13::ExpertMlp layer = layer_from(w, k, factor, *comm);
        const torch::Tensor out = layer->forward(all[me]);
        moe_cases::Routed routed;
        const torch::Tensor want = moe_cases::forward(all[me], w, k, factor, &routed);
        const torch::Tensor none_kept = routed.kept.logical_not().all(1);
        passed_through += none_kept.sum().item<int64_t>();
        std::vector<bool> used(w.router.size(0), false);  // experts that some rank's kept assignment reaches
        for (int r = 0; r < ranks; ++r) {
          moe_cases::Routed theirs;
          moe_cases::forward(all[r], w, k, factor, &theirs);
          const torch::Tensor reached = theirs.experts.masked_select(theirs.kept);
          for (int64_t i = 0; i < reached.numel(); ++i) used[reached[i].item<int64_t>()] = true;
        }
        idle_experts += std::count(used.begin(), used.end(), false);
        INFO("rank " << me << " of " << ranks << ", " << w.router.size(0) << " experts, top-" << k
                     << ", capacity factor " << factor << ", " << all[me].size(0)
                     << " tokens (rank 1 has none): the output differs from the one-process layer's by up to "
                     << (out.sizes() == want.sizes() ? moe_cases::max_difference(out, want) : -1.0)
                     << " (its shape " << out.sizes() << ")");
        REQUIRE(mpi_test::all_ranks(out.sizes() == want.sizes() && torch::allclose(out, want, 1e-10, 1e-12)));
        INFO("rank " << me << ": " << none_kept.sum().item<int64_t>()
                     << " token(s) had every assignment dropped; each must come out exactly as it went in");
        REQUIRE(mpi_test::all_ranks(torch::equal(out.index({none_kept}), all[me].index({none_kept}))));
      }
    }
  }
  torch::Tensor total = torch::tensor({passed_through, idle_experts});
  comm->all_reduce(total, workbook::ReduceOp::Sum);
  // The cases above do drop whole tokens, and leave some expert without a row.
  REQUIRE(total[0].item<int64_t>() > 0);
  REQUIRE(total[1].item<int64_t>() > 0);
}

TEST_CASE("ex13.3 gradients reach every rank's tokens, the replicated weights and each expert on its owner",
          "[ex13.3][np3]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size(), me = comm->rank();
  const int64_t k = 2;
  const double factor = 1.0;
  const moe_cases::Weights w = moe_cases::draw(kWidth, kHidden, 2 * ranks, 3);
  const auto all = every_ranks_tokens(ranks, [](int r) { return int64_t{4 + 3 * r}; }, 11);
  torch::manual_seed(12);
  std::vector<torch::Tensor> pulls;
  for (const auto& h : all) pulls.push_back(torch::randn(h.sizes(), torch::kFloat64));

  ch13::ExpertMlp layer = layer_from(w, k, factor, *comm);
  const torch::Tensor h = all[me].clone().requires_grad_();
  (layer->forward(h) * pulls[me]).sum().backward();

  // The one-process layer, every rank's tokens and every weight a leaf.
  moe_cases::Weights leaf = w;
  for (torch::Tensor* t : {&leaf.norm_weight, &leaf.norm_bias, &leaf.router, &leaf.expand_weight, &leaf.expand_bias,
                           &leaf.contract_weight, &leaf.contract_bias})
    *t = t->clone().requires_grad_();
  std::vector<torch::Tensor> hs;
  torch::Tensor loss = torch::zeros({}, torch::kFloat64);
  for (int r = 0; r < ranks; ++r) {
    hs.push_back(all[r].clone().requires_grad_());
    loss = loss + (moe_cases::forward(hs[r], leaf, k, factor) * pulls[r]).sum();
  }
  loss.backward();

  const auto summed = [&](const torch::Tensor& grad) {
    torch::Tensor s = grad.clone();
    comm->all_reduce(s, workbook::ReduceOp::Sum);
    return s;
  };
  const int64_t first = layer->first_expert, local = layer->local_experts;
  const std::vector<std::tuple<std::string, torch::Tensor, torch::Tensor>> checks = {
      {"the tokens h", h.grad(), hs[me].grad()},
      {"the LayerNorm's weight (summed over ranks)", summed(layer->norm->weight.grad()), leaf.norm_weight.grad()},
      {"the router (summed over ranks)", summed(layer->router->weight.grad()), leaf.router.grad()},
      {"this rank's experts' expand weights", layer->expand_weight.grad(), leaf.expand_weight.grad().narrow(0, first, local)},
      {"this rank's experts' expand biases", layer->expand_bias.grad(), leaf.expand_bias.grad().narrow(0, first, local)},
      {"this rank's experts' contract weights", layer->contract_weight.grad(),
       leaf.contract_weight.grad().narrow(0, first, local)},
      {"this rank's experts' contract biases", layer->contract_bias.grad(),
       leaf.contract_bias.grad().narrow(0, first, local)}};
  for (const auto& [what, got, want] : checks) {
    INFO("rank " << me << ": the gradient of " << what << " "
                 << (got.defined() ? "differs from the one-process layer's by up to " +
                                         std::to_string(moe_cases::max_difference(got, want))
                                   : std::string("is missing")));
    REQUIRE(mpi_test::all_ranks(got.defined() && torch::allclose(got, want, 1e-9, 1e-11)));
  }
}

TEST_CASE("ex13.3 the layer's balancing loss and routing are its call's, and only kept tokens travel",
          "[ex13.3][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size(), me = comm->rank();
  const int64_t k = 2;
  const double factor = 0.75;
  const moe_cases::Weights w = moe_cases::draw(kWidth, kHidden, 2 * ranks, 8);
  const auto all = every_ranks_tokens(ranks, [](int r) { return int64_t{6 + 2 * r}; }, 21);
  std::vector<moe_cases::Routed> everyone;
  for (int r = 0; r < ranks; ++r) {
    moe_cases::Routed routed;
    moe_cases::forward(all[r], w, k, factor, &routed);
    everyone.push_back(routed);
  }
  ch13::ExpertMlp layer = layer_from(w, k, factor, *comm);
  const workbook::CommStats before = comm->stats();
  layer->forward(all[me]);
  const workbook::CommStats after = comm->stats();
  const moe_cases::Routed& want = everyone[me];
  INFO("rank " << me << ": routing.kept is not set, or not the one-process layer's");
  REQUIRE(mpi_test::all_ranks(layer->routing.kept.defined() && torch::equal(layer->routing.kept, want.kept)));

  std::vector<torch::Tensor> probabilities, experts;
  int64_t received = 0;  // the kept assignments of every rank's tokens to this rank's experts
  for (const auto& routed : everyone) {
    probabilities.push_back(routed.probabilities);
    experts.push_back(routed.experts);
    const torch::Tensor mine = routed.kept & (routed.experts.div(2, "floor") == me);  // 2 experts a rank
    received += mine.sum().item<int64_t>();
  }
  moe_cases::Routed pooled;
  pooled.probabilities = torch::cat(probabilities);
  pooled.experts = torch::cat(experts);
  const double group_loss = moe_cases::balancing_loss(pooled).item<double>();
  const double got_loss = layer->balancing_loss.defined() ? layer->balancing_loss.item<double>() : -1.0;
  INFO("rank " << me << ": balancing_loss is " << got_loss << ", the group's is " << group_loss);
  REQUIRE(mpi_test::all_ranks(std::abs(got_loss - group_loss) < 1e-10));

  // What travels: this rank's kept rows out, the rows it received for its
  // experts back, and a few numbers per row or per expert to say which is which.
  const auto op = [](workbook::CommOp o) { return static_cast<int>(o); };
  const int64_t gathers = after.count(workbook::CommOp::AllGather) - before.count(workbook::CommOp::AllGather) +
                          after.count(workbook::CommOp::Broadcast) - before.count(workbook::CommOp::Broadcast);
  const int64_t moved = after.elements[op(workbook::CommOp::AllToAll)] - before.elements[op(workbook::CommOp::AllToAll)];
  const int64_t kept = want.kept.sum().item<int64_t>();
  const int64_t rows = (kept + received) * kWidth;
  const int64_t bound = (kept + received) * (kWidth + 1) + 2 * w.router.size(0) * ranks;
  INFO("rank " << me << ": " << gathers << " all-gather or broadcast call(s); " << moved
               << " elements handed to all-to-all, where this rank's " << kept << " kept rows out and the " << received
               << " rows it computed for its experts back are " << rows << " elements (allowed up to " << bound
               << " with the counts)");
  REQUIRE(mpi_test::all_ranks(gathers == 0 && moved > 0 && moved <= bound));
}
