// pipeline_oracles.hpp — what Chapter 8's pipeline tests compare with: one
// process training the whole FashionCNN with gradient accumulation over the
// same micro-batches and the same dropout masks, and what any schedule's
// order of work and transfers must satisfy.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
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

// One entry of StageStepStats::order, an exchange split into its two
// transfers: `what` is "<F" (input received), "F" (forward), "F>" (output
// sent), "<B" (output's gradient received), "B" (backward) or "B>" (input's
// gradient sent); `micro` the micro-batch (-1: a gradient no backward used).
struct Event {
  std::string what;
  int64_t micro = -1;
  bool computation() const { return what == "F" || what == "B"; }
};

inline std::vector<Event> events_of(const std::vector<std::string>& order) {
  std::vector<Event> events;
  for (const std::string& item : order) {
    size_t start = 0;
    while (start <= item.size()) {
      const size_t bar = std::min(item.find('|', start), item.size());
      std::string token = item.substr(start, bar - start);
      Event e;
      const bool in = !token.empty() && token.front() == '<', out = !token.empty() && token.back() == '>';
      if (in) token.erase(0, 1);
      if (out) token.pop_back();
      if (!token.empty()) {
        e.what = (in ? "<" : "") + token.substr(0, 1) + (out ? ">" : "");
        const std::string digits = token.substr(1);
        if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos) e.micro = std::stoll(digits);
      }
      events.push_back(e);
      start = bar + 1;
    }
  }
  return events;
}

// What a stage of a pipeline must do whatever its schedule, checked on its
// order: every micro-batch's forward once, in micro-batch order, and its
// backward once, after it; where there is a neighbour, each micro-batch's
// transfer to or from it once, and none where there is not; the input a
// computation uses received after the stage's previous computation,
// and its result sent before the stage's next one. Empty when all hold,
// otherwise what broke.
inline std::string stage_order_problem(const std::vector<std::string>& order, bool first, bool last, int64_t m) {
  const std::vector<Event> events = events_of(order);
  int64_t forwards = 0;
  std::vector<int> backwards(static_cast<size_t>(m), 0);
  std::map<std::string, int> transfers;  // how often each named transfer appears
  for (size_t k = 0; k < events.size(); ++k) {
    const Event& e = events[k];
    const std::string number = e.micro < 0 ? std::string("?") : std::to_string(e.micro);
    const std::string name =
        !e.what.empty() && e.what.back() == '>' ? e.what.substr(0, e.what.size() - 1) + number + ">" : e.what + number;
    if (e.what == "F") {
      if (e.micro != forwards) return fmt::format("forward {} ran where micro-batch {}'s forward was next: the forwards go in micro-batch order, each once", name, forwards);
      ++forwards;
    } else if (e.what == "B") {
      if (e.micro < 0 || e.micro >= forwards) return fmt::format("{} ran before its micro-batch's forward", name);
      if (++backwards[static_cast<size_t>(e.micro)] > 1) return fmt::format("{} ran twice", name);
    } else if (e.what == "<F" || e.what == "B>") {
      if (first) return fmt::format("the first stage has no previous stage, yet its order has {}", name);
    } else if (e.what == "F>" || e.what == "<B") {
      if (last) return fmt::format("the last stage has no next stage, yet its order has {}", name);
    } else {
      return fmt::format("entry {} of the order is not a transfer or a computation", k);
    }
    // A transfer next to its computation: the nearest computation after a
    // receive is the one that uses it, the nearest before a send made it.
    const bool receive = e.what.front() == '<', send = e.what.back() == '>' && !e.computation();
    if ((receive || send) && e.micro >= 0 && ++transfers[name] > 1)
      return fmt::format("{} appears more than once (a send is named after the stage's latest computation of its "
                         "kind, a received gradient after the backward that used it): each micro-batch's input, "
                         "output and their gradients cross a boundary once, next to the computation that uses or "
                         "makes them", name);
    if (receive || send) {
      const std::string made_by = receive ? e.what.substr(1) : e.what.substr(0, 1);
      std::string neighbour = "none";
      if (receive) {
        for (size_t n = k + 1; n < events.size(); ++n)
          if (events[n].computation()) { neighbour = events[n].what + std::to_string(events[n].micro); break; }
      } else {
        for (size_t n = k; n-- > 0;)
          if (events[n].computation()) { neighbour = events[n].what + std::to_string(events[n].micro); break; }
      }
      if (neighbour != made_by + std::to_string(e.micro))
        return fmt::format("{} has {} as its nearest computation {}: {}", name, neighbour, receive ? "after it" : "before it",
                           receive ? "an input is received after the stage's previous computation, just before the "
                                     "computation that uses it (received earlier, the stage waits before work it could "
                                     "already do)"
                                   : "a result is sent before the stage's next computation (sent later, it holds up the "
                                     "neighbour waiting for it)");
    }
  }
  if (forwards != m) return fmt::format("{} forward(s) for {} micro-batches", forwards, m);
  for (int64_t i = 0; i < m; ++i) {
    if (backwards[static_cast<size_t>(i)] != 1) return fmt::format("micro-batch {} had no backward", i);
    for (const char* what : {"<F", "F>", "<B", "B>"}) {
      const std::string kind = what;
      const bool has_neighbour = (kind == "<F" || kind == "B>") ? !first : !last;
      const std::string name = kind.front() == '<' ? kind + std::to_string(i)
                                                   : kind.substr(0, 1) + std::to_string(i) + ">";
      if (has_neighbour && transfers[name] != 1)
        return fmt::format("the order has no {}: with a neighbour on that side, every micro-batch's {} crosses the "
                           "boundary", name,
                           kind == "<F" ? "input" : kind == "F>" ? "output" : kind == "<B" ? "output's gradient"
                                                                             : "input's gradient");
    }
  }
  return "";
}

// The micro-batches of a stage's transfers of one kind ("<F", "F>", "<B",
// "B>"), in order, in `m` slots (-2 past the last): for comparing with the
// neighbours'.
inline std::vector<double> transfers_of(const std::vector<std::string>& order, const std::string& what, int64_t m) {
  std::vector<double> micros(static_cast<size_t>(m), -2.0);
  size_t n = 0;
  for (const Event& e : events_of(order))
    if (e.what == what && n < micros.size()) micros[n++] = static_cast<double>(e.micro);
  return micros;
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
