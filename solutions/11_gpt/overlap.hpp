// overlap.hpp — Chapter 11 (given): the data group's collectives started
// while backward still runs, as PyTorch's DDP starts its all-reduces.
// Chapter 4's reducer (buckets, a communication thread) over Chapter 7's
// sharded buckets (stage 2's layout), for GptTrainer with
// StepOptions::overlap.
//
//   last micro-batch's backward:  block 3 ──┐ block 2 ──┐  ...  block 0, positions ─┐
//   a bucket's gradients final:         bucket 0    bucket 1                     bucket k   tied tokens
//   communication thread:                   └► reduce-scatter, Adam on this rank's shard,
//                                              all-gather ─►  └► the same for bucket 1 ─► ...
//   step():                                                          the rest, then waits for every bucket
//
// Stage 1 (GptTrainer's default) reduce-scatters one flat buffer after the
// whole schedule, steps its shard, all-gathers. Here each bucket is a
// FlatGroup of its own with an optimizer of its own, and goes through all
// three as soon as its gradients are final: the same update (the tests hold
// it to stage 1's). A bucket's parameters change while backward goes on:
// safe, since a parameter's hook runs when LibTorch is about to add its
// gradient to .grad, after every operation of that backward that used it
// has run and freed what it saved (the tied token rows, used at both ends,
// wait for step() anyway).
//
// Read it after ex11.5 passes: GptTrainer's step is the same either way.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "sharding.hpp"  // Chapter 7: Sharding, FlatGroup

namespace ch11 {

// Note: [overlap at data-only layouts] The communication thread calls the
// data group's Communicator while backward runs on the main thread. Calls
// take turns (Note [one call at a time] in communicator.cpp: MPI is started
// SERIALIZED), so a call the main thread makes meanwhile waits for the
// thread's call in progress to return (an exchange's wait, sleeps
// included). That is safe only where the backward's own calls wait for no
// other rank: at tensor 1 and pipeline 1 the stage's calls go to groups of
// one rank. With a tensor or pipeline group of two, a rank's main thread
// could wait for its turn behind its thread, whose exchange waits for a
// peer's thread, which waits for its turn behind that peer's main thread,
// which waits for this rank's: GptTrainer refuses overlap there. Under NCCL
// the thread would need its own device and stream: there the buckets go in
// step(), in order.
//
// Note: [final gradients] Backward runs once per micro-batch, and a bucket
// may go only when its gradients are final: in the last micro-batch. The
// first step counts how many gradients each parameter gets (its hooks fire
// once per backward that reaches it) and reduces everything in step(); later
// steps expect the same counts, and a parameter's last hook puts .grad plus
// the incoming gradient (the hook runs before LibTorch adds it) into its
// bucket. A parameter that gets fewer is taken from .grad in step(); one
// that gets more is an error, since its bucket may have been reduced and
// stepped already. A step that ends early (an error in backward) is
// abandoned by the next zero_grad(), once the buckets in flight are done. The parameters in
// `held_back` (the tied token rows, which ex11.4's exchange changes after
// the schedule) are one last bucket, reduced in step().
class OverlappedSharding : public ch07::Sharding {
 public:
  // `overlap` false: the same buckets, reduced in step() on this thread.
  OverlappedSharding(torch::nn::Module& model, workbook::Communicator& comm, const ch07::MakeOptimizer& make_optimizer,
                     const std::vector<torch::Tensor>& held_back, bool overlap,
                     const ch07::ShardingOptions& options = {});
  ~OverlappedSharding() override;  // removes the hooks, stops the thread
  OverlappedSharding(const OverlappedSharding&) = delete;
  OverlappedSharding& operator=(const OverlappedSharding&) = delete;

  void zero_grad() override;
  // The buckets still waiting: reduce-scattered, stepped, all-gathered in
  // place; returns when every bucket is. Collective.
  void step() override;
  ch07::HeldBytes held() const override;
  // Every bucket's optimizer at once, for stepping only: its step steps
  // each, but its state() is empty (each bucket's optimizer keeps its own,
  // which held() counts), so Chapter 7's checkpoints cannot take it.
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  std::vector<ch07::FlatGroup*> groups() override;

  bool overlapping() const { return patient_; }
  // Buckets the last step handed to the communication thread while backward
  // ran (the rest in step(); none without the thread).
  size_t launched_from_hooks() const { return last_launched_from_hooks_; }
  size_t buckets() const { return buckets_.size(); }

 private:
  void gradient_arrived(size_t parameter, const torch::Tensor& gradient);
  void start_step();          // this step's progress, afresh
  void wait_for_launched();   // until the thread has finished every bucket handed to it
  torch::Tensor slot(size_t parameter);  // its place in its bucket's gradient buffer
  void launch(size_t bucket);
  void communication_loop();
  void finish(size_t bucket);  // reduce-scatter, step, all-gather

  workbook::Communicator& comm_;
  std::vector<torch::Tensor> parameters_;  // hooked, in bucket order; held-back ones last
  std::vector<std::unique_ptr<ch07::FlatGroup>> buckets_;
  std::vector<torch::Tensor> gradients_;   // bucket -> its gradient, laid out as its flat()
  std::vector<torch::Tensor> owned_;       // bucket -> what the optimizer steps
  torch::Tensor incoming_;                 // the communication thread's: a shard from a peer
  bool patient_ = false;                   // buckets finished on the thread, by exchanges
  std::vector<size_t> bucket_of_, slot_of_;
  std::vector<bool> held_back_;
  std::vector<std::unique_ptr<torch::optim::Optimizer>> optimizers_;  // bucket -> its own
  std::unique_ptr<torch::optim::Optimizer> optimizer_;                // all of them
  std::vector<std::pair<torch::Tensor, unsigned>> hooks_;

  // This step's progress, on the thread running backward and step().
  std::vector<int64_t> expected_, arrived_;  // parameter -> gradients a step (empty: the first step)
  std::vector<bool> final_;                  // parameter -> its gradient is in its bucket
  std::vector<size_t> missing_;              // bucket -> parameters not yet final
  size_t next_to_launch_ = 0;
  size_t launched_from_hooks_ = 0, last_launched_from_hooks_ = 0;

  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> queue_;
  size_t launched_ = 0, reduced_ = 0;  // buckets handed to the thread, and finished by it, ever
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ch11
