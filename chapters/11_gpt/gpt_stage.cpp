// gpt_stage.cpp — one rank's part of the GPT at its place in the mesh.
#include "gpt_stage.hpp"

#include "checkpoint.hpp"  // Chapter 9
#include "vocab_parallel.hpp"
#include "workbook/errors.hpp"

namespace ch11 {

std::pair<int64_t, int64_t> layers_of_stage(int64_t layers, int stage, int stages) {
  WB_CHECK(stages >= 1 && stages <= layers, "{} pipeline stages cannot share {} layers: at most one stage a layer",
           stages, layers);
  const int64_t base = layers / stages, extra = layers % stages;
  const int64_t first = stage * base + std::min<int64_t>(stage, extra);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

GptStageImpl::GptStageImpl(const workbook::GptImpl& whole, const Mesh& mesh)
    : mesh_(&mesh),
      width_(whole.options.width),
      vocabulary_(whole.options.vocabulary),
      activation_options_(whole.tokens->weight.options()) {
  const int t = mesh.shape.tensor, r = mesh.here.tensor;
  WB_CHECK(vocabulary_ % t == 0, "a vocabulary of {} cannot be split over {} tensor ranks", vocabulary_, t);
  std::tie(first_layer, end_layer) = layers_of_stage(whole.options.layers, stage(), stages());
  torch::NoGradGuard no_grad;
  if (first_stage() || last_stage()) {
    const int64_t rows = vocabulary_ / t;
    tokens = register_parameter("tokens", whole.tokens->weight.narrow(0, r * rows, rows).clone());
  }
  if (first_stage()) {
    positions = register_module("positions", torch::nn::Embedding(whole.positions->options));
    positions->to(whole.positions->weight.device(), whole.positions->weight.scalar_type());
    positions->weight.copy_(whole.positions->weight);
  }
  blocks = register_module("blocks", torch::nn::Sequential());
  for (int64_t layer = first_layer; layer < end_layer; ++layer) {
    const workbook::GptBlockImpl& block = *whole.blocks->ptr(layer)->as<workbook::GptBlockImpl>();
    if (t > 1) {
      blocks->push_back(TensorParallelBlock(block, *mesh.tensor));
      continue;
    }
    workbook::GptBlock copy(width_, whole.options.heads);
    copy->to(block.norm1->weight.device(), block.norm1->weight.scalar_type());
    const auto source = block.named_parameters();
    for (auto& parameter : copy->named_parameters()) parameter.value().copy_(source[parameter.key()]);
    blocks->push_back(copy);
  }
  if (last_stage()) final_norm = register_module("final_norm", ch08::copy_layer<torch::nn::LayerNorm>(*whole.final_norm));
}

// ---- a step -------------------------------------------------------------------------

void GptStageImpl::begin_step(const torch::Tensor& bytes, const torch::Tensor& targets, int64_t micro_batches) {
  WB_CHECK(micro_batches >= 1 && bytes.size(0) % micro_batches == 0,
           "a batch of {} sequences does not divide into {} equal micro-batches", bytes.size(0), micro_batches);
  WB_ASSERT(held_.empty(), "stage {}: a new step began with {} micro-batch(es) still held", stage(), held_.size());
  bytes_ = bytes;
  targets_ = targets;
  micro_batches_ = micro_batches;
  micro_rows_ = bytes.size(0) / micro_batches;
  loss_sum_ = torch::zeros({}, bytes.options().dtype(torch::kFloat64));  // on the batch's device
}

double GptStageImpl::end_step() {
  WB_CHECK(held_.empty(), "stage {}: the step ended with {} micro-batch(es) that had no backward", stage(),
           held_.size());
  return last_stage() ? loss_sum_.item<double>() : 0.0;
}

torch::Tensor GptStageImpl::embed(const torch::Tensor& bytes) {
  WB_NOT_IMPLEMENTED("ex11.4");  // TODO(ex11.4): your code here
}

torch::Tensor GptStageImpl::loss(const torch::Tensor& x, const torch::Tensor& targets) {
  WB_NOT_IMPLEMENTED("ex11.4");  // TODO(ex11.4): your code here
}

torch::Tensor GptStageImpl::forward(int64_t micro, const torch::Tensor& input) {
  WB_CHECK(held_.count(micro) == 0, "stage {}: micro-batch {} went forward twice", stage(), micro);
  const torch::Tensor x = first_stage() ? input : input.detach().requires_grad_(true);
  const torch::Tensor h = run_blocks(first_stage() ? embed(x) : x);
  torch::Tensor output = h;
  if (last_stage())
    output = loss(h, targets_.narrow(0, micro * micro_rows_, micro_rows_)) / static_cast<double>(micro_batches_);
  held_[micro] = {x, output};
  if (last_stage()) loss_sum_ += output.detach().to(torch::kFloat64);
  return output.detach();
}

torch::Tensor GptStageImpl::backward(int64_t micro, const torch::Tensor& output_grad) {
  WB_CHECK(held_.count(micro) == 1, "stage {}: backward of micro-batch {}, which is not held", stage(), micro);
  const Held h = std::move(held_.at(micro));
  held_.erase(micro);
  if (last_stage()) h.output.backward();
  else h.output.backward(output_grad);
  return first_stage() ? torch::Tensor() : h.input.grad();
}

torch::Tensor GptStageImpl::run_blocks(torch::Tensor h) {
  for (auto& block : *blocks) {
    if (recompute && torch::GradMode::is_enabled())
      h = ch09::checkpoint([&block](const torch::Tensor& in) { return block.forward(in); }, h);
    else
      h = block.forward(h);
  }
  return h;
}

// ---- forward only ---------------------------------------------------------------------

double GptStageImpl::evaluate(const torch::Tensor& bytes, const torch::Tensor& targets, int64_t micro_batches) {
  torch::NoGradGuard no_grad;
  begin_step(bytes, targets, micro_batches);
  torch::Tensor loss = torch::zeros({1}, bytes.options().dtype(torch::kFloat64));
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const torch::Tensor input = recv_forward(micro);
    const torch::Tensor h = run_blocks(first_stage() ? embed(input) : input);
    if (last_stage()) loss += this->loss(h, targets_.narrow(0, micro * micro_rows_, micro_rows_)).item<double>();
    else send_forward(h);
  }
  mesh_->pipeline->broadcast(loss, stages() - 1);
  return loss.item<double>() / static_cast<double>(micro_batches);
}

std::string GptStageImpl::generate(const std::string& prompt, int64_t count, double temperature,
                                   torch::Generator& generator) {
  WB_CHECK(temperature > 0.0 && !prompt.empty(), "generating needs a prompt and a positive temperature");
  torch::NoGradGuard no_grad;
  const int64_t context = first_stage() ? positions->weight.size(0) : 0;
  // Every tensor a communicator sends is on its device (the GPU under NCCL).
  const torch::TensorOptions on_device =
      torch::TensorOptions().dtype(torch::kInt64).device(parameters().front().device());
  torch::Tensor length = torch::full({1}, context, on_device);
  mesh_->pipeline->broadcast(length, 0);  // only the first stage holds the positions
  std::string text = prompt;
  for (int64_t i = 0; i < count; ++i) {
    const size_t first = text.size() > static_cast<size_t>(length.item<int64_t>()) ? text.size() - length.item<int64_t>() : 0;
    std::vector<int64_t> recent;
    for (size_t j = first; j < text.size(); ++j) recent.push_back(static_cast<unsigned char>(text[j]));
    const torch::Tensor window = torch::tensor(recent, torch::kInt64).view({1, -1}).to(on_device.device());
    begin_step(window, window, 1);
    const torch::Tensor h = run_blocks(first_stage() ? embed(window) : recv_forward(0));
    torch::Tensor next = torch::zeros({1}, on_device);
    if (last_stage()) {
      // This rank's vocabulary rows' logits of the last position; the tensor
      // group gathers the whole row (256 numbers) to draw from.
      const torch::Tensor last = final_norm(h.select(1, -1));
      const torch::Tensor mine = torch::matmul(last, tokens.t()).to(torch::kFloat32).contiguous();
      const torch::Tensor logits = mesh_->tensor->all_gather(mine).permute({1, 0, 2}).reshape({1, -1}) / temperature;
      // Drawn on the CPU, where `generator` is: the same text on every device.
      next = torch::multinomial(torch::softmax(logits, -1).cpu(), 1, false, generator).view({1}).to(on_device.device());
    } else {
      send_forward(h);
    }
    mesh_->pipeline->broadcast(next, stages() - 1);
    text.push_back(static_cast<char>(static_cast<unsigned char>(next.item<int64_t>())));
  }
  return text;
}

// ---- the neighbours: the pipeline group's previous and next stage -------------------

torch::Tensor GptStageImpl::activation_buffer() const {
  return torch::empty({micro_rows_, bytes_.size(1), width_}, activation_options_.device(bytes_.device()));
}

torch::Tensor GptStageImpl::recv_forward(int64_t micro) {
  if (first_stage()) return bytes_.narrow(0, micro * micro_rows_, micro_rows_);
  torch::Tensor activation = activation_buffer();
  mesh_->pipeline->recv(activation, stage() - 1);
  return activation;
}

void GptStageImpl::send_forward(const torch::Tensor& activation) {
  if (!last_stage()) mesh_->pipeline->send(activation.contiguous(), stage() + 1);
}

torch::Tensor GptStageImpl::recv_backward() {
  if (last_stage()) return {};
  torch::Tensor grad = activation_buffer();
  mesh_->pipeline->recv(grad, stage() + 1);
  return grad;
}

void GptStageImpl::send_backward(const torch::Tensor& input_grad) {
  if (!first_stage()) mesh_->pipeline->send(input_grad.contiguous(), stage() - 1);
}

torch::Tensor GptStageImpl::send_forward_recv_backward(const torch::Tensor& activation) {
  if (last_stage()) return {};
  torch::Tensor grad = activation_buffer();
  mesh_->pipeline->exchange(activation.contiguous(), stage() + 1, grad, stage() + 1);
  return grad;
}

torch::Tensor GptStageImpl::send_backward_recv_forward(const torch::Tensor& input_grad, int64_t micro) {
  if (first_stage()) return recv_forward(micro);
  torch::Tensor activation = activation_buffer();
  mesh_->pipeline->exchange(input_grad.contiguous(), stage() - 1, activation, stage() - 1);
  return activation;
}

// ---- after the backwards -------------------------------------------------------------

void add_tied_embedding_gradients(GptStageImpl& stage, const Mesh& mesh) {
  WB_NOT_IMPLEMENTED("ex11.4");  // TODO(ex11.4): your code here
}

}  // namespace ch11
