// measure.hpp — ch10_model's measurements (main_model.cpp reads as their
// order): the link's fit and the all-reduces (measure_collectives.cpp), a
// profile and the data-parallel layouts' steps (measure_steps.cpp), a
// pipeline and tensor parallel (measure_layouts.cpp). Given code: each
// predicts with the student's ch10 functions, then measures.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "block_mlp.hpp"
#include "cost_model.hpp"
#include "equal_blocks.hpp"
#include "step_model.hpp"
#include "workbook/communicator.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"

namespace ch10::measure {

double now_s();
// The slowest rank's value: a collective takes as long as its last rank.
double slowest(workbook::Communicator& comm, double seconds);
// Each element's slowest rank, so that every rank holds the same values.
std::vector<double> slowest(workbook::Communicator& comm, const std::vector<double>& seconds);
std::string bytes_text(double bytes);

// --measure link: ping-pong between ranks 0 and `partner`, and the line fitted to it.
ch10::Link measure_link(workbook::Program& program, bool quick, int partner = 1);
// Note [what a ping-pong does not see] (measure_collectives.cpp): what a
// collective costs the CPU, fitted with every rank at once.
struct CpuCosts {
  double gamma_s_per_byte = 0.0;  // seconds per byte reduced
  ch10::Link exchange;            // a ring shift's line: every rank sending and receiving at once
};
CpuCosts measure_cpu_costs(workbook::Communicator& comm, bool quick);
// Note [making Open MPI use one algorithm] (measure_collectives.cpp).
void force_open_mpi_algorithm(const std::string& allreduce);
// --measure allreduce: one algorithm over the sizes, each predicted and measured.
void measure_allreduce(workbook::Program& program, const std::string& algorithm, const ch10::Link& link,
                       int64_t max_bytes, double max_seconds);

struct StepsOptions {
  ch09::BlockMlpOptions model;
  int64_t local_batch = 128;
  int steps = 5;
};

// --measure pipeline and tensor: equal blocks, the whole batch on every rank.
struct LayoutOptions {
  ch10::EqualBlocksOptions model;
  int64_t batch = 256;
  int steps = 5;
  std::vector<int> micro_batches = {1, 2, 4, 8};
};

// Whole steps without communication, timed on every rank at once: the
// slowest rank's median forward, backward and Adam's step on every parameter.
struct WholeSteps {
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0;
};
WholeSteps time_whole_steps(workbook::Communicator& comm, torch::nn::Module& model,
                            const std::function<torch::Tensor()>& loss);

// One layout's step, measured: a fresh model (the same on every rank), two
// warm-up steps, then the median over `steps` of the slowest rank's time.
struct MeasuredStep {
  double seconds = 0.0;
  int64_t bytes_sent_per_step = 0;  // by this rank's Communicator, point to point (the workbook's rings)
  int64_t collectives_per_step = 0;
};
MeasuredStep measure_step(workbook::Communicator& comm, int steps, const std::function<void()>& step);

// A layout's step, predicted and measured: a table row and a JSON line (rank 0's).
void report_step(workbook::Program& program, const workbook::Table& table, const std::string& layout,
                 const ch10::StepPrediction& predicted, double measured_s, nlohmann::json extra,
                 const std::string& last_column);

// --measure steps: the profile, then DDP after backward, buckets, ZeRO 1 to 3.
void measure_steps(workbook::Program& program, const ch10::Link& link, const StepsOptions& options);
// --measure pipeline: GPipe and 1F1B at each micro-batch count, with the idle share.
void measure_pipeline(workbook::Program& program, const ch10::Link& link, const LayoutOptions& options);
// --measure tensor: the blocks split over every rank.
void measure_tensor_parallel(workbook::Program& program, const ch10::Link& link, const LayoutOptions& options);

}  // namespace ch10::measure
