// spy.hpp — a model that records where and how its forward ran, for the tests
// of parallel_apply (ex2.3) and the DataParallel forward pass (ex2.5).
#pragma once
#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "workbook/models.hpp"

namespace spy {

inline std::vector<torch::Device> cpus(size_t n) { return std::vector<torch::Device>(n, torch::kCPU); }

// Waits in forward until `expected` spies have entered (or 5 s pass), so a
// test can tell replicas that run at the same time from one after another.
struct Rendezvous {
  std::atomic<int> arrived{0};
  int expected = 0;
  bool wait() {
    ++arrived;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (arrived.load() < expected) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};

// What one forward call saw.
struct Call {
  std::thread::id thread;
  int64_t samples = 0;
  int intra_op_threads = 0;
  bool grad_enabled = false;
  bool met_the_others = false;
};

// Every forward call of a spy and of its fresh() copies (replicas), in order of completion.
struct Journal {
  std::mutex mutex;
  std::vector<Call> calls;
};

class Spy : public workbook::Classifier {
 public:
  Spy(Rendezvous* rendezvous, bool fail, std::shared_ptr<Journal> journal = std::make_shared<Journal>())
      : rendezvous_(rendezvous), fail_(fail), journal_(std::move(journal)) {
    weight = register_parameter("weight", torch::ones({1}));
  }
  torch::Tensor forward(torch::Tensor images) override {
    Call call;
    call.thread = std::this_thread::get_id();
    call.samples = images.size(0);
    call.intra_op_threads = at::get_num_threads();
    call.grad_enabled = torch::GradMode::is_enabled();
    call.met_the_others = rendezvous_ ? rendezvous_->wait() : true;
    last = call;
    {
      std::lock_guard<std::mutex> lock(journal_->mutex);
      journal_->calls.push_back(call);
    }
    if (fail_) throw std::runtime_error("spy was told to fail");
    return images.flatten(1).narrow(1, 0, 10) * weight;
  }
  std::shared_ptr<workbook::Classifier> fresh() const override {
    return std::make_shared<Spy>(rendezvous_, fail_, journal_);
  }
  const std::vector<Call>& calls() const { return journal_->calls; }

  torch::Tensor weight;
  Call last;  // this object's last forward

 private:
  Rendezvous* rendezvous_;
  bool fail_;
  std::shared_ptr<Journal> journal_;
};

inline std::vector<workbook::ClassifierPtr> as_classifiers(const std::vector<std::shared_ptr<Spy>>& spies) {
  return std::vector<workbook::ClassifierPtr>(spies.begin(), spies.end());
}

}  // namespace spy
