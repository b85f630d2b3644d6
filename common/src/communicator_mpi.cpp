// communicator_mpi.cpp — the MPI backend: CPU tensors over Open MPI (or any
// MPI), and the start of MPI itself, which the NCCL backend uses too.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "backends.hpp"
#include "workbook/errors.hpp"

namespace workbook {

namespace {
thread_local bool g_patient_waiting = false;
}  // namespace

bool set_patient_waiting(bool patient) {
  const bool previous = g_patient_waiting;
  g_patient_waiting = patient;
  return previous;
}

namespace detail {
namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Datatype mpi_type(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return MPI_FLOAT;
    case torch::kFloat64: return MPI_DOUBLE;
    case torch::kInt32: return MPI_INT32_T;
    case torch::kInt64: return MPI_INT64_T;
    case torch::kUInt8: return MPI_UINT8_T;
    case torch::kFloat16:
    case torch::kBFloat16: return MPI_UINT16_T;  // two bytes moved as they are; sums: sum_op
    default: throw InternalError(fmt::format("no MPI type for {}", c10::toString(dtype)));
  }
}

// Note: [16-bit sums over MPI] MPI has no float16 or bfloat16 type. The
// bytes travel as MPI_UINT16_T, and a sum is a user-defined operation that
// adds in the 16-bit type itself, each addition rounded to 16 bits, as
// NCCL's float16 and bfloat16 sums do: what Chapter 9 measures is the same
// on both backends.
template <typename Half>
void sum_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
  const Half* from = static_cast<const Half*>(in);
  Half* into = static_cast<Half*>(inout);
  for (int i = 0; i < *length; ++i) into[i] = static_cast<Half>(into[i] + from[i]);
}

template <typename Half>
void max_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
  const Half* from = static_cast<const Half*>(in);
  Half* into = static_cast<Half*>(inout);
  for (int i = 0; i < *length; ++i)
    if (static_cast<float>(from[i]) > static_cast<float>(into[i])) into[i] = from[i];
}

// A user-defined operation, made the first time it is needed (after MPI_Init).
MPI_Op made_once(MPI_Op& op, MPI_User_function* function) {
  if (op == MPI_OP_NULL) MPI_Op_create(function, /*commute=*/1, &op);
  return op;
}

// MPI_MAX for MPI's own types; 16-bit values travel as MPI_UINT16_T, whose
// largest bit pattern is not the largest number, so they get their own.
MPI_Op max_op(torch::ScalarType dtype) {
  static MPI_Op half_max = MPI_OP_NULL, bfloat16_max = MPI_OP_NULL;
  if (dtype == torch::kFloat16) return made_once(half_max, &max_16bit<c10::Half>);
  if (dtype == torch::kBFloat16) return made_once(bfloat16_max, &max_16bit<c10::BFloat16>);
  return MPI_MAX;
}

MPI_Op sum_op(torch::ScalarType dtype) {
  static MPI_Op half_sum = MPI_OP_NULL, bfloat16_sum = MPI_OP_NULL;
  if (dtype == torch::kFloat16) return made_once(half_sum, &sum_16bit<c10::Half>);
  if (dtype == torch::kBFloat16) return made_once(bfloat16_sum, &sum_16bit<c10::BFloat16>);
  return MPI_SUM;
}

// MPI counts are int: one call moves at most 2^31 - 1 elements.
int mpi_count(int64_t elements) {
  WB_ASSERT(elements <= std::numeric_limits<int>::max(), "{} elements in one MPI call: split it into parts below 2^31",
            elements);
  return static_cast<int>(elements);
}

}  // namespace

void check_mpi(int code, const LaunchEnv& env, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CommunicationError(fmt::format("{}: {} failed: {}", env.label(), call, text));
}

void start_mpi(const LaunchEnv& env, double timeout_s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Note: SERIALIZED, not MULTIPLE: one thread at a time calls MPI (a
    // communication thread in Chapters 4 and 11 takes turns with the main
    // thread: Note [one call at a time] in communicator.cpp). The watchdog
    // thread never calls MPI.
    int provided = 0;
    int code = 0;
    {
      // Start-up waits on the launcher and the other ranks too: a launcher
      // that cannot reach a node would otherwise hang here, silently.
      watchdog::CallScope scope("MPI_Init_thread (MPI's start-up: reaching the launcher and the other ranks)",
                                timeout_s);
      code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    }
    WB_CHECK(code == MPI_SUCCESS, "{}: MPI_Init_thread failed (code {})", env.label(), code);
    WB_CHECK(provided >= MPI_THREAD_SERIALIZED, "this MPI library does not support MPI_THREAD_SERIALIZED");
    std::atexit(finalize_at_exit);
  }
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), env, "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), env, "MPI_Comm_size");
  WB_CHECK(rank == env.rank && size == env.world_size,
           "MPI says this is rank {} of {}, but {} says {}: {}", rank, size, env.launcher, env.label(),
           env.world_size > size ? "the job asked for more processes than were started together. Start them with "
                                   "srun or mpirun (a program started on its own is a job of one)"
                                 : "the launcher's variables do not describe this job (were they set by hand?)");
}

std::vector<int> job_ranks_of(MPI_Comm group) {
  MPI_Group here = MPI_GROUP_NULL, job = MPI_GROUP_NULL;
  int size = 0;
  MPI_Comm_size(group, &size);
  std::vector<int> ranks(static_cast<size_t>(size)), translated(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  MPI_Comm_group(group, &here);
  MPI_Comm_group(MPI_COMM_WORLD, &job);
  MPI_Group_translate_ranks(here, size, ranks.data(), job, translated.data());
  MPI_Group_free(&here);
  MPI_Group_free(&job);
  return translated;
}

std::vector<std::string> allgather_bytes(MPI_Comm channel, const std::string& bytes, const LaunchEnv& env) {
  std::string all(bytes.size() * static_cast<size_t>(env.world_size), '\0');
  check_mpi(MPI_Allgather(bytes.data(), mpi_count(static_cast<int64_t>(bytes.size())), MPI_CHAR, all.data(),
                          mpi_count(static_cast<int64_t>(bytes.size())), MPI_CHAR, channel),
            env, "MPI_Allgather (collective check)");
  std::vector<std::string> parts;
  for (int r = 0; r < env.world_size; ++r) parts.push_back(all.substr(static_cast<size_t>(r) * bytes.size(), bytes.size()));
  return parts;
}

namespace {

// Note: [the message size follows the link]
// Chapter 4's ring cuts each step into chunks, one message each. On shared
// memory every message costs a fixed hand-over, so larger is better: in one
// pair of runs (2 ranks, this 2-core machine) 512 KiB reached 3.65 and 4.53
// GB/s at 16 and 64 MiB where 128 KiB reached 2.85 and 3.52 (an earlier
// measurement, the lesson's "Chunks on a CPU", found 4%). Between nodes, on
// the emulated cluster at 1 Gbit/s with Open MPI's TCP transport sending
// without its emulated put (Note [Open MPI's TCP without put] in
// hpc/cluster.sh), rings of 128 KiB messages carried 0.82-0.92 of the link
// at 16 and 64 MiB with 1500-byte frames and 0.96-0.98 with 9000-byte ones;
// 256 KiB 0.32, 512 KiB 0.43-0.47 (0.47-0.60 with 9000-byte frames), 4 MiB
// 0.56-0.88 (the lesson's chunk table). Open MPI sends a message
// over TCP as a 64 KiB first fragment, then fragments of up to 128 KiB
// (btl_tcp_max_send_size, 4.1 and 5); why messages of a few fragments run
// this much slower was not found. The two messages a ring keeps in flight,
// 256 KiB, still cover 10 Gbit/s times a 0.2 ms round trip (the
// bandwidth-delay product), so the smaller chunk loses nothing there.
// Every rank must pick the same size (the exchanges pair up chunk by
// chunk): "every rank on one node" is true on all ranks or on none.
constexpr int64_t kSharedMemoryMessageBytes = int64_t{512} << 10;
constexpr int64_t kNetworkMessageBytes = int64_t{128} << 10;

// Whether every rank of `comm` shares this rank's node (its memory). Collective.
bool all_ranks_on_one_node(MPI_Comm comm, const LaunchEnv& env) {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), env, "MPI_Comm_split_type");
  int ranks_on_node = 0;
  check_mpi(MPI_Comm_size(node, &ranks_on_node), env, "MPI_Comm_size");
  MPI_Comm_free(&node);
  return ranks_on_node == env.world_size;
}

// Note: two MPI communicators, both duplicates of MPI_COMM_WORLD: `data_`
// carries the tensors, `check_` the signatures of the collective check, so
// that a check can never be matched with a data transfer. Duplicating is a
// collective call: every rank creates its Communicators in the same order.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const LaunchEnv& env, const CommunicatorOptions& options)
      : MpiCommunicator(env, options, MPI_COMM_WORLD, MPI_COMM_WORLD, -1, 0) {}
  // Over `data` and `check` themselves (duplicated), or, with color >= 0,
  // over the group of their ranks that MPI_Comm_split makes of them.
  MpiCommunicator(const LaunchEnv& env, const CommunicatorOptions& options, MPI_Comm data, MPI_Comm check, int color,
                  int key)
      : Communicator(env, options) {
    if (color < 0) {
      check_mpi(MPI_Comm_dup(data, &data_), env, "MPI_Comm_dup");
      check_mpi(MPI_Comm_dup(check, &check_), env, "MPI_Comm_dup");
    } else {
      check_mpi(MPI_Comm_split(data, color, key, &data_), env, "MPI_Comm_split");
      check_mpi(MPI_Comm_split(check, color, key, &check_), env, "MPI_Comm_split");
    }
    // Errors come back as return codes (checked) instead of aborting the job.
    check_mpi(MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN), env, "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_set_errhandler(check_, MPI_ERRORS_RETURN), env, "MPI_Comm_set_errhandler");
    message_bytes_ = all_ranks_on_one_node(data_, env) ? kSharedMemoryMessageBytes : kNetworkMessageBytes;
  }
  ~MpiCommunicator() override {
    // A destructor cannot throw: failures here are not checked (the process is ending or the job is over).
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&data_);
    MPI_Comm_free(&check_);
  }
  Backend backend() const override { return Backend::Mpi; }
  bool takes_turns() const override { return true; }  // Note [one call at a time] in communicator.cpp
  torch::Device device() const override { return torch::kCPU; }
  int64_t message_bytes() const override { return message_bytes_; }

 protected:
  void do_barrier() override { check(MPI_Barrier(data_), "MPI_Barrier"); }

  void do_broadcast(torch::Tensor& tensor, int root) override {
    check(MPI_Bcast(tensor.data_ptr(), mpi_count(tensor.numel()), mpi_type(tensor.scalar_type()), root, data_),
          "MPI_Bcast");
  }

  void do_all_reduce(torch::Tensor& tensor, ReduceOp op) override {
    const MPI_Op combine = op == ReduceOp::Max ? max_op(tensor.scalar_type()) : sum_op(tensor.scalar_type());
    check(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), mpi_count(tensor.numel()), mpi_type(tensor.scalar_type()),
                        combine, data_),
          "MPI_Allreduce");
    if (op == ReduceOp::Average) tensor.div_(size());  // MPI has no average: sum, then divide
  }

  void do_all_gather(const torch::Tensor& input, torch::Tensor& output) override {
    const MPI_Datatype type = mpi_type(input.scalar_type());
    // In place when the input is this rank's chunk of the output (Note [all-gather in place]).
    const bool in_place = input.numel() > 0 && input.data_ptr() == static_cast<const char*>(output.data_ptr()) +
                                                                       rank() * input.nbytes();
    check(MPI_Allgather(in_place ? MPI_IN_PLACE : input.data_ptr(), mpi_count(input.numel()), type, output.data_ptr(),
                        mpi_count(input.numel()), type, data_),
          "MPI_Allgather");
  }

  // Note: [MPI_Reduce_scatter, not _block] The equal-chunk call,
  // MPI_Reduce_scatter_block, is what this is; but Open MPI 4.1's tuned
  // component always runs it as basic_linear (coll_tuned_decision_fixed.c:
  // a reduce of the whole buffer to rank 0, then a scatter), twice an
  // all-reduce's bytes through rank 0's link. MPI_Reduce_scatter with equal
  // counts is the same operation, and its decision picks recursive halving
  // or a ring. Measured with 13 MB of float32 (Chapter 11's gradients) on 2
  // emulated nodes at 1 Gbit/s (chapters/11_gpt/measured/reduce_scatter_calls_*):
  // 0.131 s against 0.053 s at 2 ranks, 0.253 s against 0.089 s at 4 (2 a
  // node), medians; an all-reduce took 0.107 s and 0.152 s.
  void do_reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override {
    const MPI_Op combine = op == ReduceOp::Max ? max_op(output.scalar_type()) : sum_op(output.scalar_type());
    chunk_counts_.assign(static_cast<size_t>(size()), mpi_count(output.numel()));
    check(MPI_Reduce_scatter(input.data_ptr(), output.data_ptr(), chunk_counts_.data(), mpi_type(output.scalar_type()),
                             combine, data_),
          "MPI_Reduce_scatter");
    if (op == ReduceOp::Average) output.div_(size());
  }

  void do_all_to_all(const torch::Tensor& send, const std::vector<int64_t>& send_counts, torch::Tensor& recv,
                     const std::vector<int64_t>& recv_counts) override {
    std::vector<int> sends(send_counts.size()), send_at(send_counts.size()), receives(recv_counts.size()),
        receive_at(recv_counts.size());
    int64_t send_offset = 0, receive_offset = 0;
    for (size_t r = 0; r < send_counts.size(); ++r) {
      sends[r] = mpi_count(send_counts[r]);
      send_at[r] = mpi_count(send_offset);
      receives[r] = mpi_count(recv_counts[r]);
      receive_at[r] = mpi_count(receive_offset);
      send_offset += send_counts[r];
      receive_offset += recv_counts[r];
    }
    const MPI_Datatype type = mpi_type(send.scalar_type());
    check(MPI_Alltoallv(send.data_ptr(), sends.data(), send_at.data(), type, recv.data_ptr(), receives.data(),
                        receive_at.data(), type, data_),
          "MPI_Alltoallv");
  }

  void do_send(const torch::Tensor& tensor, int peer) override {
    check(MPI_Send(tensor.data_ptr(), mpi_count(tensor.numel()), mpi_type(tensor.scalar_type()), peer, 0, data_),
          "MPI_Send");
  }

  void do_recv(torch::Tensor& tensor, int peer) override {
    MPI_Status status;
    const MPI_Datatype type = mpi_type(tensor.scalar_type());
    check(MPI_Recv(tensor.data_ptr(), mpi_count(tensor.numel()), type, peer, 0, data_, &status), "MPI_Recv");
    int received = 0;
    check(MPI_Get_count(&status, type, &received), "MPI_Get_count");
    if (received != tensor.numel())
      throw CommunicationError(fmt::format("{}: recv from rank {} expected {} elements and got {}: the send and the "
                                           "recv must have the same count", launch_env().label(), peer,
                                           tensor.numel(), received));
  }

  std::function<void()> do_start_exchange(const torch::Tensor& send, int to, torch::Tensor& recv,
                                          int from) override {
    // Note: the receive is posted first, so the data of a peer's send can
    // land directly in `recv`. Tag 1 keeps exchanges apart from send/recv.
    auto requests = std::make_shared<std::array<MPI_Request, 2>>();
    const MPI_Datatype recv_type = mpi_type(recv.scalar_type());
    check(MPI_Irecv(recv.data_ptr(), mpi_count(recv.numel()), recv_type, from, 1, data_, &(*requests)[0]),
          "MPI_Irecv");
    check(MPI_Isend(send.data_ptr(), mpi_count(send.numel()), mpi_type(send.scalar_type()), to, 1, data_,
                    &(*requests)[1]),
          "MPI_Isend");
    return [this, requests, recv_type, expected = recv.numel(), from] {
      // Note: [waiting without taking a core]
      // MPI_Waitall spins until the peer's data arrives. When another thread
      // of this process wants the core (Chapter 4's communication thread
      // waits while backward computes), a spinning waiter takes it away for
      // whole time slices. So the wait polls: a short spin, then it yields
      // the core at each poll (eager: with nothing else to run, yield returns
      // at once) or sleeps between polls (patient: a background thread).
      // A patient wait sleeps an eighth of what it has waited so far, from
      // 20 to 200 us (each sleep lasts some 50 us longer: Linux's timer
      // slack): an exchange in memory is answered within the first sleeps,
      // while on a 1 Gbit/s link (a 128 KiB chunk takes 1 ms) each poll
      // costs the core backward needs. Measured on the emulated cluster
      // (FashionCNN's 5.6 MiB bucket, 58 ms at 1 Gbit/s): the communication
      // thread used 15 ms of CPU sleeping 20 us between polls, 10 ms at 200.
      std::array<MPI_Status, 2> statuses;
      int done = 0;
      const auto started = std::chrono::steady_clock::now();
      for (int polls = 0;; ++polls) {
        check(MPI_Testall(2, requests->data(), &done, statuses.data()), "MPI_Testall (exchange)");
        if (done) break;
        if (polls < 64) continue;
        if (!g_patient_waiting) {
          std::this_thread::yield();
          continue;
        }
        const auto waited = std::chrono::steady_clock::now() - started;
        std::this_thread::sleep_for(std::clamp<std::chrono::steady_clock::duration>(
            waited / 8, std::chrono::microseconds(20), std::chrono::microseconds(200)));
      }
      int received = 0;
      check(MPI_Get_count(&statuses[0], recv_type, &received), "MPI_Get_count");
      if (received != expected)
        throw CommunicationError(fmt::format("{}: exchange expected {} elements from rank {} and got {}: both "
                                             "sides of an exchange must agree on the count", launch_env().label(),
                                             expected, from, received));
    };
  }

  std::vector<std::string> exchange_signatures(const std::string& bytes) override {
    return allgather_bytes(check_, bytes, launch_env());
  }

  std::unique_ptr<Communicator> do_split(int color, int key, const std::string& name) override {
    // The group's rank and size are only known once it exists: split a
    // scratch communicator first to learn them, then build the real one.
    MPI_Comm group = MPI_COMM_NULL;
    check(MPI_Comm_split(data_, color, key, &group), "MPI_Comm_split");
    LaunchEnv env = launch_env();
    check(MPI_Comm_rank(group, &env.rank), "MPI_Comm_rank");
    check(MPI_Comm_size(group, &env.world_size), "MPI_Comm_size");
    env.job_ranks = job_ranks_of(group);
    MPI_Comm_free(&group);
    env.group = name;
    return std::make_unique<MpiCommunicator>(env, options(), data_, check_, color, key);
  }

 private:
  void check(int code, const char* call) { check_mpi(code, launch_env(), call); }
  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm check_ = MPI_COMM_NULL;
  int64_t message_bytes_ = kSharedMemoryMessageBytes;
  std::vector<int> chunk_counts_;  // MPI_Reduce_scatter's counts, every rank's chunk the same
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const LaunchEnv& env, const CommunicatorOptions& options) {
  start_mpi(env, options.timeout_s);
  return std::make_unique<MpiCommunicator>(env, options);
}

}  // namespace detail

std::unique_ptr<Communicator> make_communicator(Backend backend, const LaunchEnv& env,
                                                const CommunicatorOptions& options) {
  return backend == Backend::Mpi ? detail::make_mpi_communicator(env, options)
                                 : detail::make_nccl_communicator(env, options);
}

}  // namespace workbook
