// Tests for ex13.4: the two axes' counts against closed forms written from
// the header's contract, and the bytes kept for backward against the bytes
// Chapter 11's GPT keeps, counted from the tensors in this process.
#include <cmath>
#include <tuple>

#include "catch2_compat.hpp"

#include "plan_axes.hpp"
#include "workbook/tensor_bytes.hpp"

namespace {

ch13::AxesWorkload workload(int64_t layers, int64_t width, int64_t heads, int64_t context, int64_t sequences,
                            int64_t top_k) {
  ch13::AxesWorkload w;
  w.gpt.layers = layers;
  w.gpt.width = width;
  w.gpt.heads = heads;
  w.gpt.context = context;
  w.moe.top_k = top_k;
  w.sequences = sequences;
  return w;
}

// What a forward pass of workbook::Gpt over [N, T/cp] and its loss leave
// alive, counted (tensor_bytes.hpp).
int64_t kept_by_the_gpt(const ch13::AxesWorkload& w, int cp) {
  workbook::GptOptions options = w.gpt;
  options.context = w.gpt.context / cp;  // the rank's positions (their embeddings' table is not what is counted)
  torch::manual_seed(3);
  workbook::Gpt gpt(options);
  const torch::Tensor bytes = torch::randint(0, options.vocabulary, {w.sequences, options.context});
  const torch::Tensor targets = torch::randint(0, options.vocabulary, {w.sequences, options.context});
  const int64_t before = workbook::tensor_bytes(torch::kCPU).current;
  torch::Tensor loss = torch::nn::functional::cross_entropy(gpt->forward(bytes).flatten(0, 1), targets.flatten());
  const int64_t kept = workbook::tensor_bytes(torch::kCPU).current - before;
  loss.backward();
  return kept;
}

}  // namespace

TEST_CASE("ex13.4 the ring's bytes: each block of keys and values round the ring, and back with its gradients",
          "[ex13.4]") {
  for (const int cp : {1, 2, 3, 4, 8}) {
    for (const auto& [layers, width, sequences] : {std::tuple<int64_t, int64_t, int64_t>{4, 256, 1}, {2, 64, 3}}) {
      const ch13::AxesWorkload w = workload(layers, width, 4, 24 * 8, sequences, 2);
      const ch13::AxesPlan plan = ch13::plan_axes(w, {cp, 1});
      const double block = 2.0 * sequences * (24 * 8 / cp) * width * 4;  // k and v of a rank's positions, float32
      const double hops = cp == 1 ? 0 : (cp - 1) + (cp - 1) + cp;
      const double want = layers * block * hops;
      INFO("cp " << cp << ", " << layers << " layers of width " << width << ", " << sequences
                 << " sequence(s) of 192 positions: " << plan.ring_bytes << " ring bytes, expected " << want
                 << " (a block of k and v is " << block << " bytes)");
      CHECK(static_cast<double>(plan.ring_bytes) == want);
    }
  }
}

TEST_CASE("ex13.4 the all-to-all's bytes: rows to other ranks' experts and back, forward and backward", "[ex13.4]") {
  for (const int ep : {1, 2, 4, 8}) {
    for (const int cp : {1, 2}) {
      for (const int64_t k : {1, 2}) {
        const ch13::AxesWorkload w = workload(3, 32, 2, 64, 4, k);
        const ch13::AxesPlan plan = ch13::plan_axes(w, {cp, ep});
        const double rows = static_cast<double>(k) * 4 * (64 / cp) * (ep - 1) / ep;  // a layer's rows for others
        const double want = 4.0 * 3 * rows * 32 * 4;
        INFO("ep " << ep << ", cp " << cp << ", top-" << k << ", 4 sequences of 64 positions, 3 layers of width 32: "
                   << plan.all_to_all_bytes << " bytes, expected " << want << " (" << rows
                   << " rows a layer go to other ranks)");
        CHECK(std::abs(static_cast<double>(plan.all_to_all_bytes) - want) <= 4.0 * 3 * 32 * 4);
      }
    }
  }
}

TEST_CASE("ex13.4 the bytes kept for backward: within 20% of what the GPT keeps, counted", "[ex13.4]") {
  for (const auto& [layers, width, heads, context, sequences] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{4, 256, 4, 512, 1}, {2, 64, 2, 256, 4}}) {
    const ch13::AxesWorkload w = workload(layers, width, heads, context, sequences, 2);
    for (const int cp : {1, 2, 4}) {
      const double counted = static_cast<double>(kept_by_the_gpt(w, cp));
      const double planned = static_cast<double>(ch13::plan_axes(w, {cp, 1}).kept_bytes);
      INFO("cp " << cp << ", " << layers << " layers of width " << width << ", " << sequences << " sequence(s) of "
                 << context << " positions: planned " << planned / 1048576 << " MiB, counted "
                 << counted / 1048576 << " MiB (" << planned / counted << "×)");
      CHECK(planned >= 0.8 * counted);
      CHECK(planned <= 1.2 * counted);
    }
  }
}

TEST_CASE("ex13.4 a context that does not split is refused", "[ex13.4][given]") {
  const ch13::AxesWorkload w = workload(1, 32, 2, 100, 1, 1);
  REQUIRE_THROWS_WITH(ch13::plan_axes(w, {3, 1}), Catch::Matchers::ContainsSubstring("a context of 100 does not split into 3"));
}
