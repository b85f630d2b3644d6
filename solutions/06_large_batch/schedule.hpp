// schedule.hpp — ex6.1: the learning rate of a large global batch, step by step
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

// ---- ex6.1 ----------------------------------------------------------------------

// The rate after `epoch` epochs of training (fractional: step s of an epoch of
// S steps is epoch e + s / S), as the pictures above draw it. What it must do,
// with peak = peak_learning_rate (given):
//   - at epoch 0: the single-device rate base_lr, or the peak if the peak is
//     lower (a batch no larger than base_batch has nothing to warm up to);
//     without a warm-up (warmup_epochs 0), the peak;
//   - during the warm-up: a straight line in the epoch, so that the rate
//     grows a little at every step (not once per epoch), reaching the peak
//     exactly at warmup_epochs, with no jump there;
//   - after it: the peak until the next milestone; or, with end_epoch > 0, a
//     straight line from the peak at warmup_epochs down to 0 at end_epoch,
//     and 0 from then on (never below);
//   - a milestone m of decay_epochs counts from epoch m itself on: from there
//     the rate is decay_factor times what the lines above give, once per
//     milestone reached, during the warm-up too.
// Two of the tests' schedules, at a few epochs (the tests check more points):
//
//   base_lr 0.1, base_batch 256, global_batch 8192 (peak 3.2), warm-up 5 epochs,
//   milestones 30, 60, 80 (× 0.1):
//     epoch   0     0.25   1      2.5    5     29.99  30     60.5    89.9
//     rate    0.1   0.255  0.72   1.65   3.2   3.2    0.32   0.032   0.0032
//
//   base_lr 0.1, base_batch 256, global_batch 1024 (peak 0.4), warm-up 1 epoch,
//   end_epoch 5:
//     epoch   0     0.5    1      2      4.5    5     6
//     rate    0.1   0.25   0.4    0.3    0.05   0     0
// BEGIN SOLUTION NOTE ex6.1
//   start  = min(base_lr, peak)
//   epoch < warmup_epochs:  start + (peak − start) · epoch / warmup_epochs
//   afterwards:             peak, or with end_epoch > 0
//                           peak · (end_epoch − epoch) / (end_epoch − warmup_epochs), 0 from end_epoch on
//   then, at every milestone m ≤ epoch, times decay_factor.
// END SOLUTION NOTE
double learning_rate_at(const LrSchedule& schedule, double epoch);

// Given: peak = base_lr · (global_batch / base_batch) ^ scaling_power.
double peak_learning_rate(const LrSchedule& schedule);

// Given: sets the rate of every parameter group of `optimizer` (LibTorch's
// optimizers and this chapter's Lars and Lamb alike).
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace ch06
