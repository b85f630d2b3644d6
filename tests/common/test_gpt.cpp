// The text corpus and the small GPT: the corpus is found, checked and split;
// the model is causal, ties its embedding, refuses sizes it cannot build, and
// learns; causal attention's fused path and FusedAdam against the unfused ones.
#include "catch2_compat.hpp"
#include <ATen/CPUGeneratorImpl.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <unistd.h>

#include "workbook/errors.hpp"
#include "workbook/fused_adam.hpp"
#include "workbook/gpt.hpp"
#include "workbook/text_corpus.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;

namespace {

workbook::GptOptions small_options() {
  workbook::GptOptions options;
  options.layers = 2;
  options.width = 32;
  options.heads = 4;
  options.context = 16;
  return options;
}

}  // namespace

TEST_CASE("the corpus: found, its checksum checked, split into training and validation text", "[corpus]") {
  const fs::path file = workbook::find_text_corpus(std::nullopt);
  const workbook::TextCorpus corpus = workbook::load_text_corpus(file);
  INFO("the Jargon File 4.4.7: 1,681,817 bytes, the last tenth held out");
  REQUIRE(corpus.train.numel() + corpus.validation.numel() == 1681817);
  REQUIRE(corpus.validation.numel() == 168181);
  REQUIRE(corpus.train.scalar_type() == torch::kUInt8);
  const std::string start(static_cast<const char*>(corpus.train.data_ptr()), 64);
  REQUIRE_THAT(start, ContainsSubstring("The Jargon File"));
}

TEST_CASE("the corpus: a changed file, a missing one and a bad share are refused with the file named", "[corpus]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("wb-corpus-{}", ::getpid());
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "jargon.txt", std::ios::binary);
    out << "not the Jargon File, but long enough to split into two parts";
  }
  REQUIRE(workbook::find_text_corpus(dir) == dir / "jargon.txt");
  REQUIRE_THROWS_WITH(workbook::load_text_corpus(dir / "jargon.txt"), ContainsSubstring("checksum mismatch") &&
                                                                        ContainsSubstring("jargon.txt"));
  const workbook::TextCorpus unchecked = workbook::load_text_corpus(dir / "jargon.txt", 0.25, false);
  REQUIRE(unchecked.validation.numel() == 15);
  REQUIRE_THROWS_WITH(workbook::load_text_corpus(dir / "jargon.txt", 1.0, false), ContainsSubstring("(0, 1)"));
  fs::remove(dir / "jargon.txt");
  REQUIRE_THROWS_WITH(workbook::find_text_corpus(dir),
                      ContainsSubstring("jargon.txt(.gz)") && ContainsSubstring(dir.string()) &&
                          ContainsSubstring("apt-get install jargon-text"));
  fs::remove_all(dir);
}

TEST_CASE("sample_windows: targets are the inputs shifted by one byte, drawn from the generator", "[corpus]") {
  const torch::Tensor text = torch::arange(100, torch::kInt64).to(torch::kUInt8);
  torch::Generator a = at::make_generator<at::CPUGeneratorImpl>(7);
  torch::Generator b = at::make_generator<at::CPUGeneratorImpl>(7);
  const workbook::TextBatch batch = workbook::sample_windows(text, 8, 10, a);
  REQUIRE(batch.inputs.sizes() == torch::IntArrayRef({8, 10}));
  REQUIRE(batch.inputs.scalar_type() == torch::kInt64);
  REQUIRE(torch::equal(batch.targets, batch.inputs + 1));  // the text counts up
  REQUIRE(torch::equal(batch.inputs.select(1, 1), batch.inputs.select(1, 0) + 1));
  REQUIRE(batch.targets.max().item<int64_t>() <= 99);
  REQUIRE(torch::equal(workbook::sample_windows(text, 8, 10, b).inputs, batch.inputs));
  REQUIRE_THROWS_AS(workbook::sample_windows(text, 1, 100, a), workbook::UserError);
}

TEST_CASE("the GPT refuses sizes it cannot build, naming them", "[gpt]") {
  workbook::GptOptions options = small_options();
  options.heads = 5;
  REQUIRE_THROWS_WITH(workbook::Gpt(options), ContainsSubstring("width 32") && ContainsSubstring("5 heads"));
  options = small_options();
  options.layers = 0;
  REQUIRE_THROWS_AS(workbook::Gpt(options), workbook::UserError);
  workbook::Gpt model(small_options());
  REQUIRE_THROWS_WITH(model->forward(torch::zeros({1, 17}, torch::kInt64)), ContainsSubstring("context"));
}

TEST_CASE("the GPT is causal: no position's logits depend on a later byte", "[gpt]") {
  torch::manual_seed(1);
  workbook::Gpt model(small_options());
  model->eval();
  torch::Tensor bytes = torch::randint(0, 256, {2, 16}, torch::kInt64);
  const torch::Tensor before = model->forward(bytes);
  REQUIRE(before.sizes() == torch::IntArrayRef({2, 16, 256}));
  bytes.index_put_({torch::indexing::Slice(), 9}, (bytes.select(1, 9) + 1) % 256);
  const torch::Tensor after = model->forward(bytes);
  using torch::indexing::Slice;
  INFO("positions 0-8 unchanged, position 9 on changed");
  REQUIRE(torch::equal(before.index({Slice(), Slice(0, 9)}), after.index({Slice(), Slice(0, 9)})));
  REQUIRE_FALSE(torch::allclose(before.index({Slice(), 9}), after.index({Slice(), 9})));
}

TEST_CASE("causal attention: the fused float32 path computes the unfused one, forward and backward", "[gpt]") {
  // The oracles run in float64, on the unfused path; this holds the fast one to it.
  torch::manual_seed(3);
  for (const int64_t positions : {1, 5, 16, 128, 131}) {
    auto inputs = [&] { return torch::randn({2, 3, positions, 8}, torch::kFloat64); };
    const torch::Tensor q64 = inputs(), k64 = inputs(), v64 = inputs(), upstream = inputs();
    std::vector<torch::Tensor> outputs, gradients;
    for (const bool fused : {true, false}) {
      torch::Tensor q = q64.to(torch::kFloat32).requires_grad_(true), k = k64.to(torch::kFloat32).requires_grad_(true),
                    v = v64.to(torch::kFloat32).requires_grad_(true);
      const torch::Tensor out = fused ? workbook::causal_attention(q, k, v) : workbook::masked_causal_attention(q, k, v);
      out.backward(upstream.to(torch::kFloat32));
      outputs.push_back(out.detach());
      gradients.push_back(torch::cat({q.grad().flatten(), k.grad().flatten(), v.grad().flatten()}));
    }
    INFO(positions << " positions: largest difference, outputs "
                   << (outputs[0] - outputs[1]).abs().max().item<double>() << ", gradients "
                   << (gradients[0] - gradients[1]).abs().max().item<double>());
    REQUIRE(torch::allclose(outputs[0], outputs[1], 1e-5, 1e-5));
    REQUIRE(torch::allclose(gradients[0], gradients[1], 1e-4, 1e-5));
  }
}

TEST_CASE("the GPT ties its output layer to its token embedding", "[gpt]") {
  torch::manual_seed(2);
  workbook::Gpt model(small_options());
  int64_t count = 0;
  for (const torch::Tensor& p : model->parameters()) count += p.numel();
  // 256·32 tokens + 16·32 positions + 2 blocks of (2 LayerNorms 4·32, qkv 32·96 + 96,
  // projection 32·32 + 32, expand 32·128 + 128, contract 128·32 + 32) + final LayerNorm 2·32
  REQUIRE(count == 256 * 32 + 16 * 32 + 2 * (4 * 32 + 32 * 96 + 96 + 32 * 32 + 32 + 32 * 128 + 128 + 128 * 32 + 32) +
                       2 * 32);
  const torch::Tensor bytes = torch::randint(0, 256, {2, 8}, torch::kInt64);
  model->loss(bytes, torch::randint(0, 256, {2, 8}, torch::kInt64)).backward();
  INFO("the embedding's gradient has rows for bytes never read: the output layer's use of it");
  const torch::Tensor grad = model->tokens->weight.grad();
  const torch::Tensor unread_rows =
      torch::ones({256}, torch::kBool).index_put_({bytes.flatten()}, torch::tensor(false));
  REQUIRE(grad.index({unread_rows}).abs().sum().item<double>() > 0.0);
}

TEST_CASE("the GPT learns the corpus: 60 steps lower the validation loss from ln 256", "[gpt][corpus]") {
  torch::manual_seed(3);
  const workbook::TextCorpus corpus = workbook::load_text_corpus(workbook::find_text_corpus(std::nullopt));
  workbook::Gpt model(small_options());
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(3e-3));
  torch::Generator draws = at::make_generator<at::CPUGeneratorImpl>(5);
  const workbook::TextBatch held_out = workbook::sample_windows(corpus.validation, 64, 16, draws);
  auto validation_loss = [&] {
    torch::NoGradGuard no_grad;
    return model->loss(held_out.inputs, held_out.targets).item<double>();
  };
  const double first = validation_loss();
  CHECK(std::abs(first - std::log(256.0)) < 0.1);  // small initial weights: nearly uniform
  for (int step = 0; step < 60; ++step) {
    const workbook::TextBatch batch = workbook::sample_windows(corpus.train, 32, 16, draws);
    optimizer.zero_grad();
    model->loss(batch.inputs, batch.targets).backward();
    optimizer.step();
  }
  const double last = validation_loss();
  INFO("validation loss " << first << " → " << last);
  REQUIRE(last < first - 1.5);
  torch::Generator sampling = at::make_generator<at::CPUGeneratorImpl>(9);
  torch::Generator again = at::make_generator<at::CPUGeneratorImpl>(9);
  const std::string text = model->generate("hacker", 20, 1.0, sampling);
  REQUIRE(text.size() == 26);
  REQUIRE(text.rfind("hacker", 0) == 0);
  REQUIRE(model->generate("hacker", 20, 1.0, again) == text);
}

TEST_CASE("FusedAdam steps as torch::optim::Adam does, and keeps its state", "[gpt]") {
  torch::manual_seed(4);
  for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const torch::Tensor start = torch::randn({1000}, dtype), second = torch::randn({3, 7}, dtype);
    std::vector<torch::Tensor> fused = {start.clone().requires_grad_(true), second.clone().requires_grad_(true)},
                               plain = {start.clone().requires_grad_(true), second.clone().requires_grad_(true)};
    workbook::FusedAdam fused_adam(fused, torch::optim::AdamOptions(3e-3).weight_decay(0.01));
    torch::optim::Adam adam(plain, torch::optim::AdamOptions(3e-3).weight_decay(0.01));
    for (int step = 0; step < 5; ++step) {
      const torch::Tensor g1 = torch::randn({1000}, dtype), g2 = torch::randn({3, 7}, dtype);
      fused[0].mutable_grad() = g1.clone(), fused[1].mutable_grad() = g2.clone();
      plain[0].mutable_grad() = g1.clone(), plain[1].mutable_grad() = g2.clone();
      fused_adam.step();
      adam.step();
    }
    const double tolerance = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
    INFO("dtype " << dtype << ": largest difference " << (fused[0] - plain[0]).abs().max().item<double>());
    REQUIRE(torch::allclose(fused[0], plain[0], tolerance, tolerance));
    REQUIRE(torch::allclose(fused[1], plain[1], tolerance, tolerance));
    auto& state = static_cast<torch::optim::AdamParamState&>(*fused_adam.state().at(fused[0].unsafeGetTensorImpl()));
    auto& expected = static_cast<torch::optim::AdamParamState&>(*adam.state().at(plain[0].unsafeGetTensorImpl()));
    REQUIRE(state.step() == 5);
    REQUIRE(torch::allclose(state.exp_avg_sq(), expected.exp_avg_sq(), tolerance, tolerance));
  }
}
