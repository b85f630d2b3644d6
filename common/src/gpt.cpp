// gpt.cpp — the small byte-level GPT of gpt.hpp.
#include "workbook/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "workbook/errors.hpp"

namespace workbook {

void GptOptions::check() const {
  WB_CHECK(layers >= 1 && width >= 1 && heads >= 1 && context >= 1 && vocabulary >= 1,
           "the GPT's sizes must be positive: {} layers, width {}, {} heads, context {}, vocabulary {}", layers,
           width, heads, context, vocabulary);
  WB_CHECK(width % heads == 0, "the GPT's width {} is not a multiple of its {} heads", width, heads);
}

torch::Tensor masked_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t positions = q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)).to(torch::kFloat32) * scale;  // [N, h, T, T]
  // A position attends to itself and the ones before it: everything above the diagonal is masked.
  const torch::Tensor future =
      torch::ones({positions, positions}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  return torch::matmul(torch::softmax(scores, -1).to(v.scalar_type()), v);
}

// Note: [fused attention, float64 unfused] The fused kernel (PyTorch's
// scaled_dot_product_attention; on a CPU a flash-attention kernel that
// accumulates in float32 for 16-bit inputs) never forms the [T, T] scores
// or the mask: measured in `workbook bench ch11`, it is what PyTorch's own GPT
// runs. float64, the tests' oracles, keeps the unfused path above, so that an
// oracle's exactness does not depend on a kernel's choices; a float32 test
// (tests/test_gpt.cpp) holds the two paths to each other.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (q.scalar_type() == torch::kFloat64) return masked_causal_attention(q, k, v);
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t width, int64_t heads_)
    : qkv(register_module("qkv", torch::nn::Linear(width, 3 * width))),
      projection(register_module("projection", torch::nn::Linear(width, width))),
      heads(heads_) {}

// Note: [at::linear, not the module's] LibTorch's C++ torch::nn::Linear
// (torch::nn::functional::linear) fuses the bias into the product (addmm)
// for a 2-d input only; given [N, T, width] it runs matmul, then adds the
// bias in a pass of its own. ATen's linear, which PyTorch's Python
// nn.Linear calls, flattens a contiguous 3-d input and runs addmm. The
// blocks call it, with the modules' own parameters (`workbook bench ch11`
// measures the step).
namespace {
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return at::linear(x, layer->weight, layer->bias);
}
}  // namespace

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t n = x.size(0), t = x.size(1), width = x.size(2);
  // [N, T, 3·width] → three [N, heads, T, head_size]
  const std::vector<torch::Tensor> qkv_parts =
      linear(qkv, x).view({n, t, 3, heads, width / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
  const torch::Tensor attended = causal_attention(qkv_parts[0], qkv_parts[1], qkv_parts[2]);
  return linear(projection, attended.transpose(1, 2).reshape({n, t, width}));
}

GptBlockImpl::GptBlockImpl(int64_t width, int64_t heads)
    : norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
      norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
      attention(register_module("attention", CausalSelfAttention(width, heads))),
      expand(register_module("expand", torch::nn::Linear(width, 4 * width))),
      contract(register_module("contract", torch::nn::Linear(4 * width, width))) {}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = x + attention(norm1(x));
  return h + linear(contract, torch::gelu(linear(expand, norm2(h))));
}

GptImpl::GptImpl(const GptOptions& options_) : options(options_) {
  options.check();
  tokens = register_module("tokens", torch::nn::Embedding(options.vocabulary, options.width));
  positions = register_module("positions", torch::nn::Embedding(options.context, options.width));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.layers; ++i) blocks->push_back(GptBlock(options.width, options.heads));
  final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.width})));
  initialise_like_gpt2(*this, options.layers);
}

void initialise_like_gpt2(torch::nn::Module& model, int64_t layers, const std::vector<std::string>& keep) {
  // GPT-2's initialisation: normal(0, 0.02) for the embeddings and every
  // linear weight, zero biases; the projections that add into the residual
  // stream scaled by 1/√(2·layers), so that the stream's variance does not
  // grow with depth.
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(layers));
  for (auto& named : model.named_parameters()) {
    const std::string& name = named.key();
    torch::Tensor& p = named.value();
    if (name.find("norm") != std::string::npos) continue;  // LayerNorm keeps its ones and zeros
    const auto kept = [&](const std::string& part) { return name.find(part) != std::string::npos; };
    if (std::any_of(keep.begin(), keep.end(), kept)) continue;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      p.zero_();
    } else {
      const bool residual = name.find("projection.weight") != std::string::npos ||
                            name.find("contract.weight") != std::string::npos;
      p.normal_(0.0, residual ? residual_std : 0.02);
    }
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& bytes) {
  WB_CHECK(bytes.dim() == 2 && bytes.size(1) >= 1 && bytes.size(1) <= options.context,
           "the GPT reads [N, T] bytes with 1 <= T <= {} (its context); got {}", options.context, bytes.sizes());
  const torch::Tensor where =
      torch::arange(bytes.size(1), torch::TensorOptions().dtype(torch::kInt64).device(bytes.device()));
  torch::Tensor x = tokens(bytes) + positions(where);
  for (const auto& block : *blocks) x = block->as<GptBlock>()->forward(x);
  // Tied: the output layer is the token embedding itself, so its gradient
  // adds both uses' contributions.
  return torch::matmul(final_norm(x), tokens->weight.t());
}

torch::Tensor GptImpl::loss(const torch::Tensor& bytes, const torch::Tensor& targets) {
  const torch::Tensor logits = forward(bytes);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, options.vocabulary}).to(torch::kFloat32),
                                              targets.reshape({-1}));
}

std::string GptImpl::generate(const std::string& prompt, int64_t count, double temperature,
                              torch::Generator& generator) {
  WB_CHECK(temperature > 0.0, "the sampling temperature is {}; it must be positive", temperature);
  WB_CHECK(!prompt.empty(), "generating needs a prompt of at least one byte");
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  std::string text = prompt;
  const torch::Device device = tokens->weight.device();
  for (int64_t i = 0; i < count; ++i) {
    const size_t first = text.size() > static_cast<size_t>(options.context) ? text.size() - options.context : 0;
    std::vector<int64_t> recent;
    for (size_t j = first; j < text.size(); ++j) recent.push_back(static_cast<unsigned char>(text[j]));
    const torch::Tensor window = torch::tensor(recent, torch::kInt64).view({1, -1});
    const torch::Tensor logits = forward(window.to(device)).select(1, -1).to(torch::kFloat32).cpu() / temperature;
    const int64_t next = torch::multinomial(torch::softmax(logits, -1), 1, false, generator).item<int64_t>();
    text.push_back(static_cast<char>(static_cast<unsigned char>(next)));
  }
  train(was_training);
  return text;
}

}  // namespace workbook
