// methods.hpp — the four ways ch06_train trains a large batch: the optimizer,
// its rate at the scaling rule's reference batch, the scaling rule, warm-up.
#pragma once
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "optimizers.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"

namespace ch06 {

inline constexpr int64_t kBaseBatch = 256;  // the scaling rule's reference batch

// What one method trains with, before scaling to the global batch.
struct Method {
  std::string name;
  std::string optimizer;  // "sgd", "lars" or "lamb"
  double base_lr;         // at batch kBaseBatch
  double scaling_power;   // 1: linear rule, 0.5: square root
  bool warmup;
  double trust_coefficient = 1e-3;  // LARS's η
};

// Note: [base rates] SGD's 0.1 per 256 samples is Goyal et al.'s rate for
// ResNet-50. FashionCNN's three fully connected layers (no BatchNorm there)
// make momentum SGD diverge at a rate of 0.1 whatever the batch, so the
// linear rule runs into that wall from batch 512 on: a result, reported as
// such. LAMB's rate was picked at global batch 1024 with the linear decay,
// on 20,000 samples for 3 epochs and on all 60,000 for 5, the best of 0.005,
// 0.01, 0.02 and 0.04 per 256 at both; LARS's at 2048 on 12,000 samples for
// 6 epochs with the old step decay (the lesson lists both searches). LARS
// moves each weight tensor by at most lr · η of its norm per step (before
// momentum); its excluded tensors (biases, BatchNorm) move by lr · gradient,
// which caps lr near SGD's wall. LAMB's rate is the fraction of each
// tensor's norm it moves per step; it scales with the square root of the
// batch, as in its paper.
inline std::vector<Method> kMethods = {
    {"sgd", "sgd", 0.1, 1.0, false},
    {"warmup", "sgd", 0.1, 1.0, true},
    {"lars", "lars", 0.0125, 1.0, true, 0.05},
    {"lamb", "lamb", 0.01, 0.5, true},
};

inline const Method& find_method(const std::string& name) {
  for (const Method& m : kMethods)
    if (m.name == name) return m;
  throw workbook::UserError(fmt::format("--method {}: not one of sgd, warmup, lars, lamb", name));
}

inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Method& method, workbook::FashionCNN& model,
                                                        bool momentum_correction) {
  if (method.optimizer == "lars")
  {
    const auto options = ch06::LarsOptions(method.base_lr)
                             .trust_coefficient(method.trust_coefficient)
                             .momentum_correction(momentum_correction);
    return std::make_unique<ch06::Lars>(ch06::layer_adaptation_groups(model, options), options);
  }
  if (method.optimizer == "lamb")
    return std::make_unique<ch06::Lamb>(ch06::layer_adaptation_groups(model, ch06::LambOptions(method.base_lr)),
                                        ch06::LambOptions(method.base_lr));
  return std::make_unique<torch::optim::SGD>(
      model.parameters(), torch::optim::SGDOptions(method.base_lr).momentum(0.9).weight_decay(5e-4));
}

}  // namespace ch06
