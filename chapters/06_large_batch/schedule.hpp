// schedule.hpp — given: the learning rate of a large global batch, step by step
// ("Accurate, Large Minibatch SGD", Goyal et al. 2017).
//
//   lr
//   peak ┤        ┌──────────────┐            peak = base_lr · (global_batch / base_batch)
//        │       ╱               │                    (the linear scaling rule)
//        │     ╱                 └──────┐     decay: × decay_factor at each milestone
//        │   ╱  warm-up                 └───┐
//   base ┤ ╱  (linear, per step)            └──
//        └─┴────────┴──────────────┴──────┴──── epoch (fractional: step / steps_per_epoch)
//          0    warmup_epochs      decay_epochs[0], [1], ...
//
// or, with end_epoch set, a straight line from the peak to 0 at the run's end:
//
//   peak ┤        ┌╲                          a straight line from the peak at warmup_epochs
//        │       ╱   ╲                        to 0 at end_epoch, and 0 after
//        │     ╱       ╲                      the decay fits the run's length: a 3-epoch
//   base ┤   ╱            ╲                   run decays over 3 epochs, a 30-epoch run over 30
//        └─┴────────┴────────╲── epoch
//          0    warmup_epochs  end_epoch
//
// Why warm up: at the start the weights change fastest, and a rate k times the
// single-device one, applied to them at once, can throw the model off its
// track in the first steps (the loss explodes, or BatchNorm's statistics run
// away); ramping up over a few epochs lets it settle first.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace ch06 {

struct LrSchedule {
  double base_lr = 0.1;         // the rate for base_batch: what one device would train with
  int64_t base_batch = 256;     // the scaling rule's reference batch
  int64_t global_batch = 256;   // samples per optimizer step, over every rank and micro-step
  double scaling_power = 1.0;   // 1: linear rule; 0.5: square-root rule (LAMB's paper); 0: no scaling
  double warmup_epochs = 0.0;   // 0: start at the peak rate
  std::vector<double> decay_epochs;  // milestones, ascending
  double decay_factor = 0.1;
  double end_epoch = 0.0;       // > 0: decay linearly from the peak (at warmup_epochs) to 0 here
};

// Given: the rate after `epoch` epochs of training (fractional: step s of an
// epoch of S steps is epoch e + s / S), as the pictures above draw it, with
// peak = peak_learning_rate. It moves at every step, not once an epoch:
//   start  = min(base_lr, peak)
//   epoch < warmup_epochs:  start + (peak − start) · epoch / warmup_epochs
//   afterwards:             peak, or with end_epoch > 0
//                           peak · (end_epoch − epoch) / (end_epoch − warmup_epochs), 0 from end_epoch on
//   then, at every milestone m ≤ epoch, times decay_factor.
double learning_rate_at(const LrSchedule& schedule, double epoch);

// Given: peak = base_lr · (global_batch / base_batch) ^ scaling_power.
double peak_learning_rate(const LrSchedule& schedule);

// Given: sets the rate of every parameter group of `optimizer` (LibTorch's
// optimizers and this chapter's Lars and Lamb alike).
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace ch06
