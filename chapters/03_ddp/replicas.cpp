// replicas.cpp — ex3.3: which tensors are not the same on every rank.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

std::vector<std::string> replicas_disagree(torch::nn::Module& model, workbook::Communicator& comm) {
  WB_NOT_IMPLEMENTED("ex3.3");  // TODO(ex3.3): your code here
}

}  // namespace ch03
