// evaluate.cpp — ex1.3: exact evaluation in eval mode, without gradients.
#include "single_device.hpp"

#include "workbook/errors.hpp"

namespace ch01 {

EvalResult evaluate(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                    int64_t batch_size, const torch::Device& device) {
  WB_NOT_IMPLEMENTED("ex1.3");  // TODO(ex1.3): your code here
}

}  // namespace ch01
