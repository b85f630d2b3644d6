// replicate.cpp — ex2.2: a copy of the model per device, wired back to the original.
//
//   original parameter W (a leaf: its gradient accumulates in W.grad)
//        ▲            ▲              ▲
//        │ ToCopy     │ ToCopy       │ ToCopy        gradient edges
//   replica 0's W  replica 1's W  replica 2's W     (not leaves: no .grad)
//        │            │              │
//     forward on    forward on     forward on
//     chunk 0       chunk 1        chunk 2
//
// Backward reaches each replica's W, follows its edge to the original W, and
// autograd sums what arrives there: W.grad = Σ over replicas.
#include "data_parallel.hpp"

#include "workbook/device.hpp"
#include "workbook/errors.hpp"

namespace ch02 {

std::vector<workbook::ClassifierPtr> replicate(workbook::Classifier& model, const std::vector<torch::Device>& devices) {
  WB_NOT_IMPLEMENTED("ex2.2");  // TODO(ex2.2): your code here
}

}  // namespace ch02
