// parallel_apply.cpp — ex2.3: every replica's forward at once, one thread each.
#include <ATen/ThreadLocalState.h>
#include <c10/core/DeviceGuard.h>
#include <fmt/format.h>

#include <exception>
#include <thread>

#include "data_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch02 {

std::vector<torch::Tensor> parallel_apply(const std::vector<workbook::ClassifierPtr>& replicas,
                                          const std::vector<torch::Tensor>& inputs,
                                          const std::vector<torch::Device>& devices, int threads_per_replica) {
  // BEGIN SOLUTION ex2.3
  WB_CHECK(replicas.size() == inputs.size() && inputs.size() == devices.size(),
           "parallel_apply: {} replicas, {} inputs and {} devices: there must be one of each per replica",
           replicas.size(), inputs.size(), devices.size());
  WB_CHECK(threads_per_replica >= 1, "parallel_apply: threads_per_replica must be at least 1, got {}",
           threads_per_replica);
  const size_t n = replicas.size();
  std::vector<torch::Tensor> outputs(n);
  std::vector<std::exception_ptr> errors(n);  // one slot per thread: no lock needed

  // Note: autograd's mode (NoGradGuard, InferenceMode) is per thread, and a
  // new thread starts with gradients on. ThreadLocalState carries the
  // caller's settings into each replica's thread, as PyTorch's
  // parallel_apply carries torch.is_grad_enabled().
  const at::ThreadLocalState caller_state;
  auto run_replica = [&](size_t i) {
    try {
      at::ThreadLocalStateGuard state_guard(caller_state);
      c10::DeviceGuard device_guard(devices[i]);  // on CUDA: allocate and launch on this replica's GPU
      // Note: LibTorch's CPU backend here is OpenMP, whose thread count is a
      // per-thread setting: each replica's thread gets its share of the cores.
      at::set_num_threads(threads_per_replica);
      outputs[i] = replicas[i]->forward(inputs[i]);
    } catch (...) {
      errors[i] = std::current_exception();  // an exception escaping a std::thread would end the process
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(n);
  try {
    for (size_t i = 0; i < n; ++i) threads.emplace_back(run_replica, i);
  } catch (...) {
    for (std::thread& t : threads) t.join();  // never leave a running thread behind (std::terminate)
    throw;
  }
  for (std::thread& t : threads) t.join();

  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("replica {} on {} failed: {}", i, devices[i].str(), e.what()));
    } catch (...) {
      throw std::runtime_error(fmt::format("replica {} on {} failed with an unknown exception", i, devices[i].str()));
    }
  }
  return outputs;
  // END SOLUTION
}

}  // namespace ch02
