// reducer.cpp — ex4.5: the bucketed reducer's two steps, gradient_ready and
// finish; the thread that runs the all-reduces is given.
#include "reducer.hpp"

#include <algorithm>

#include "workbook/errors.hpp"
#include "workbook/trace.hpp"

namespace ch04 {

AllReduceFn ring_average(RingOptions options) {
  return [options](torch::Tensor& flat, workbook::Communicator& comm) {
    ring_all_reduce(flat, workbook::ReduceOp::Average, comm, options);
  };
}

BucketReducer::BucketReducer(std::vector<torch::Tensor> parameters, workbook::Communicator& comm,
                             ReducerOptions options)
    : parameters_(std::move(parameters)), comm_(comm), options_(std::move(options)) {
  WB_ASSERT(!parameters_.empty(), "a BucketReducer needs parameters");
  for (const torch::Tensor& p : parameters_)
    WB_ASSERT(p.requires_grad() && p.is_leaf(), "every parameter must be a leaf that requires a gradient");
  use_buckets(options_.buckets ? *options_.buckets
                              : options_.assign(parameters_, options_.first_bucket_bytes, options_.bucket_cap_bytes));
  rebuilt_ = options_.buckets.has_value() || !options_.rebuild_buckets;  // nothing to rebuild
  reset_step();
  for (size_t i = 0; i < parameters_.size(); ++i)
    hook_handles_.push_back(parameters_[i].register_hook([this, i](torch::Tensor gradient) {
      if (!rebuilt_) arrival_order_.push_back(i);
      gradient_ready(i, gradient);
      std::lock_guard<std::mutex> lock(mutex_);
      launched_from_hooks_ = launched_.size();
    }));
  if (options_.overlap) thread_ = std::thread([this] { communication_loop(); });
}

void BucketReducer::use_buckets(std::vector<Bucket> buckets) {
  buckets_ = std::move(buckets);
  bucket_of_.assign(parameters_.size(), buckets_.size());
  slot_of_.assign(parameters_.size(), 0);
  flat_.clear();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    WB_ASSERT(!bucket.parameters.empty() && bucket.offsets.size() == bucket.parameters.size(),
              "bucket {} is empty or its offsets do not match its parameters", b);
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      WB_ASSERT(bucket_of_[bucket.parameters[slot]] == buckets_.size(), "parameter {} is in two buckets",
                bucket.parameters[slot]);
      bucket_of_[bucket.parameters[slot]] = b;
      slot_of_[bucket.parameters[slot]] = slot;
    }
    flat_.push_back(torch::zeros({bucket.elements}, parameters_[0].options().requires_grad(false)));
  }
  for (size_t i = 0; i < parameters_.size(); ++i)
    WB_ASSERT(bucket_of_[i] < buckets_.size(), "parameter {} is in no bucket", i);
}

void BucketReducer::rebuild_buckets_in_arrival_order() {
  // Rank 0's arrival order, then the parameters that never arrived (in the
  // assumed order: reverse registration). Every rank gets the same list.
  std::vector<bool> arrived(parameters_.size(), false);
  std::vector<int64_t> order;
  for (size_t i : arrival_order_)
    if (!arrived[i]) {
      arrived[i] = true;
      order.push_back(static_cast<int64_t>(i));
    }
  for (size_t i = parameters_.size(); i-- > 0;)
    if (!arrived[i]) order.push_back(static_cast<int64_t>(i));
  torch::Tensor shared = torch::tensor(order, torch::kInt64).to(comm_.device());
  comm_.broadcast(shared, 0);
  shared = shared.cpu();
  const int64_t* agreed = shared.data_ptr<int64_t>();
  // assign_buckets walks its list from the last element: hand it the order reversed.
  const size_t n = parameters_.size();
  std::vector<torch::Tensor> reversed;
  for (size_t k = n; k-- > 0;) reversed.push_back(parameters_[static_cast<size_t>(agreed[k])]);
  std::vector<Bucket> buckets = options_.assign(reversed, options_.first_bucket_bytes, options_.bucket_cap_bytes);
  for (Bucket& bucket : buckets)
    for (size_t& p : bucket.parameters) p = static_cast<size_t>(agreed[n - 1 - p]);
  const bool same = buckets.size() == buckets_.size() &&
                    std::equal(buckets.begin(), buckets.end(), buckets_.begin(),
                               [](const Bucket& x, const Bucket& y) { return x.parameters == y.parameters; });
  if (!same) use_buckets(std::move(buckets));  // the usual case for a model used in order: nothing changes
}

BucketReducer::~BucketReducer() {
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].remove_hook(static_cast<unsigned>(hook_handles_[i]));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

torch::Tensor BucketReducer::slot(size_t index) {
  const Bucket& bucket = buckets_[bucket_of_[index]];
  return flat_[bucket_of_[index]].narrow(0, bucket.offsets[slot_of_[index]], parameters_[index].numel());
}

void BucketReducer::gradient_ready(size_t index, const torch::Tensor& gradient) {
  WB_ASSERT(index < parameters_.size() && !arrived_[index],
            "gradient_ready({}): not a parameter, or its gradient already arrived this step", index);
  torch::NoGradGuard no_grad;
  WB_NOT_IMPLEMENTED("ex4.5");  // TODO(ex4.5): your code here
}

void BucketReducer::finish() {
  torch::NoGradGuard no_grad;
  WB_NOT_IMPLEMENTED("ex4.5");  // TODO(ex4.5): your code here
}

// ---- given: the communication thread ------------------------------------------

void BucketReducer::reset_step() {
  // The first step is over when a hook fired (tests that call gradient_ready
  // themselves never rebuild); the communication thread is idle here.
  if (!rebuilt_ && !arrival_order_.empty()) {
    rebuilt_ = true;
    rebuild_buckets_in_arrival_order();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last_launched_from_hooks_ = launched_from_hooks_;
    launched_from_hooks_ = 0;
  }
  arrived_.assign(parameters_.size(), false);
  missing_.clear();
  for (const Bucket& bucket : buckets_) missing_.push_back(bucket.parameters.size());
  next_to_launch_ = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!launched_.empty()) last_order_ = launched_;
  launched_.clear();
  reduced_ = 0;
}

void BucketReducer::launch(size_t b) {
  workbook::trace::mark(workbook::trace::Kind::Communication, "bucket {} launched", b);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launched_.push_back(b);
    if (options_.overlap) queue_.push_back(b);
  }
  changed_.notify_all();
}

void BucketReducer::wait_for_launched() {
  if (!options_.overlap) {  // no thread: reduce here, in launch order
    for (size_t b : launched_) {
      const workbook::trace::Span span(workbook::trace::Kind::Communication, "all-reduce bucket {} ({} elements)", b,
                                       flat_[b].numel());
      options_.all_reduce(flat_[b], comm_);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    reduced_ = launched_.size();
    return;
  }
  const workbook::trace::Span span(workbook::trace::Kind::Wait, "finish: waiting for the buckets");
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return reduced_ == launched_.size(); });
  if (failure_) std::rethrow_exception(failure_);
}

void BucketReducer::communication_loop() {
  // This thread's waits for peers should leave the core to backward.
  workbook::set_patient_waiting(true);
  workbook::trace::name_this_thread("communication");
  while (true) {
    size_t b = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      b = queue_.front();
      queue_.pop_front();
      if (failure_) {  // after a failure, the rest is only counted, so that finish() can report it
        ++reduced_;
        changed_.notify_all();
        continue;
      }
    }
    std::exception_ptr failure;
    try {
      const workbook::trace::Span span(workbook::trace::Kind::Communication, "all-reduce bucket {} ({} elements)", b,
                                       flat_[b].numel());
      options_.all_reduce(flat_[b], comm_);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !failure_) failure_ = failure;
      ++reduced_;
    }
    changed_.notify_all();
  }
}

std::vector<size_t> BucketReducer::launch_order() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_order_;
}

}  // namespace ch04
