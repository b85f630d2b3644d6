// broadcast.cpp — ex3.1: every rank starts from rank 0's model.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

void broadcast_model(torch::nn::Module& model, workbook::Communicator& comm, int root) {
  // BEGIN SOLUTION ex3.1
  // In place and outside autograd: the optimizer holds these very tensors.
  torch::NoGradGuard no_grad;
  // Buffers too: BatchNorm's running mean and variance are state that
  // evaluation uses, and they differ between ranks as much as the weights.
  // Every rank walks the same module tree in the same order, so the k-th
  // broadcast on every rank is about the same tensor.
  for (torch::Tensor tensor : model.parameters()) comm.broadcast(tensor, root);
  for (torch::Tensor tensor : model.buffers()) comm.broadcast(tensor, root);
  // END SOLUTION
}

}  // namespace ch03
