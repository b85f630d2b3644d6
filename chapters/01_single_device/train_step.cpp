// train_step.cpp — ex1.2: one optimization step.
#include "single_device.hpp"

#include "workbook/errors.hpp"

namespace ch01 {

torch::Tensor train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const Batch& batch) {
  WB_NOT_IMPLEMENTED("ex1.2");  // TODO(ex1.2): your code here
}

}  // namespace ch01
