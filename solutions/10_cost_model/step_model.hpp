// step_model.hpp — a training step's time, predicted per layout from a
// compute time per layer and a fitted link, before the step runs.
//
//   DDP after backward   forward ─ backward ─ all-reduce(everything) ─ step
//   DDP with buckets     forward ─ backward ──────────┐
//                                 bucket 0 ═══╗ 1 ════╩═ ... ─ step   (overlapped)
//   ZeRO 1, 2, 3         Chapter 7's collectives, none overlapped
//   pipeline (GPipe, 1F1B) m micro-batches through p equal stages and the p − 1 links between them
//   tensor parallel      per pair of layers: Chapter 8's f and g, none overlapped
// BEGIN SOLUTION NOTE ex10.6
//   ZeRO 1, 2            forward ─ backward ─ reduce-scatter ─ step(shard) ─ all-gather
//   ZeRO 3               per layer: all-gather ─ forward ... all-gather ─ backward ─ reduce-scatter
//   pipeline             (m + p − 1) slots of one micro-batch's forward and backward on one stage, free link
//   tensor parallel      per pair: forward ─ all-reduce(activation) ... backward ─ all-reduce(gradient)
// END SOLUTION NOTE
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cost_model.hpp"

namespace ch10 {

// What one layer costs on one rank, measured on its local batch.
struct LayerProfile {
  std::string name;
  double forward_s = 0.0;
  double backward_s = 0.0;
  int64_t parameters = 0;  // elements, not bytes
};

// A model, layer by layer in forward order, and what its step costs besides.
struct Profile {
  std::vector<LayerProfile> layers;
  int64_t bytes_per_parameter = 4;  // float32: 4; what the gradients travel as
  double optimizer_s = 0.0;         // the optimizer's step on every parameter (a ZeRO rank steps 1/p of it)
  int64_t parameters() const;
  int64_t parameter_bytes() const { return parameters() * bytes_per_parameter; }
  double forward_s() const;
  double backward_s() const;
};

// A prediction, its terms kept apart: what the model says the step is made of.
struct StepPrediction {
  double compute_s = 0.0;        // forward, backward and the optimizer, as this rank runs them
  double communication_s = 0.0;  // every collective's time, overlapped or not
  double exposed_s = 0.0;        // the part of communication_s the step waits for
  double total_s() const { return compute_s + exposed_s; }
};

// Given: DDP after backward: one ring all-reduce of every gradient, after
// the whole backward pass; nothing overlaps.
StepPrediction predict_ddp_after_backward(const Profile& profile, const Link& link, int ranks);

// ---- ex10.5 -------------------------------------------------------------------
// DDP with buckets (Chapter 4's reducer): walking the layers from the last
// to the first, a bucket closes once it holds at least `bucket_cap_bytes`
// of gradients. A bucket is ready when backward has computed the last of
// its gradients (backward runs from the last layer to the first; a layer
// without parameters has none);
// its ring all-reduce starts when it is ready and the previous bucket's
// all-reduce has finished (one link: they go one after another), and the
// optimizer steps once the last one has finished and backward is over.
StepPrediction predict_ddp_buckets(const Profile& profile, const Link& link, int ranks, int64_t bucket_cap_bytes);

// Given: the cap whose prediction is least (the first of equals), among the
// bytes of every run of consecutive layers: a bucket can only close at a
// layer's end, so no other cap gives different buckets.
int64_t best_bucket_bytes(const Profile& profile, const Link& link, int ranks);

// ---- ex10.6 -------------------------------------------------------------------
// ZeRO (Chapter 7), stage 1, 2 or 3, with ring collectives (ex10.4) and no
// overlap. Stages 1 and 2 are modelled alike, as OptimizerStateSharding
// (ex7.2) runs a step (the model leaves stage 2's buckets out); stage 3 as
// ParameterSharding (ex7.5) runs it, layer by layer. Each collective pays
// its own α's; the optimizer is charged what one rank of it runs.
// BEGIN SOLUTION NOTE ex10.6
// Stages 1 and 2: a reduce-scatter of the gradients and an all-gather of the
// parameters, each of every parameter's bytes, after backward; each rank
// steps the optimizer on 1/p of them. Stage 3: per layer, an all-gather of
// its parameters before its forward and again before its backward, and a
// reduce-scatter of its gradients after its backward: three collectives
// per layer, each paying its own α's; each rank steps 1/p of the optimizer.
// END SOLUTION NOTE
StepPrediction predict_zero(int stage, const Profile& profile, const Link& link, int ranks);

// A pipeline of `stages` equal stages (one per rank; each runs 1/stages of
// the layers' time), `micro_batches` micro-batches, and `boundary_bytes`
// crossing each stage boundary per micro-batch (the activation forward, its
// gradient back), sent without waiting (send_without_waiting in
// simulator.hpp): a message the link carries while the stages compute costs
// nothing more. The step is GPipe's, every forward and then every backward,
// as simulate() runs it (1F1B takes the same time and holds fewer activations).
// What must hold: one stage sends nothing; on a free link (α = β = 0) the
// share of the step (less the optimizer) a stage is idle is
// bubble_fraction(); on a link slower than a stage, the link sets the pace.
// compute_s is what one stage computes (its micro-batches and its share of
// the optimizer); communication_s the messages' time on one link per step,
// an activation forward and its gradient back per micro-batch.
// BEGIN SOLUTION NOTE ex10.6
// Each link is one more stage of the pipeline, one message long.
// The forwards take p forwards and p − 1 messages for the first
// micro-batch, then one slowest stage (a forward or a message) for each
// other; the backwards the same.
// END SOLUTION NOTE
StepPrediction predict_pipeline(const Profile& profile, const Link& link, int stages, int micro_batches,
                                int64_t boundary_bytes);
double bubble_fraction(int stages, int micro_batches);  // given: (p − 1) / (m + p − 1)

// Tensor parallel over `ranks` (Chapter 8's column- and row-parallel pairs),
// every layer of the profile split evenly over the ranks: its weights, its
// work and its optimizer state. The messages: the all-reduces that each of
// the `pairs` makes through f and g in a step, each of `activation_bytes`,
// as ring all-reduces that nothing overlaps (the next layer needs their sums).
// BEGIN SOLUTION NOTE ex10.6
// Each rank computes 1/ranks of every layer and steps the optimizer on
// 1/ranks of the parameters. Each pair all-reduces its output in forward (g)
// and its input's gradient, as many bytes, in backward (f).
// END SOLUTION NOTE
StepPrediction predict_tensor_parallel(const Profile& profile, const Link& link, int ranks, int pairs,
                                       int64_t activation_bytes);

}  // namespace ch10
