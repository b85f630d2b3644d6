// pipeline_stage.cpp — a stage of the pipeline: its layers, what it talks to
// its neighbours, and ex8.5, one micro-batch's forward and backward.
#include <ATen/CPUGeneratorImpl.h>

#include "pipeline.hpp"
#include "workbook/errors.hpp"
#include "workbook/timing.hpp"
#include "workbook/trace.hpp"

namespace ch08 {

torch::Tensor full_dropout_mask(int64_t rows, int64_t columns, double p, torch::Generator& generator) {
  torch::Tensor kept = torch::empty({rows, columns}, torch::kFloat64).bernoulli_(1.0 - p, generator);
  return kept / (1.0 - p);
}

std::vector<int64_t> block_output_shape(int block, int64_t rows) {
  switch (block) {
    case 0: return {rows, 32, 14, 14};
    case 1: return {rows, 64 * 6 * 6};
    case 2: return {rows, 600};
    case 3: return {rows, 120};
    case 4: return {rows, 10};
    default: WB_ASSERT(false, "FashionCNN has no block {}", block);
  }
  return {};
}

std::pair<int, int> blocks_of_stage(int stage, int stages) {
  WB_CHECK(stages >= 1 && stages <= kBlocks,
           "FashionCNN has {} blocks to cut into stages (conv1, conv2, fc1, fc2, fc3): {} stages is more", kBlocks,
           stages);
  // Where each stage begins, for 1 to 5 stages: the convolutions (most of the
  // compute) on their own first, then the classifier's layers.
  static const std::vector<std::vector<int>> kCuts = {
      {0, 5}, {0, 2, 5}, {0, 1, 2, 5}, {0, 1, 2, 3, 5}, {0, 1, 2, 3, 4, 5}};
  const std::vector<int>& cuts = kCuts[static_cast<size_t>(stages - 1)];
  return {cuts[static_cast<size_t>(stage)], cuts[static_cast<size_t>(stage + 1)]};
}


PipelineStage::PipelineStage(const workbook::FashionCNN& full, workbook::Communicator& comm, uint64_t dropout_seed)
    : comm_(&comm),
      stage_(comm.rank()),
      stages_(comm.size()),
      dropout_generator_(at::make_generator<at::CPUGeneratorImpl>(dropout_seed)) {
  std::tie(first_block_, end_block_) = blocks_of_stage(stage_, stages_);
  auto children = full.named_children();
  for (int block = first_block_; block < end_block_; ++block) {
    if (block == 0) {
      conv1 = register_module("conv1", copy_layer<torch::nn::Conv2d>(*full.conv1));
      bn1 = register_module("bn1", copy_layer<torch::nn::BatchNorm2d>(*children["bn1"]));
    } else if (block == 1) {
      conv2 = register_module("conv2", copy_layer<torch::nn::Conv2d>(*full.conv2));
      bn2 = register_module("bn2", copy_layer<torch::nn::BatchNorm2d>(*children["bn2"]));
    } else if (block == 2) {
      fc1 = register_module("fc1", copy_layer<torch::nn::Linear>(*full.fc1));
    } else if (block == 3) {
      fc2 = register_module("fc2", copy_layer<torch::nn::Linear>(*full.fc2));
    } else {
      fc3 = register_module("fc3", copy_layer<torch::nn::Linear>(*full.fc3));
    }
  }
}

torch::Tensor PipelineStage::run_layers(const torch::Tensor& input) {
  torch::Tensor x = input;
  for (int block = first_block_; block < end_block_; ++block) {
    if (block == 0) {
      x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 2);
    } else if (block == 1) {
      x = torch::max_pool2d(torch::relu(bn2(conv2(x))), 2).flatten(1);
    } else if (block == 2) {
      x = fc1(x);
      if (is_training()) x = x * full_dropout_mask(x.size(0), x.size(1), 0.25, dropout_generator_).to(x.device(), x.scalar_type());
    } else if (block == 3) {
      x = fc2(x);
    } else {
      x = fc3(x);
    }
  }
  return x;
}

// ---- a step -----------------------------------------------------------------------

void PipelineStage::begin_step(const torch::Tensor& images, const torch::Tensor& labels, int64_t micro_batches) {
  WB_CHECK(micro_batches >= 1 && images.size(0) % micro_batches == 0,
           "a batch of {} samples does not divide into {} equal micro-batches", images.size(0), micro_batches);
  WB_ASSERT(held.empty(), "stage {}: a new step began with {} micro-batch(es) still held", stage_, held.size());
  images_ = images;
  labels_ = labels;
  micro_batches_ = micro_batches;
  micro_rows_ = images.size(0) / micro_batches;
  loss_sum_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(images.device()));
  stats_ = StageStepStats{};
  last_forward_ = last_backward_ = -1;
  forwards_ = backwards_ = 0;
  unnamed_gradients_.clear();
}

// Note: [naming a received gradient] A gradient travels without its
// micro-batch's number, so recv_backward cannot name it: its entry in
// `order` waits, as "<B?", for the next backward this stage runs, which is
// the one that uses it (the oldest gradient not yet named goes to it).
void PipelineStage::name_received_gradient(int64_t micro) {
  if (unnamed_gradients_.empty()) return;
  std::string& entry = stats_.order[unnamed_gradients_.front()];
  unnamed_gradients_.pop_front();
  entry.replace(entry.rfind('?'), 1, std::to_string(micro));
}

StageStepStats PipelineStage::end_step() {
  WB_CHECK(held.empty(), "stage {}: the step ended with {} micro-batch(es) that had no backward", stage_, held.size());
  // Counted, not the last micro-batch's index: a schedule may run its
  // backwards in any order (the test of its order says which it wants).
  WB_CHECK(forwards_ == micro_batches_ && backwards_ == micro_batches_,
           "stage {}: the step ended after {} forward(s) and {} backward(s), not {} of each", stage_, forwards_,
           backwards_, micro_batches_);
  if (last_stage()) stats_.loss = loss_sum_.item<double>();
  return std::move(stats_);
}

torch::Tensor PipelineStage::micro_images(int64_t micro) const { return images_.narrow(0, micro * micro_rows_, micro_rows_); }
torch::Tensor PipelineStage::micro_labels(int64_t micro) const { return labels_.narrow(0, micro * micro_rows_, micro_rows_); }

void PipelineStage::record_held() {
  int64_t bytes = 0;
  for (const auto& [micro, h] : held) bytes += h.input.nbytes() + h.output.nbytes();
  if (static_cast<int64_t>(held.size()) > stats_.peak_held ||
      (static_cast<int64_t>(held.size()) == stats_.peak_held && bytes > stats_.peak_held_bytes)) {
    stats_.peak_held = static_cast<int64_t>(held.size());
    stats_.peak_held_bytes = bytes;
  }
}

// Times forward() and backward(), and logs what they computed.
class ComputeClock {
 public:
  ComputeClock(PipelineStage& stage, char what, int64_t micro)
      : stage_(stage), span_(workbook::trace::Kind::Compute, fmt::format("{}{}", what, micro)), started_(workbook::now_seconds()) {
    WB_CHECK(micro >= 0 && micro < stage.micro_batches_, "stage {}: micro-batch {} is not one of 0 to {}",
             stage.stage_, micro, stage.micro_batches_ - 1);
    stage_.stats_.order.push_back(fmt::format("{}{}", what, micro));
    (what == 'F' ? stage_.last_forward_ : stage_.last_backward_) = micro;
    if (what == 'B') stage_.name_received_gradient(micro);
    ++(what == 'F' ? stage_.forwards_ : stage_.backwards_);
  }
  ~ComputeClock() { stage_.stats_.compute_s += workbook::now_seconds() - started_; }

 private:
  PipelineStage& stage_;
  workbook::trace::Span span_;
  double started_;
};

torch::Tensor PipelineStage::forward(int64_t micro, const torch::Tensor& input) {
  const ComputeClock clock(*this, 'F', micro);
  WB_CHECK(held.count(micro) == 0, "stage {}: micro-batch {} went forward twice", stage_, micro);
  torch::Tensor output;  // what goes to the next stage; on the last stage, the micro-batch's loss / m
  WB_NOT_IMPLEMENTED("ex8.5");  // TODO(ex8.5): your code here
  record_held();
  if (last_stage()) loss_sum_ += output.detach().to(torch::kFloat64);
  return output.detach();
}

torch::Tensor PipelineStage::backward(int64_t micro, const torch::Tensor& output_grad) {
  const ComputeClock clock(*this, 'B', micro);
  WB_CHECK(held.count(micro) == 1, "stage {}: backward of micro-batch {}, which is not held (no forward, or a "
           "second backward)", stage_, micro);
  torch::Tensor input_grad;  // for the previous stage; undefined on the first
  WB_NOT_IMPLEMENTED("ex8.5");  // TODO(ex8.5): your code here
  return input_grad;
}

// ---- the neighbours -----------------------------------------------------------------

namespace {
// A schedule that asks for a micro-batch the step does not have (a warm-up
// that ignores m, say) is told so here, not by a tensor's index check deeper down.
void check_micro_batch(int stage, const char* call, int64_t micro, int64_t micro_batches) {
  WB_CHECK(micro >= 0 && micro < micro_batches, "stage {}: {}({}), but this step has {} micro-batch(es), 0 to {}",
           stage, call, micro, micro_batches, micro_batches - 1);
}
}  // namespace

torch::Tensor PipelineStage::recv_forward(int64_t micro) {
  check_micro_batch(stage_, "recv_forward", micro, micro_batches_);
  if (first_stage()) return micro_images(micro);
  torch::Tensor activation = torch::empty(block_output_shape(first_block_ - 1, micro_rows_), images_.options());
  comm_->recv(activation, stage_ - 1);
  stats_.order.push_back(fmt::format("<F{}", micro));
  return activation;
}

void PipelineStage::send_forward(const torch::Tensor& activation) {
  if (last_stage()) return;
  comm_->send(activation.contiguous(), stage_ + 1);
  stats_.order.push_back(fmt::format("F{}>", last_forward_));
}

torch::Tensor PipelineStage::recv_backward() {
  if (last_stage()) return {};
  torch::Tensor grad = torch::empty(block_output_shape(end_block_ - 1, micro_rows_), images_.options());
  comm_->recv(grad, stage_ + 1);
  stats_.order.push_back("<B?");
  unnamed_gradients_.push_back(stats_.order.size() - 1);
  return grad;
}

void PipelineStage::send_backward(const torch::Tensor& input_grad) {
  if (first_stage()) return;
  comm_->send(input_grad.contiguous(), stage_ - 1);
  stats_.order.push_back(fmt::format("B{}>", last_backward_));
}

torch::Tensor PipelineStage::send_forward_recv_backward(const torch::Tensor& activation) {
  if (last_stage()) return {};
  torch::Tensor grad = torch::empty(block_output_shape(end_block_ - 1, micro_rows_), images_.options());
  comm_->exchange(activation.contiguous(), stage_ + 1, grad, stage_ + 1);
  stats_.order.push_back(fmt::format("F{}>|<B?", last_forward_));
  unnamed_gradients_.push_back(stats_.order.size() - 1);
  return grad;
}

torch::Tensor PipelineStage::send_backward_recv_forward(const torch::Tensor& input_grad, int64_t micro) {
  check_micro_batch(stage_, "send_backward_recv_forward", micro, micro_batches_);
  if (first_stage()) return micro_images(micro);
  torch::Tensor activation = torch::empty(block_output_shape(first_block_ - 1, micro_rows_), images_.options());
  comm_->exchange(input_grad.contiguous(), stage_ - 1, activation, stage_ - 1);
  stats_.order.push_back(fmt::format("B{}>|<F{}", last_backward_, micro));
  return activation;
}

Evaluation evaluate_pipeline(PipelineStage& stage, const torch::Tensor& images, const torch::Tensor& labels,
                             int64_t batch) {
  torch::NoGradGuard no_grad;
  stage.eval();
  workbook::Communicator& comm = *stage.comm_;
  // [loss sum, correct] on the last stage, sent to every stage at the end.
  torch::Tensor totals = torch::zeros({2}, images.options().dtype(torch::kFloat64));
  for (int64_t first = 0; first < images.size(0); first += batch) {
    const int64_t count = std::min(batch, images.size(0) - first);
    torch::Tensor x;
    if (stage.first_stage()) {
      x = images.narrow(0, first, count);
    } else {
      x = torch::empty(block_output_shape(stage.first_block() - 1, count), images.options());
      comm.recv(x, stage.stage() - 1);
    }
    const torch::Tensor y = stage.run_layers(x);
    if (!stage.last_stage()) {
      comm.send(y.contiguous(), stage.stage() + 1);
      continue;
    }
    const torch::Tensor truth = labels.narrow(0, first, count);
    totals[0] += torch::nn::functional::cross_entropy(
        y, truth, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)).to(torch::kFloat64);
    totals[1] += y.argmax(1).eq(truth).sum().to(torch::kFloat64);
  }
  comm.broadcast(totals, stage.stages() - 1);
  stage.train();
  Evaluation e;
  e.total = images.size(0);
  e.correct = static_cast<int64_t>(totals[1].item<double>());
  e.accuracy = static_cast<double>(e.correct) / static_cast<double>(e.total);
  e.mean_loss = totals[0].item<double>() / static_cast<double>(e.total);
  return e;
}

StageStepStats pipeline_step(PipelineStage& stage, Schedule schedule, const torch::Tensor& images,
                             const torch::Tensor& labels, int64_t micro_batches) {
  stage.begin_step(images, labels, micro_batches);
  if (schedule == Schedule::GPipe) {
    gpipe(stage);
  } else {
    one_f_one_b(stage);
  }
  return stage.end_step();
}

}  // namespace ch08
