// The GPU path ([gpu]: run where CUDA is, skipped with a warning elsewhere):
// every stage over NCCL (on one GPU: world size 1) trains the model stage 0
// trains, stage 3 freeing and re-allocating CUDA memory in between.
#include "catch2_compat.hpp"

#include "gpu_tests.hpp"
#include "mpi_test.hpp"
#include "sharding.hpp"
#include "sharding_oracles.hpp"

namespace {

torch::Tensor weights_after_steps(int stage, workbook::Communicator& comm) {
  const torch::Device device = comm.device();
  auto model = sharding_oracle::toy_model();
  model->to(device);
  ch07::ShardingOptions options;
  options.first_bucket_bytes = 100;
  options.bucket_cap_bytes = 1000;
  options.layers = model->layers();
  auto sharding = ch07::make_sharding(stage, *model, comm, ch07::adam(1e-2), options);
  const auto batches = sharding_oracle::global_batches(3, 4 * comm.size());
  for (size_t s = 0; s < batches.images.size(); ++s) {
    const int64_t local = batches.images[s].size(0) / comm.size();
    sharding->zero_grad();
    torch::nn::functional::cross_entropy(
        sharding->forward(*model, batches.images[s].narrow(0, comm.rank() * local, local).to(device)),
        batches.labels[s].narrow(0, comm.rank() * local, local).to(device))
        .backward();
    sharding->step();
  }
  sharding->gather_full();
  return sharding_oracle::weights(*model).cpu();
}

}  // namespace

TEST_CASE("ex7.5 stages 1 to 3 over NCCL on the GPU train the model stage 0 trains", "[ex7.5][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                          workbook::CommunicatorOptions::from_environment());
  const torch::Tensor ddp = weights_after_steps(0, *comm);
  for (int stage : {1, 2, 3}) {
    const double difference = sharding_oracle::max_difference(weights_after_steps(stage, *comm), ddp);
    INFO("stage " << stage << " on " << comm->device().str() << ", " << comm->size()
                  << " rank(s): largest difference from stage 0 " << difference);
    REQUIRE(difference <= 1e-6);
  }
}
