// reducer.hpp — Chapter 4's bucketed, overlapped gradient averaging: what
// PyTorch's DistributedDataParallel does during backward.
//
// FashionCNN with the default limits (1 MiB first, 25 MiB after): two buckets.
//
//   backward:     fc3 fc2 fc1 ─┐    bn2 conv2 bn1 conv1 ─┐
//   gradients:    ready        │    ready                │
//                       bucket 0 full              bucket 1 full
//   comm thread:               └► all-reduce 0 ──►       └► all-reduce 1
//   finish():                                                 wait, copy back
//
//   bucket 0: fc3, fc2, fc1 (parameters 13 to 8), 1,456,330 elements (5.6 MiB:
//             fc1's weight alone takes it past 1 MiB)
//   bucket 1: bn2, conv2, bn1, conv1 (parameters 7 to 0), 19,008 elements
//
// Parameters are grouped into buckets in reverse registration order (the
// order backward produces their gradients). A hook on each parameter copies
// its gradient into its bucket's flat buffer; when a bucket is complete it
// is handed to a communication thread, which all-reduces it while backward
// goes on computing the earlier layers' gradients. finish() waits for the
// last bucket and writes the averages into the parameters' .grad.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "ring.hpp"
#include "workbook/communicator.hpp"

namespace ch04 {

// ---- ex4.4: which parameters go in which bucket -------------------------------

struct Bucket {
  std::vector<size_t> parameters;  // indices into the parameter list, in the order they were added
  std::vector<int64_t> offsets;    // where each parameter's gradient starts in the flat buffer
  int64_t elements = 0;            // the buffer's length
};

// The buckets PyTorch's DDP ends up with when backward produces the
// gradients in reverse registration order (it rebuilds its buckets after the
// first iteration in the order the gradients became ready:
// Reducer::rebuild_buckets). What must hold:
//  * every parameter is in exactly one bucket, and no bucket is empty;
//    bucket 0 holds the last registered parameter; reading the buckets in
//    order, and each bucket's `parameters` in order, lists every index from
//    the last to the first;
//  * offsets: where each parameter starts in the bucket's flat buffer, in
//    that order, with no gaps; `elements` is the buffer's length;
//  * the limits are in bytes: first_bucket_bytes for bucket 0,
//    bucket_cap_bytes for every later one.
// When a limit closes a bucket is DDP's rule, and the examples are its
// results (the tests hold you to these and to more like them): find the rule
// that gives all three. All parameters share one dtype and device (asserted).
// Float32, 4 bytes an element:
//   limits 400 B, then 1000 B; sizes in elements [30, 40, 200, 10, 100, 60, 300]
//     buckets   {6} 1200 B | {5, 4, 3, 2} 1480 B    | {1, 0} 280 B
//     offsets   {0}        | {0, 60, 160, 170}      | {0, 40}
//   limits 400 B, then 400 B; sizes [100, 100]      → {1} 400 B | {0} 400 B
//   no parameters                                   → no buckets
std::vector<Bucket> assign_buckets(const std::vector<torch::Tensor>& parameters,
                                   int64_t first_bucket_bytes = int64_t{1} << 20,
                                   int64_t bucket_cap_bytes = int64_t{25} << 20);

// ---- ex4.5: the reducer ---------------------------------------------------------

// How a bucket's flat buffer is averaged over ranks (a collective).
using AllReduceFn = std::function<void(torch::Tensor& flat, workbook::Communicator& comm)>;

// The ring of ex4.3, averaging: the default.
AllReduceFn ring_average(RingOptions options = {});

struct ReducerOptions {
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // When given, these buckets instead of assign_buckets' (the tests of
  // ex4.5 use it, so that they do not depend on ex4.4). Each must be
  // non-empty and every parameter in exactly one (the given constructor
  // asserts it).
  std::optional<std::vector<Bucket>> buckets;
  AllReduceFn all_reduce = ring_average();
  // false: launch() only records a bucket, and every bucket is reduced in
  // finish(), after backward (the baseline the bench compares with). Your
  // code launches the same way either way: the given launch() and
  // wait_for_launched() make the difference.
  bool overlap = true;
  // After the first step, rebuild the buckets in the order the gradients
  // arrived in (Note: [rebuilt buckets]). Not with explicit `buckets`.
  bool rebuild_buckets = true;
  // How buckets are assigned, at the start and when rebuilt: ex4.4's (the
  // tests of ex4.5 give their own).
  std::function<std::vector<Bucket>(const std::vector<torch::Tensor>&, int64_t, int64_t)> assign = assign_buckets;
};

// Note: [rebuilt buckets] The buckets assume that backward produces the
// gradients in reverse registration order, and that every parameter gets
// one. When a model uses its layers in another order, or a parameter gets
// no gradient (a layer this step does not use), a bucket waits for a
// gradient that comes late or never, and every bucket after it waits too
// (launches go in index order): overlap is lost. PyTorch's DDP records the
// order in which gradients became ready in its first iteration and rebuilds
// its buckets in that order. So does this reducer, in given code: the hooks
// record the order; at the end of the first step (in reset_step) rank 0's
// order is broadcast (the ranks must agree on the buckets), the parameters
// that got no gradient are put last, and the assignment (assign_buckets)
// runs again on that order. Parameters unused in the first step but used later still work:
// their bucket launches late, in finish().

// Note: [one step with a BucketReducer]
//   optimizer.zero_grad(); loss.backward(); reducer.finish(); optimizer.step();
// The hooks call gradient_ready() as backward produces each gradient. A
// hook sees the gradient before LibTorch adds it to .grad, so the bucket
// takes .grad + gradient: accumulated micro-steps are averaged too.
// Buckets are launched strictly in index order, on every rank: bucket b
// waits until 0..b-1 have been launched, even if its own gradients came
// first. Every rank then makes the same collective calls in the same order
// (Note: [Communicator semantics]), whatever order its hooks fired in.
// A parameter that got no gradient this step counts as .grad, or zeros.
// Threads: the hooks run on the thread that called backward() (CPU), and
// the communication thread is the only one calling the Communicator between
// the first launch and the end of finish(): MPI is initialized SERIALIZED.
class BucketReducer {
 public:
  BucketReducer(std::vector<torch::Tensor> parameters, workbook::Communicator& comm, ReducerOptions options = {});
  ~BucketReducer();  // removes the hooks, stops the thread
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Called by parameter `index`'s hook with its incoming gradient (tests call
  // it directly, in any order).
  void gradient_ready(size_t index, const torch::Tensor& gradient);
  // Launches what is left, waits for every bucket, writes the averages into
  // .grad, and gets ready for the next step.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The buckets in the order the last step launched them (0, 1, 2, ...).
  std::vector<size_t> launch_order() const;
  // How many buckets the last step launched from the hooks, during backward
  // (the rest waited for finish()): what overlap had to work with.
  size_t launched_from_hooks() const { return last_launched_from_hooks_; }

 private:
  // Given. slot(i): parameter i's place in its bucket's flat buffer.
  // launch(b): hands bucket b to the communication thread (without overlap,
  // only records it). wait_for_launched(): returns when every launched
  // bucket is reduced, rethrowing the thread's error if it had one.
  // reset_step(): ready for the next step (arrived_, missing_, next_to_launch_).
  torch::Tensor slot(size_t index);
  void launch(size_t b);
  void wait_for_launched();
  void reset_step();
  void communication_loop();
  void use_buckets(std::vector<Bucket> buckets);  // bucket_of_, slot_of_, flat_ for these buckets
  void rebuild_buckets_in_arrival_order();

  std::vector<torch::Tensor> parameters_;
  workbook::Communicator& comm_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<torch::Tensor> flat_;          // one buffer per bucket
  std::vector<size_t> bucket_of_;            // parameter -> bucket
  std::vector<size_t> slot_of_;              // parameter -> position in its bucket
  std::vector<int64_t> hook_handles_;
  // The order the hooks fired in during the first step (Note: [rebuilt buckets]).
  std::vector<size_t> arrival_order_;
  bool rebuilt_ = false;
  size_t launched_from_hooks_ = 0, last_launched_from_hooks_ = 0;

  // This step's progress, touched only by the thread running backward and finish().
  std::vector<bool> arrived_;                // parameter -> its gradient is in its bucket
  std::vector<size_t> missing_;              // bucket -> parameters still to arrive
  size_t next_to_launch_ = 0;

  // Shared with the communication thread, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> queue_;                 // launched, not yet taken by the thread
  std::vector<size_t> launched_;             // launch order this step
  std::vector<size_t> last_order_;           // and the last finished step's
  size_t reduced_ = 0;                       // buckets reduced this step
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ch04
