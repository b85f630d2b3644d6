// The GPU path ([gpu]: run where CUDA is, skipped with a warning elsewhere):
// over NCCL, with as many ranks as GPUs (one on a one-GPU machine), data
// parallel, the GPT's training step with its default Adam, its held-out loss
// and its sampling on the device, against the whole model on the CPU; and
// under bfloat16 autocast on the device, against float32.
#include "catch2_compat.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "gpt_parts.hpp"
#include "gpu_tests.hpp"
#include "mpi_test.hpp"
#include "step.hpp"

namespace {

std::unique_ptr<workbook::Communicator> nccl() {
  return workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                     workbook::CommunicatorOptions::from_environment());
}

bool all_on(const ch11::GptStageImpl& stage, const torch::Device& device) {
  bool on = true;
  for (const torch::Tensor& p : stage.parameters())
    on = on && p.device() == device && p.scalar_type() == torch::kFloat32;
  return on;
}

}  // namespace

TEST_CASE("ex11.5 on the GPU over NCCL: three Adam steps, the held-out loss and a sample as on the CPU",
          "[ex11.5][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto world = nccl();
  const torch::Device device = world->device();
  const ch11::MeshShape shape{world->size(), 1, 1};
  workbook::Gpt whole = gpt_parts::whole_model(shape, 61);
  const int64_t sequences = 8 * world->size(), rows = 8;
  const torch::Tensor batches = torch::randint(0, 256, {3, 2, sequences, 16}, torch::kInt64);
  const torch::Tensor held_out = torch::randint(0, 256, {2, 8, 16}, torch::kInt64);
  const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
  ch11::GptStage stage(*whole, mesh);
  stage->to(device);
  ch11::StepOptions options;
  options.micro_batches = 2;
  ch11::GptTrainer trainer(*stage, mesh, options);  // the default Adam, its state on the device
  torch::optim::Adam whole_optimizer(whole->parameters(), torch::optim::AdamOptions(options.learning_rate));
  INFO("on " << device.str() << ", " << world->size() << " rank(s)");
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    const torch::Tensor bytes = batches[step][0], targets = batches[step][1];
    const double loss = trainer.step(bytes.narrow(0, mesh.here.data * rows, rows).to(device),
                                     targets.narrow(0, mesh.here.data * rows, rows).to(device));
    whole_optimizer.zero_grad();
    const torch::Tensor whole_loss = whole->loss(bytes, targets);
    whole_loss.backward();
    whole_optimizer.step();
    INFO("the step on the GPU returned the loss " << loss << ", the whole model's on the CPU is "
                                                  << whole_loss.item<double>());
    REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss.item<double>()) < 1e-4 * whole_loss.item<double>()));
  }
  INFO("after the steps every parameter stays float32 on the GPU");
  REQUIRE(mpi_test::all_ranks(all_on(*stage, device)));

  const double held_out_loss = stage->evaluate(held_out[0].to(device), held_out[1].to(device), 2);
  torch::NoGradGuard no_grad;
  const double whole_held_out = whole->loss(held_out[0], held_out[1]).item<double>();
  INFO("the held-out loss on the GPU is " << held_out_loss << ", on the CPU " << whole_held_out);
  REQUIRE(mpi_test::all_ranks(std::abs(held_out_loss - whole_held_out) < 1e-4 * whole_held_out));
  torch::Generator draws = at::make_generator<at::CPUGeneratorImpl>(3);
  const std::string text = stage->generate("hacker ", 12, 0.8, draws);
  INFO("the sample: '" << text << "'");
  REQUIRE(mpi_test::all_ranks(text.size() == 19 && text.rfind("hacker ", 0) == 0));
}

TEST_CASE("ex11.5 on the GPU under bfloat16 autocast the loss stays near float32's", "[ex11.5][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto world = nccl();
  const torch::Device device = world->device();
  const ch11::MeshShape shape{world->size(), 1, 1};
  workbook::Gpt whole = gpt_parts::whole_model_for_bfloat16(shape, 62);
  const torch::Tensor bytes = torch::randint(0, 256, {8, 16}, torch::kInt64);
  const torch::Tensor targets = torch::randint(0, 256, {8, 16}, torch::kInt64);
  const double whole_loss = whole->loss(bytes, targets).item<double>();
  const ch11::Mesh mesh = gpt_parts::mesh_for(*world, shape);
  ch11::GptStage stage(*whole, mesh);
  stage->to(device);
  ch11::StepOptions options;
  options.micro_batches = 2;
  options.bfloat16 = true;
  ch11::GptTrainer trainer(*stage, mesh, options);
  const int64_t rows = 8 / shape.data;
  const double loss = trainer.step(bytes.narrow(0, mesh.here.data * rows, rows).to(device),
                                   targets.narrow(0, mesh.here.data * rows, rows).to(device));
  INFO("bfloat16's loss on " << device.str() << " is " << loss << ", float32's on the CPU " << whole_loss);
  REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss) < 2e-2 * whole_loss));
  INFO("the loss is float32's to 1e-6: the products did not run in bfloat16");
  REQUIRE(mpi_test::all_ranks(std::abs(loss - whole_loss) > 1e-6));
  INFO("the parameters stay float32 on the GPU under autocast");
  REQUIRE(mpi_test::all_ranks(all_on(*stage, device)));
}
