// broadcast.cpp — ex3.1: every rank starts from rank 0's model.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

void broadcast_model(torch::nn::Module& model, workbook::Communicator& comm, int root) {
  WB_NOT_IMPLEMENTED("ex3.1");  // TODO(ex3.1): your code here
}

}  // namespace ch03
