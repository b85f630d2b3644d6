// gpt.hpp — a small decoder-only transformer over bytes, the model a
// capstone trains split over data, tensor and pipeline ranks. Each piece is a
// module of its own so that a split model can be built from the same
// weights and compared with this one.
//
//   bytes [N, T] ─► token embedding (256 × width) + learned positions (context × width)
//     └─► blocks × layers:  x = x + attention(LN1(x));  x = x + mlp(LN2(x))
//           attention: heads of width / heads, causal (a position sees itself and the ones before)
//           mlp: width ─► 4 × width ─► GELU ─► width
//     └─► final LayerNorm ─► logits [N, T, 256] = x · token embeddingᵀ (tied: one tensor, two uses)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace workbook {

struct GptOptions {
  int64_t layers = 4;
  int64_t width = 256;   // the embedding's size, every block's input and output
  int64_t heads = 4;     // must divide width
  int64_t context = 128; // the longest input, in bytes
  int64_t vocabulary = 256;
  // A UserError that names the numbers unless every size is positive and
  // heads divides width.
  void check() const;
};

// Causal self-attention: query, key and value from one [width → 3·width]
// projection (in that order, each cut into heads), softmax(q·kᵀ / √head_size)
// over the positions up to each one's own, then [width → width] back.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t width, int64_t heads);
  torch::Tensor forward(const torch::Tensor& x);  // [N, T, width] → [N, T, width]
  torch::nn::Linear qkv{nullptr}, projection{nullptr};
  int64_t heads;
};
TORCH_MODULE(CausalSelfAttention);

// Given q, k, v of [N, heads, T, head_size]: the heads' causal attention
// outputs, [N, heads, T, head_size], the softmax in float32 whatever the
// inputs' dtype. Shared, so that a split model computes what this one does.
// float32 and 16-bit inputs take a fused kernel; float64 (the tests'
// oracles) the unfused path below (Note [fused attention, float64 unfused]).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);
// The same, unfused: the [T, T] scores, the causal mask, softmax, then · v.
torch::Tensor masked_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

class GptBlockImpl : public torch::nn::Module {
 public:
  GptBlockImpl(int64_t width, int64_t heads);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  CausalSelfAttention attention{nullptr};
  torch::nn::Linear expand{nullptr}, contract{nullptr};  // the MLP: width → 4·width → width
};
TORCH_MODULE(GptBlock);

// GPT-2's initialisation of `model`'s parameters, by name: LayerNorms as
// they are, biases 0, weights normal(0, 0.02), the projections into the
// residual stream ("projection.weight", "contract.weight") normal(0,
// 0.02/√(2·layers)). Names containing any of `keep` are left as they are.
void initialise_like_gpt2(torch::nn::Module& model, int64_t layers, const std::vector<std::string>& keep = {});

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptOptions& options = {});
  // [N, T] int64 bytes (T <= context) → [N, T, vocabulary] logits.
  torch::Tensor forward(const torch::Tensor& bytes);
  // The mean cross-entropy of predicting `targets` [N, T] from `bytes`.
  torch::Tensor loss(const torch::Tensor& bytes, const torch::Tensor& targets);
  // `prompt` followed by `count` bytes drawn one at a time from the model's
  // softmax at `temperature` (> 0), each from the last `context` bytes, with
  // `generator`'s draws: the same generator state gives the same text.
  std::string generate(const std::string& prompt, int64_t count, double temperature, torch::Generator& generator);

  GptOptions options;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm final_norm{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace workbook
