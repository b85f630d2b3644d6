// pipeline.hpp — Chapter 8, second half: pipeline parallelism. FashionCNN is
// cut into consecutive stages, one per rank; a batch is cut into m
// micro-batches, which flow through the stages: activations forward to the
// next stage, their gradients back to the one before.
//
// p = 3 stages, m = 4 micro-batches; F2 = forward of micro-batch 2, B2 its backward.
// GPipe runs all forwards, then all backwards (here in micro-batch order):
//
//   stage 0: F0 F1 F2 F3 .. .. .. .. B0 B1 B2 B3
//   stage 1: .. F0 F1 F2 F3 .. .. B0 B1 B2 B3 ..
//   stage 2: .. .. F0 F1 F2 F3 B0 B1 B2 B3 .. ..
//   ("..": the stage waits: the bubble. Backwards drawn as long as forwards.)
//
// 1F1B (one forward, one backward) runs a stage's backwards as early as it
// can, so that stage s never holds more than p − s micro-batches, however
// large m is; GPipe's stages hold all m at the end of the forwards. (A stage
// holds a micro-batch's activations from its forward to its backward.) Both
// have the same bubble, (p − 1) / (m + p − 1) of the step when every stage
// takes as long: the first stage waits for the last to start its
// backwards, the last waited for the first's forwards.
// BEGIN SOLUTION NOTE ex8.7
//   1F1B, p = 3, m = 4:
//   stage 0: F0 F1 F2 .. B0 F3 B1 .. B2 B3
//   stage 1: .. F0 F1 B0 F2 B1 F3 B2 B3 ..
//   stage 2: .. .. F0 B0 F1 B1 F2 B2 F3 B3
// END SOLUTION NOTE
//
// Note: [an exchange where both neighbours send] In 1F1B's steady state a
// stage sends an activation to the next stage while the next stage sends it
// a gradient. Two blocking sends that wait for each other's receive (MPI
// does, for messages larger than it buffers) never return: so the stage
// sends forward and receives backward in one exchange
// (send_forward_recv_backward), which its neighbour meets with
// send_backward_recv_forward — what Megatron-LM's batched send/receive is for.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "tensor_parallel.hpp"  // Evaluation
#include "workbook/models.hpp"

namespace ch08 {

// Given: FashionCNN as five blocks, the units a stage is made of.
//   0: conv1 → BN → ReLU → pool      [N, 32, 14, 14]
//   1: conv2 → BN → ReLU → pool → flatten   [N, 2304]
//   2: fc1 → dropout                  [N, 600]
//   3: fc2                            [N, 120]
//   4: fc3                            [N, 10]
inline constexpr int kBlocks = 5;
// The shape of block `block`'s output for `rows` samples: what crosses the
// boundary after it.
std::vector<int64_t> block_output_shape(int block, int64_t rows);
// The blocks [first, end) of `stage` of `stages` (1 to kBlocks stages): the
// convolutions first, as evenly as whole blocks allow (2 stages: blocks 0-1
// and 2-4; 5 stages: a block each).
std::pair<int, int> blocks_of_stage(int stage, int stages);

// What a stage keeps of a micro-batch between its forward and its backward.
struct HeldActivations {
  torch::Tensor input;   // what came in (the first stage: images); backward returns its gradient
  torch::Tensor output;  // what went out (the last stage: the loss / m); backward starts from it
};

// What a stage measured in one step (end_step()).
struct StageStepStats {
  double loss = 0.0;              // the last stage: the mean loss over the batch; others 0
  double compute_s = 0.0;         // time inside forward() and backward()
  int64_t peak_held = 0;          // the most micro-batches held at once
  int64_t peak_held_bytes = 0;    // their inputs' and outputs' bytes at that moment, counted from the tensors
  // What the stage did, in order: "F2" the forward of micro-batch 2, "B2" its
  // backward; "<F2" received its input, "F2>" sent its output, "<B2" received
  // its output's gradient (named after the backward that used it: Note
  // [naming a received gradient] in pipeline_stage.cpp), "B2>" sent its
  // input's gradient; "F3>|<B0" an exchange of both. Only real transfers: the first stage receives no
  // input and sends no gradient, the last sends no output and receives no gradient.
  std::vector<std::string> order;
};

// What a schedule sees of a stage: its place, its micro-batches, one
// micro-batch's forward and backward, and the transfers to its neighbours,
// each a no-op where there is no neighbour. PipelineStage below is
// FashionCNN's; Chapter 10's equal blocks and Chapter 11's transformer run
// their own stages through the same schedules.
class Stage {
 public:
  virtual ~Stage() = default;
  virtual int stage() const = 0;
  virtual int stages() const = 0;
  virtual int64_t micro_batches() const = 0;
  virtual torch::Tensor forward(int64_t micro, const torch::Tensor& input) = 0;
  virtual torch::Tensor backward(int64_t micro, const torch::Tensor& output_grad) = 0;
  virtual torch::Tensor recv_forward(int64_t micro) = 0;
  virtual void send_forward(const torch::Tensor& activation) = 0;
  virtual torch::Tensor recv_backward() = 0;
  virtual void send_backward(const torch::Tensor& input_grad) = 0;
  virtual torch::Tensor send_forward_recv_backward(const torch::Tensor& activation) = 0;
  virtual torch::Tensor send_backward_recv_forward(const torch::Tensor& input_grad, int64_t micro) = 0;
};

// Given: a dropout mask over a [rows, columns] activation (1 / (1 - p) where
// kept, 0 where dropped), from `generator`: block 2's dropout.
torch::Tensor full_dropout_mask(int64_t rows, int64_t columns, double p, torch::Generator& generator);

class PipelineStage : public torch::nn::Module, public Stage {
 public:
  // This rank's stage (stage = rank, stages = ranks) of `full`, its layers
  // copied. Dropout after fc1 draws its masks from `dropout_seed`, in the
  // order of the forwards (which is micro-batch order in both schedules).
  PipelineStage(const workbook::FashionCNN& full, workbook::Communicator& comm, uint64_t dropout_seed = 0);

  int stage() const override { return stage_; }
  int stages() const override { return stages_; }
  bool first_stage() const { return stage_ == 0; }
  bool last_stage() const { return stage_ == stages_ - 1; }
  int64_t micro_batches() const override { return micro_batches_; }
  int first_block() const { return first_block_; }  // this stage's blocks: [first_block, end_block)
  int end_block() const { return end_block_; }

  // Given: a step's batch (every stage passes the same; the first uses its
  // images, the last its labels), cut into `micro_batches` equal parts.
  void begin_step(const torch::Tensor& images, const torch::Tensor& labels, int64_t micro_batches);
  StageStepStats end_step();  // every micro-batch must have had its backward

  // ---- ex8.5: one micro-batch through this stage -----------------------------
  // forward: `input` is recv_forward's (images on the first stage). Runs the
  // stage's layers; the last stage turns its logits into the micro-batch's
  // loss / m (the loss: the mean cross-entropy over the micro-batch's rows). Keeps what backward needs in `held` and returns the output,
  // detached: what send_forward passes on.
  torch::Tensor forward(int64_t micro, const torch::Tensor& input) override;
  // backward: `output_grad` is recv_backward's (undefined on the last stage,
  // whose output is the loss). Back-propagates through this stage, releases
  // the micro-batch, and returns its input's gradient for the previous stage
  // (undefined on the first stage).
  torch::Tensor backward(int64_t micro, const torch::Tensor& output_grad) override;

  // ---- given: talking to the neighbours ---------------------------------------
  // Each is a no-op where there is no neighbour: the first stage "receives"
  // its images, the last "receives" no gradient. The shapes are known from
  // the blocks, so nothing but the tensors travels.
  torch::Tensor recv_forward(int64_t micro) override;            // micro-batch `micro`'s input
  void send_forward(const torch::Tensor& activation) override;   // to the next stage
  torch::Tensor recv_backward() override;                        // the gradient of this stage's output
  void send_backward(const torch::Tensor& input_grad) override;  // to the previous stage
  // Both at once, as one exchange: Note [an exchange where both neighbours send].
  torch::Tensor send_forward_recv_backward(const torch::Tensor& activation) override;
  torch::Tensor send_backward_recv_forward(const torch::Tensor& input_grad, int64_t micro) override;

  // Given: this stage's blocks, in order, on `input`.
  torch::Tensor run_layers(const torch::Tensor& input);
  torch::Tensor micro_labels(int64_t micro) const;

  std::map<int64_t, HeldActivations> held;  // micro-batch -> what it holds, from forward to backward

 private:
  friend class ComputeClock;
  friend Evaluation evaluate_pipeline(PipelineStage&, const torch::Tensor&, const torch::Tensor&, int64_t);
  void record_held();
  torch::Tensor micro_images(int64_t micro) const;

  workbook::Communicator* comm_;
  int stage_, stages_, first_block_, end_block_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::Generator dropout_generator_;
  // This step.
  torch::Tensor images_, labels_;
  int64_t micro_batches_ = 0, micro_rows_ = 0;
  torch::Tensor loss_sum_;
  StageStepStats stats_;
  int64_t last_forward_ = -1, last_backward_ = -1;  // for `order`
  std::deque<size_t> unnamed_gradients_;            // entries of `order` whose gradient has no backward yet
  void name_received_gradient(int64_t micro);
  int64_t forwards_ = 0, backwards_ = 0;  // this step's, for end_step()'s check
};

// ---- the schedules: GPipe (given) and ex8.7 --------------------------------------
// One training step's forwards and backwards of every micro-batch on this
// stage, after begin_step(); every stage runs the same schedule at once.
// gpipe (given, gpipe.cpp): every forward, then every backward.
// ex8.7: the same micro-batches, each stage's backwards as early as its
// neighbours allow, at most p − s held on stage s; the forwards of both in
// micro-batch order (dropout draws its masks in that order). Must work for
// m = 1 and for m < p. Where two neighbours send to each other at once: Note
// [an exchange where both neighbours send].
void gpipe(Stage& stage);
void one_f_one_b(Stage& stage);

// Given: the test set through the pipeline in eval mode, forward only, in
// batches of `batch` (every stage calls it): the last stage's counts, sent to
// every stage.
Evaluation evaluate_pipeline(PipelineStage& stage, const torch::Tensor& images, const torch::Tensor& labels,
                             int64_t batch);

enum class Schedule { GPipe, OneFOneB };
// Given: begin_step, the schedule, end_step. Gradients accumulate in the
// stage's parameters (zero them before, step the optimizer after).
StageStepStats pipeline_step(PipelineStage& stage, Schedule schedule, const torch::Tensor& images,
                             const torch::Tensor& labels, int64_t micro_batches);

}  // namespace ch08
