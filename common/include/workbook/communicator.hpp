// communicator.hpp — the Communicator: collectives and point-to-point
// transfers of tensors between the ranks of a job, over MPI (CPU tensors) or
// NCCL (CUDA tensors), behind one interface.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "workbook/launch.hpp"
#include "workbook/watchdog.hpp"

namespace workbook {

enum class Backend { Mpi, Nccl };
// How all_reduce and reduce_scatter combine the ranks' values, element-wise:
// the sum, the mean (floating point only), or the largest.
enum class ReduceOp { Sum, Average, Max };

// The operations, for counting and for messages.
enum class CommOp { Barrier, Broadcast, AllReduce, AllGather, ReduceScatter, Send, Recv, Exchange, Split, AllToAll };
inline constexpr int kCommOpCount = 10;
const char* op_name(CommOp op);

struct CommunicatorOptions {
  // A call that has not returned after this many seconds ends the process,
  // naming the rank and the call (watchdog.hpp). <= 0: wait forever.
  double timeout_s = 60.0;
  // Before every collective, compare what each rank is about to call (op,
  // dtype, count, root) and fail at once, on every rank, when they differ,
  // instead of hanging or corrupting data. One extra small all-gather per
  // collective: on in the tests, off by default in programs.
  bool check_collectives = false;
  // Both read from the environment when set: WORKBOOK_COMM_TIMEOUT (seconds)
  // and WORKBOOK_CHECK_COLLECTIVES (0 or 1). Flags override the environment.
  static CommunicatorOptions from_environment();
};

// Thrown on every rank when a checked collective differs between ranks, and
// when MPI or NCCL report an error: a bug in the calling code, not bad input.
class CommunicationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a communicator has done: calls and elements per operation (for an
// exchange, the elements it sent).
struct CommStats {
  std::array<int64_t, kCommOpCount> calls{};
  std::array<int64_t, kCommOpCount> elements{};
  std::array<int64_t, kCommOpCount> bytes{};  // the elements times their size: 2 each in 16 bits
  int64_t count(CommOp op) const { return calls[static_cast<int>(op)]; }
  int64_t collectives() const;  // every call but send, recv and exchange
  // Elements this rank sent point to point (send and exchange): what a
  // collective built from them, like Chapter 4's ring, puts on the wire.
  int64_t elements_sent() const;
  int64_t bytes_sent() const;  // the same, in bytes
  // The most exchanges this rank had started and not yet waited for, at
  // once: 2 or more when a chunked ring has the next chunk on its way while
  // it adds the last (Chapter 4's tests look).
  int64_t most_exchanges_in_flight = 0;
};

// An exchange in flight (Communicator::start_exchange). wait() returns once
// both its send and its receive are complete; until then the received
// tensor may not be touched, and the sent one may be read but not written
// or freed. Waited for on destruction if wait() was not called.
class PendingExchange {
 public:
  PendingExchange() = default;
  PendingExchange(std::function<void()> wait, std::string what, double timeout_s)
      : wait_(std::move(wait)), what_(std::move(what)), timeout_s_(timeout_s) {}
  PendingExchange(PendingExchange&& other) noexcept { *this = std::move(other); }
  PendingExchange& operator=(PendingExchange&& other) noexcept;
  ~PendingExchange();
  void wait();  // watched like any call: "exchange #12 (...) did not return in 60 s"
  bool pending() const { return static_cast<bool>(wait_); }

 private:
  friend class Communicator;  // sets waiting_ and takes_turns_
  std::function<void()> wait_;
  std::string what_;
  double timeout_s_ = 0.0;
  watchdog::Waiting waiting_;  // whom wait() waits for (the watchdog's wait board)
  bool takes_turns_ = false;   // its Communicator's takes_turns()
};

// Note: [Communicator semantics]
// - Every rank of the job must make the same collective calls in the same
//   order, with the same dtype and element count (and root). Counts are
//   elements, never bytes.
// - Tensors are contiguous, on the backend's device (CPU for MPI; this rank's
//   GPU for NCCL), float32, float64, float16, bfloat16, int32, int64 or
//   uint8. Average needs a floating-point dtype. A 16-bit sum rounds each
//   addition to 16 bits (Note [16-bit sums over MPI]).
// - Calls return when the operation is complete for this rank: the result is
//   in the tensor (on NCCL, the host waits for the GPU stream).
// - Each Communicator has its own MPI communicator (a duplicate of the
//   world), so the calls of two Communicators never match each other.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const LaunchEnv& launch_env() const { return env_; }
  const CommunicatorOptions& options() const { return options_; }
  virtual Backend backend() const = 0;
  virtual torch::Device device() const = 0;  // cpu, or this rank's GPU
  // Whether each call takes this process's turn first (Note [one call at a
  // time] in communicator.cpp): MPI's and NCCL's do; Chapter 10's simulated
  // ranks, threads of one process that wait for each other, must not.
  virtual bool takes_turns() const { return false; }
  // The message size this Communicator's transport moves at its best, for a
  // caller that cuts a large transfer into pieces (Chapter 4's ring chunks):
  // the same on every rank. Note [the message size follows the link] in
  // communicator_mpi.cpp.
  virtual int64_t message_bytes() const = 0;
  const CommStats& stats() const { return stats_; }

  // Waits until every rank has called it.
  void barrier();
  // `tensor` on every rank becomes `root`'s.
  void broadcast(torch::Tensor& tensor, int root);
  // `tensor` on every rank becomes the element-wise sum (mean, largest) over ranks.
  void all_reduce(torch::Tensor& tensor, ReduceOp op);
  // `output` (size() * input.numel() elements) holds every rank's `input`,
  // rank r's at elements [r * n, (r + 1) * n). `input` may be this rank's
  // own chunk of `output` (a view of it: a gather in place, no copy); any
  // other overlap of the two is refused.
  void all_gather(const torch::Tensor& input, torch::Tensor& output);
  torch::Tensor all_gather(const torch::Tensor& input);  // a new [size(), input.shape...] tensor
  // `input` holds size() chunks of output.numel() elements; `output` on rank
  // r becomes the sum (or mean) over ranks of their chunk r. The two must
  // not overlap.
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op);
  // Every rank sends a run of elements to every rank (itself included), of
  // any length: `send` holds size() runs one after another in rank order,
  // send_counts[r] elements for rank r; `recv` receives recv_counts[r]
  // elements from each rank r, in rank order. Counts may be 0. What rank r
  // sends to rank s must be what s expects from r: the counts are compared
  // first (a small all-to-all of them, then one flag all-reduced: the call
  // counts once), and a mismatch is a CommunicationError on every rank,
  // naming the pairs, before any data moves. MPI: MPI_Alltoallv; NCCL: a
  // send and a receive per peer in one group.
  void all_to_all(const torch::Tensor& send, const std::vector<int64_t>& send_counts, torch::Tensor& recv,
                  const std::vector<int64_t>& recv_counts);
  // Point to point: `recv` fills `tensor` (its dtype and count must match the send).
  void send(const torch::Tensor& tensor, int peer);
  void recv(torch::Tensor& tensor, int peer);
  // Sends `send` to rank `to` and, at the same time, receives `recv` from
  // rank `from` (the two may be one rank): the step of a ring. Both directions
  // progress together, so ranks that all exchange at once cannot deadlock,
  // while a send posted before its recv can (once messages are too large for
  // the library to buffer, a blocking send waits for its receiver). Exchanges
  // between two ranks match in the order they were started. On NCCL the pair
  // is one ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd.
  PendingExchange start_exchange(const torch::Tensor& send, int to, torch::Tensor& recv, int from);
  void exchange(const torch::Tensor& send, int to, torch::Tensor& recv, int from) {
    start_exchange(send, to, recv, from).wait();
  }

  // A communicator over a group of this one's ranks: those that pass the
  // same `color` (>= 0), numbered by `key` and then by rank, as MPI_Comm_split
  // does. Every rank of this communicator calls it, in the same order (it is
  // collective, and watched like one). `name` says which group this is, in
  // every message its calls give: "rank 1 of 2 in tensor group 1 (rank 3 of
  // 4 in the job)". Same backend, device and options as this one.
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name);

 protected:
  Communicator(LaunchEnv env, CommunicatorOptions options);
  virtual void do_barrier() = 0;
  virtual void do_broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void do_all_reduce(torch::Tensor& tensor, ReduceOp op) = 0;
  virtual void do_all_gather(const torch::Tensor& input, torch::Tensor& output) = 0;
  virtual void do_reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) = 0;
  virtual void do_all_to_all(const torch::Tensor& send, const std::vector<int64_t>& send_counts, torch::Tensor& recv,
                             const std::vector<int64_t>& recv_counts) = 0;
  virtual void do_send(const torch::Tensor& tensor, int peer) = 0;
  virtual void do_recv(torch::Tensor& tensor, int peer) = 0;
  // Starts both transfers and returns what waits for them (and checks the count received).
  virtual std::function<void()> do_start_exchange(const torch::Tensor& send, int to, torch::Tensor& recv, int from) = 0;
  // A new communicator over MPI_Comm_split's group (for NCCL, ncclCommSplit's).
  virtual std::unique_ptr<Communicator> do_split(int color, int key, const std::string& name) = 0;
  // Gathers `bytes` (the same length on every rank) from every rank over a
  // channel separate from the data: what the collective check compares.
  virtual std::vector<std::string> exchange_signatures(const std::string& bytes) = 0;

 private:
  struct Call;  // what a call holds while it runs: its watchdog scope and its span on the timeline
  std::unique_ptr<Call> begin(CommOp op, const torch::Tensor* tensor, int64_t count, int peer_or_root, ReduceOp reduce);
  void check_tensor(const torch::Tensor& tensor, CommOp op, const char* role) const;

  LaunchEnv env_;
  CommunicatorOptions options_;
  CommStats stats_;
  int64_t sequence_ = 0;  // calls made so far: "#12" in messages
  int64_t exchanges_in_flight_ = 0;  // started, not yet waited for
};

// How the calling thread waits for an exchange (Note: [waiting without
// taking a core] in communicator_mpi.cpp): eagerly (spin, then yield; the
// default) or patiently (spin briefly, then sleep between polls), for a
// background thread whose waiting should leave the core to computation.
// Per thread; returns the previous setting.
bool set_patient_waiting(bool patient);

// The backend for tensors on `device`: MPI for the CPU, NCCL for CUDA.
Backend backend_for(const torch::Device& device);

// A communicator for the job this process was launched into (read_launch_env).
// Initializes MPI on first use (MPI also bootstraps NCCL: rank 0 creates the
// ncclUniqueId and broadcasts it). A single process gets a communicator of
// size 1. Errors: MPI disagreeing with the launcher's variables, NCCL in a
// build without it, no GPU for this rank: a UserError that says what to do.
std::unique_ptr<Communicator> make_communicator(Backend backend, const LaunchEnv& env,
                                                const CommunicatorOptions& options);

// Ends a distributed program: flushes output and exits with `status`. With
// more than one rank and a non-zero status, MPI is not finalized (finalizing
// waits for every rank, and the others may be waiting in a collective for
// this one): the launcher sees the exit and stops the job at once.
[[noreturn]] void exit_distributed(int status, const LaunchEnv& env);

}  // namespace workbook
