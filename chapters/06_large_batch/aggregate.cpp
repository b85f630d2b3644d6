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
  WB_NOT_IMPLEMENTED("ex6.5");  // TODO(ex6.5): your code here
}

}  // namespace ch06
