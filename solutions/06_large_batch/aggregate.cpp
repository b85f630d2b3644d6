// aggregate.cpp — ex6.5: communicate (and step) once every `frequency` batches.
#include "accumulation.hpp"

#include "workbook/errors.hpp"

namespace ch06 {

GradientAggregator::GradientAggregator(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                       workbook::Communicator& comm, int64_t frequency)
    : model_(model), optimizer_(optimizer), comm_(comm), frequency_(frequency) {
  WB_CHECK(frequency >= 1, "aggregation frequency {} must be at least 1", frequency);
}

bool GradientAggregator::add(const ch03::Batch& batch) {
  // BEGIN SOLUTION ex6.5
  if (pending_ == 0) optimizer_.zero_grad();  // a new round starts from zero gradients
  torch::Tensor loss = torch::nn::functional::cross_entropy(model_.forward(batch.images), batch.labels);
  (loss / static_cast<double>(frequency_)).backward();
  // Summed on the device: reading it here would wait for the device at every batch.
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + loss.detach() : loss.detach();
  if (++pending_ < frequency_) return false;  // keep adding, locally
  if (local_gradient_observer_) local_gradient_observer_(model_);  // this rank's own gradient, still
  ch03::all_reduce_gradients(model_, comm_);
  optimizer_.step();
  last_loss_ = loss_sum_ / static_cast<double>(frequency_);
  loss_sum_ = torch::Tensor();
  pending_ = 0;
  return true;
  // END SOLUTION
}

}  // namespace ch06
