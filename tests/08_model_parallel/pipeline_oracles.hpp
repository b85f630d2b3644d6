// pipeline_oracles.hpp — what Chapter 8's pipeline tests compare with: one
// process training the whole FashionCNN with gradient accumulation over the
// same micro-batches and the same dropout masks, and each schedule's order
// of work written out from its definition.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "mpi_test.hpp"
#include "pipeline.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

namespace pipeline_oracle {

inline constexpr uint64_t kDropoutSeed = 31;

inline std::shared_ptr<workbook::FashionCNN> whole_model(uint64_t seed) {
  torch::manual_seed(seed);  // the same on every rank
  return std::make_shared<workbook::FashionCNN>();
}

inline torch::Tensor images_for(int64_t step, int64_t count) {
  torch::manual_seed(500 + static_cast<uint64_t>(step));
  return torch::rand({count, 1, 28, 28});
}
inline torch::Tensor labels_for(int64_t step, int64_t count) {
  return (torch::arange(count, torch::kInt64) * 3 + step) % 10;
}

// The whole model's blocks [first, end) on `x` (pipeline.hpp's five blocks,
// written from FashionCNN's forward), with `mask` (or none) after fc1.
inline torch::Tensor run_blocks(workbook::FashionCNN& whole, torch::Tensor x, int first, int end,
                                const torch::Tensor& mask) {
  for (int block = first; block < end; ++block) {
    switch (block) {
      case 0: x = torch::max_pool2d(torch::relu(whole.normalize("bn1", whole.conv1(x))), 2); break;
      case 1: x = torch::max_pool2d(torch::relu(whole.normalize("bn2", whole.conv2(x))), 2).flatten(1); break;
      case 2: x = whole.fc1(x); if (mask.defined()) x = x * mask.to(x.device(), x.scalar_type()); break;
      case 3: x = whole.fc2(x); break;
      default: x = whole.fc3(x); break;
    }
  }
  return x;
}

// One step of the whole model on `m` micro-batches, their gradients
// accumulated, masks drawn in micro-batch order: returns the batch's loss.
// `backward_order` (empty: 0, 1, ..., m - 1) is the order in which the
// micro-batches' gradients are added, the schedule's own: float sums in
// another order would differ in their last bits.
inline double accumulate_step(workbook::FashionCNN& whole, torch::Generator& masks, const torch::Tensor& images,
                              const torch::Tensor& labels, int64_t m, std::vector<int64_t> backward_order = {}) {
  if (backward_order.empty())
    for (int64_t micro = 0; micro < m; ++micro) backward_order.push_back(micro);
  const int64_t rows = images.size(0) / m;
  std::vector<torch::Tensor> losses;
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < m; ++micro) {
    const torch::Tensor mask = ch08::full_dropout_mask(rows, 600, 0.25, masks);
    const torch::Tensor logits =
        tp_oracle::fashion_cnn_forward(whole, images.narrow(0, micro * rows, rows), mask);
    losses.push_back(torch::nn::functional::cross_entropy(logits, labels.narrow(0, micro * rows, rows)) /
                     static_cast<double>(m));
    loss_sum += losses.back().item<double>();
  }
  for (const int64_t micro : backward_order) losses.at(static_cast<size_t>(micro)).backward();
  return loss_sum;
}

// The micro-batches in the order of a stage's backwards ("B3" in `order`
// is micro-batch 3's); empty when that is not each of 0 .. m - 1 once.
inline std::vector<int64_t> backward_order_of(const std::vector<std::string>& order, int64_t m) {
  std::vector<int64_t> micros;
  std::vector<bool> seen(static_cast<size_t>(m), false);
  for (const std::string& item : order) {
    if (item.size() < 2 || item[0] != 'B' || item.find_first_not_of("0123456789", 1) != std::string::npos) continue;
    const int64_t micro = std::stoll(item.substr(1));
    if (micro < 0 || micro >= m || seen[static_cast<size_t>(micro)]) return {};
    seen[static_cast<size_t>(micro)] = true;
    micros.push_back(micro);
  }
  if (static_cast<int64_t>(micros.size()) != m) return {};
  return micros;
}

// Only the computations of an order ("F2", "B2"), without the transfers.
inline std::vector<std::string> computations(const std::vector<std::string>& order) {
  std::vector<std::string> kept;
  for (const std::string& item : order)
    if (item.size() >= 2 && (item[0] == 'F' || item[0] == 'B') && item.find_first_not_of("0123456789", 1) == std::string::npos)
      kept.push_back(item);
  return kept;
}

// The largest difference between a stage's parameters (or their gradients)
// and the whole model's of the same names; -1 when a name is missing.
inline double stage_difference(ch08::PipelineStage& stage, workbook::FashionCNN& whole, bool gradients) {
  auto whole_parameters = whole.named_parameters();
  double most = 0.0;
  for (const auto& item : stage.named_parameters()) {
    const torch::Tensor* other = whole_parameters.find(item.key());
    if (other == nullptr) return -1.0;
    const torch::Tensor a = gradients ? item.value().grad() : item.value();
    const torch::Tensor b = gradients ? other->grad() : *other;
    if (!a.defined() || !b.defined()) return -1.0;
    most = std::max(most, tp_oracle::max_difference(a, b));
  }
  return most;
}

// What `stage` of `stages` does under each schedule, in order, written out
// from its definition (StageStepStats::order's tokens).
struct Order {
  bool first, last;
  std::vector<std::string> items;
  void recv_forward(int64_t i) { if (!first) items.push_back(fmt::format("<F{}", i)); }
  void forward(int64_t i) { items.push_back(fmt::format("F{}", i)); }
  void send_forward(int64_t i) { if (!last) items.push_back(fmt::format("F{}>", i)); }
  void recv_backward(int64_t i) { if (!last) items.push_back(fmt::format("<B{}", i)); }
  void backward(int64_t i) { items.push_back(fmt::format("B{}", i)); }
  void send_backward(int64_t i) { if (!first) items.push_back(fmt::format("B{}>", i)); }
};

// GPipe: each micro-batch received, computed and passed on, then each
// backward alike, in `backward_order` (empty: micro-batch order). Any order
// of the backwards is GPipe's, provided every stage uses the same one.
inline std::vector<std::string> gpipe_order(int stage, int stages, int64_t m, std::vector<int64_t> backward_order = {}) {
  if (backward_order.empty())
    for (int64_t i = 0; i < m; ++i) backward_order.push_back(i);
  Order o{stage == 0, stage == stages - 1, {}};
  for (int64_t i = 0; i < m; ++i) { o.recv_forward(i); o.forward(i); o.send_forward(i); }
  for (const int64_t i : backward_order) { o.recv_backward(i); o.backward(i); o.send_backward(i); }
  return o.items;
}

// 1F1B: a forward may start while the stage holds fewer than p - s
// micro-batches; otherwise the oldest backward runs. The steady state's
// transfers are exchanges: an output sent as the gradient of the oldest
// comes back, a gradient sent as the next input comes in.
inline std::vector<std::string> one_f_one_b_order(int stage, int stages, int64_t m) {
  Order o{stage == 0, stage == stages - 1, {}};
  const int64_t limit = stages - stage;
  int64_t forwards = 0, backwards = 0;
  bool input_here = false;  // the next forward's input arrived by an exchange
  while (backwards < m) {
    if (forwards < m && forwards - backwards < limit) {
      if (!input_here) o.recv_forward(forwards);
      o.forward(forwards);
      input_here = false;
      const bool backward_next = forwards + 1 - backwards == limit;  // the stage is full: the oldest goes back
      if (backward_next && !o.last) {
        o.items.push_back(fmt::format("F{}>|<B{}", forwards, backwards));
      } else {
        o.send_forward(forwards);
      }
      ++forwards;
      if (backward_next) {
        o.backward(backwards);
        const bool forward_next = forwards < m;
        if (forward_next && !o.first) {
          o.items.push_back(fmt::format("B{}>|<F{}", backwards, forwards));
          input_here = true;
        } else if (forward_next) {
          input_here = true;  // the first stage's images need no transfer
        } else {
          o.send_backward(backwards);
        }
        ++backwards;
      }
    } else {
      o.recv_backward(backwards);
      o.backward(backwards);
      o.send_backward(backwards);
      ++backwards;
    }
  }
  return o.items;
}

// Steps a pipeline and the whole model side by side with Adam, `steps` steps
// of `m` micro-batches of 2; after each, `check` sees the stage's stats, and
// the weights must equal the whole model's bit for bit (the last stage's
// loss too, within rounding of its sum). The whole model adds the
// micro-batches' gradients in the order of this stage's backwards (micro-batch
// order if they are not each micro-batch once), so that a schedule is held
// to its own order of sums.
inline void train_side_by_side(workbook::Communicator& comm, ch08::Schedule schedule, int64_t m, int64_t steps,
                               uint64_t seed,
                               const std::function<void(const ch08::StageStepStats&, const ch08::PipelineStage&)>& check) {
  auto whole = whole_model(seed);
  ch08::PipelineStage stage(*whole, comm, kDropoutSeed);
  torch::Generator masks = at::make_generator<at::CPUGeneratorImpl>(kDropoutSeed);
  torch::optim::Adam whole_adam(whole->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam adam(stage.parameters(), torch::optim::AdamOptions(1e-3));
  for (int64_t step = 0; step < steps; ++step) {
    CAPTURE(step, m, comm.size(), comm.rank());
    const torch::Tensor images = images_for(step, 2 * m), labels = labels_for(step, 2 * m);
    adam.zero_grad();
    const ch08::StageStepStats stats = ch08::pipeline_step(stage, schedule, images, labels, m);
    adam.step();
    whole_adam.zero_grad();
    const double whole_loss =
        accumulate_step(*whole, masks, images, labels, m, backward_order_of(stats.order, m));
    whole_adam.step();
    check(stats, stage);
    const double difference = stage_difference(stage, *whole, /*gradients=*/false);
    INFO("weights after the step differ from the whole model's by " << difference);
    REQUIRE(mpi_test::all_ranks(difference == 0.0));
    REQUIRE(mpi_test::all_ranks(!stage.last_stage() || std::abs(stats.loss - whole_loss) < 1e-6));
  }
}

inline std::string joined(const std::vector<std::string>& order) {
  std::string s;
  for (const std::string& item : order) {
    if (!s.empty()) s += ' ';
    s += item;
  }
  return s;
}

}  // namespace pipeline_oracle
