// communicator_nccl.cpp — the NCCL backend: CUDA tensors, one GPU per rank
// (chosen by local rank), bootstrapped over MPI. Compiled and linked wherever
// the build found CUDA and NCCL, GPU or not; elsewhere make_communicator
// explains that this build has no NCCL.
#include <fmt/format.h>

#include "backends.hpp"
#include "workbook/errors.hpp"

#ifdef WORKBOOK_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <exception>
#include <thread>
#ifdef WORKBOOK_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif
#endif

namespace workbook::detail {

#ifdef WORKBOOK_WITH_NCCL
namespace {

void check_cuda(cudaError_t code, const LaunchEnv& env, const char* call) {
  if (code != cudaSuccess)
    throw CommunicationError(fmt::format("{}: {} failed: {}", env.label(), call, cudaGetErrorString(code)));
}

void check_nccl(ncclResult_t code, const LaunchEnv& env, const char* call) {
  if (code != ncclSuccess)
    throw CommunicationError(fmt::format("{}: {} failed: {}", env.label(), call, ncclGetErrorString(code)));
}

ncclDataType_t nccl_type(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return ncclFloat32;
    case torch::kFloat64: return ncclFloat64;
    case torch::kInt32: return ncclInt32;
    case torch::kInt64: return ncclInt64;
    case torch::kUInt8: return ncclUint8;
    case torch::kFloat16: return ncclFloat16;
    case torch::kBFloat16: return ncclBfloat16;
    default: throw InternalError(fmt::format("no NCCL type for {}", c10::toString(dtype)));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Average ? ncclAvg : ncclMax; }

// Note: [NCCL and the host]
// NCCL calls only enqueue work on a CUDA stream (LibTorch's current stream
// for this GPU, so they are ordered with the kernels that produced the
// tensors). The Communicator's contract is that a call returns complete, so
// each call then waits for the stream, polling rather than blocking so that
// an error a peer reports (ncclCommGetAsyncError) ends the wait; the watchdog
// bounds it like any other call. Chapter 4 overlaps communication with
// computation by issuing calls from another stream instead.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const LaunchEnv& env, const CommunicatorOptions& options) : Communicator(env, options) {
    int devices = 0;
    const cudaError_t counted = cudaGetDeviceCount(&devices);
    WB_CHECK(counted == cudaSuccess && devices > 0, "{}: the NCCL backend needs a GPU, and there is none ({})",
             env.label(), counted == cudaSuccess ? "no CUDA device" : cudaGetErrorString(counted));
    // One rank per GPU: local rank r uses GPU r. NCCL refuses two ranks of
    // one communicator on the same GPU, so more ranks than GPUs is an error.
    WB_CHECK(env.local_rank < devices && (env.local_size == 0 || env.local_size <= devices),
             "{}: the NCCL backend needs one GPU per rank, and this node has {} GPU(s) for {} rank(s): start at "
             "most {} rank(s) per node (several ranks can share a GPU only through the MPI backend, --device cpu)",
             env.label(), devices, env.local_size > 0 ? env.local_size : env.local_rank + 1, devices);
    device_index_ = env.local_rank;
    check_cuda(cudaSetDevice(device_index_), env, "cudaSetDevice");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &check_), env, "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(check_, MPI_ERRORS_RETURN), env, "MPI_Comm_set_errhandler");
    // Rank 0 creates the id that names this NCCL communicator; MPI carries it to everyone.
    ncclUniqueId id;
    if (env.rank == 0) check_nccl(ncclGetUniqueId(&id), env, "ncclGetUniqueId");
    {
      watchdog::CallScope scope("the NCCL bootstrap (MPI_Bcast of the ncclUniqueId, ncclCommInitRank)",
                                options.timeout_s);
      check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), env, "MPI_Bcast (ncclUniqueId)");
      check_nccl(ncclCommInitRank(&comm_, env.world_size, id, env.rank), env, "ncclCommInitRank");
    }
    check_cuda(cudaMalloc(&barrier_word_, sizeof(float)), env, "cudaMalloc");
  }
  // A group of `parent`'s ranks: ncclCommSplit makes its NCCL communicator
  // (every rank of the parent calls it), MPI_Comm_split the check channel.
  NcclCommunicator(const LaunchEnv& env, const CommunicatorOptions& options, ncclComm_t parent, MPI_Comm parent_check,
                   int device_index, int color, int key)
      : Communicator(env, options), device_index_(device_index) {
    check_cuda(cudaSetDevice(device_index_), env, "cudaSetDevice");
    check_mpi(MPI_Comm_split(parent_check, color, key, &check_), env, "MPI_Comm_split");
    check_mpi(MPI_Comm_set_errhandler(check_, MPI_ERRORS_RETURN), env, "MPI_Comm_set_errhandler");
    check_nccl(ncclCommSplit(parent, color, key, &comm_, nullptr), env, "ncclCommSplit");
    check_cuda(cudaMalloc(&barrier_word_, sizeof(float)), env, "cudaMalloc");
  }
  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      if (std::uncaught_exceptions() > 0) {
        // Unwinding after an error: the peers may be inside a collective
        // that will never complete. Abort does not wait for them.
        ncclCommAbort(comm_);
      } else {
        // Finalize flushes this rank's pending work and waits for its peers:
        // watched, like any call that waits on other ranks.
        watchdog::CallScope scope("ncclCommFinalize", options().timeout_s);
        ncclCommFinalize(comm_);
        ncclCommDestroy(comm_);
      }
    }
    if (barrier_word_ != nullptr) cudaFree(barrier_word_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&check_);
  }
  Backend backend() const override { return Backend::Nccl; }
  bool takes_turns() const override { return true; }  // Note [one call at a time] in communicator.cpp
  // Not measured on a GPU yet: the MPI backend's shared-memory size (Note
  // [the message size follows the link] in communicator_mpi.cpp).
  int64_t message_bytes() const override { return int64_t{512} << 10; }
  torch::Device device() const override {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index_));
  }

 protected:
  void do_barrier() override {
    // NCCL has no barrier: an all-reduce of one number that every rank must join.
    check_nccl(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream()), launch_env(),
               "ncclAllReduce (barrier)");
    wait("barrier");
  }
  void do_broadcast(torch::Tensor& tensor, int root) override {
    check_nccl(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                             nccl_type(tensor.scalar_type()), root, comm_, stream()),
               launch_env(), "ncclBroadcast");
    wait("ncclBroadcast");
  }
  void do_all_reduce(torch::Tensor& tensor, ReduceOp op) override {
    check_nccl(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                             nccl_type(tensor.scalar_type()), nccl_op(op), comm_, stream()),
               launch_env(), "ncclAllReduce");
    wait("ncclAllReduce");
  }
  void do_all_gather(const torch::Tensor& input, torch::Tensor& output) override {
    check_nccl(ncclAllGather(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                             nccl_type(input.scalar_type()), comm_, stream()),
               launch_env(), "ncclAllGather");
    wait("ncclAllGather");
  }
  void do_reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override {
    check_nccl(ncclReduceScatter(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()),
                                 nccl_type(output.scalar_type()), nccl_op(op), comm_, stream()),
               launch_env(), "ncclReduceScatter");
    wait("ncclReduceScatter");
  }
  void do_all_to_all(const torch::Tensor& send, const std::vector<int64_t>& send_counts, torch::Tensor& recv,
                     const std::vector<int64_t>& recv_counts) override {
    // NCCL has no all-to-all of its own: a send and a receive per peer with
    // something to move, issued in one group so that none waits for another.
    const ncclDataType_t type = nccl_type(send.scalar_type());
    const auto element = static_cast<int64_t>(send.element_size());
    const auto* send_bytes = static_cast<const char*>(send.data_ptr());
    auto* recv_bytes = static_cast<char*>(recv.data_ptr());
    int64_t send_offset = 0, receive_offset = 0;
    check_nccl(ncclGroupStart(), launch_env(), "ncclGroupStart");
    for (int peer = 0; peer < size(); ++peer) {
      const auto r = static_cast<size_t>(peer);
      if (send_counts[r] > 0)
        check_nccl(ncclSend(send_bytes + send_offset * element, static_cast<size_t>(send_counts[r]), type, peer, comm_,
                            stream()),
                   launch_env(), "ncclSend (all_to_all)");
      if (recv_counts[r] > 0)
        check_nccl(ncclRecv(recv_bytes + receive_offset * element, static_cast<size_t>(recv_counts[r]), type, peer,
                            comm_, stream()),
                   launch_env(), "ncclRecv (all_to_all)");
      send_offset += send_counts[r];
      receive_offset += recv_counts[r];
    }
    check_nccl(ncclGroupEnd(), launch_env(), "ncclGroupEnd (all_to_all)");
    wait("all_to_all (ncclSend + ncclRecv per peer)");
  }
  void do_send(const torch::Tensor& tensor, int peer) override {
    check_nccl(ncclSend(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.scalar_type()), peer,
                        comm_, stream()),
               launch_env(), "ncclSend");
    wait("ncclSend");
  }
  void do_recv(torch::Tensor& tensor, int peer) override {
    check_nccl(ncclRecv(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.scalar_type()), peer,
                        comm_, stream()),
               launch_env(), "ncclRecv");
    wait("ncclRecv");
  }
  std::function<void()> do_start_exchange(const torch::Tensor& send, int to, torch::Tensor& recv,
                                          int from) override {
    // Note: NCCL's send and recv block the stream until the peer's matching
    // call arrives, so a ring of ranks that each send before receiving would
    // deadlock. Inside one group the two are issued together.
    check_nccl(ncclGroupStart(), launch_env(), "ncclGroupStart");
    check_nccl(ncclSend(send.data_ptr(), static_cast<size_t>(send.numel()), nccl_type(send.scalar_type()), to, comm_,
                        stream()),
               launch_env(), "ncclSend");
    check_nccl(ncclRecv(recv.data_ptr(), static_cast<size_t>(recv.numel()), nccl_type(recv.scalar_type()), from,
                        comm_, stream()),
               launch_env(), "ncclRecv");
    check_nccl(ncclGroupEnd(), launch_env(), "ncclGroupEnd (exchange)");
    return [this] { wait("exchange (ncclSend + ncclRecv)"); };
  }
  std::unique_ptr<Communicator> do_split(int color, int key, const std::string& name) override {
    // The group's rank and size: from the check channel split the same way.
    MPI_Comm group = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(check_, color, key, &group), launch_env(), "MPI_Comm_split");
    LaunchEnv env = launch_env();
    check_mpi(MPI_Comm_rank(group, &env.rank), launch_env(), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(group, &env.world_size), launch_env(), "MPI_Comm_size");
    env.job_ranks = job_ranks_of(group);
    MPI_Comm_free(&group);
    env.group = name;
    return std::make_unique<NcclCommunicator>(env, options(), comm_, check_, device_index_, color, key);
  }

  std::vector<std::string> exchange_signatures(const std::string& bytes) override {
    return allgather_bytes(check_, bytes, launch_env());
  }

 private:
  cudaStream_t stream() const {
#ifdef WORKBOOK_TORCH_CUDA
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index_)).stream();
#else
    return cudaStreamLegacy;  // a CPU LibTorch has no CUDA tensors; kept so that this file links
#endif
  }

  void wait(const char* call) {
    const cudaStream_t s = stream();
    while (true) {
      const cudaError_t state = cudaStreamQuery(s);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) check_cuda(state, launch_env(), call);
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), launch_env(), "ncclCommGetAsyncError");
      if (async != ncclSuccess) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        check_nccl(async, launch_env(), call);
      }
      std::this_thread::yield();
    }
  }

  int device_index_ = 0;
  ncclComm_t comm_ = nullptr;
  MPI_Comm check_ = MPI_COMM_NULL;
  void* barrier_word_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv& env, const CommunicatorOptions& options) {
  start_mpi(env, options.timeout_s);
  return std::make_unique<NcclCommunicator>(env, options);
}

#else

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv& env, const CommunicatorOptions&) {
  throw UserError(fmt::format("{}: this build has no NCCL (the CUDA toolkit and NCCL were not found when it was "
                              "configured): use --device cpu, or build with the cuda preset",
                              env.label()));
}

#endif

}  // namespace workbook::detail
