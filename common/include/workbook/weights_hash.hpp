// weights_hash.hpp — one fingerprint for a model's every number.
//
// Two runs that should train the same model (a resumed run and an
// uninterrupted one; ch03_train and ch04_train at 2 ranks) are compared by
// this hash in their result lines: equal hashes, bit-identical weights.
#pragma once
#include <string>

#include <torch/torch.h>

#include "workbook/fashion_mnist.hpp"  // sha256_hex

namespace workbook {

// The SHA-256 of every parameter's and buffer's bytes, in registration order.
inline std::string weights_sha256(torch::nn::Module& model) {
  std::string bytes;
  for (const auto& tensors : {model.parameters(), model.buffers()})
    for (const torch::Tensor& t : tensors) {
      const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
      bytes.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * c.element_size()));
    }
  return sha256_hex(bytes.data(), bytes.size());
}

}  // namespace workbook
