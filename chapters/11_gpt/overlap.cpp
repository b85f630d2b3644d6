// overlap.cpp — Chapter 11 (given): the data group's reduce-scatter
// overlapped with the last micro-batch's backward (overlap.hpp).
#include "overlap.hpp"

#include <algorithm>

#include "reducer.hpp"  // Chapter 4's reference: assign_buckets
#include "workbook/errors.hpp"
#include "workbook/trace.hpp"

namespace ch11 {
namespace {

// The buckets' optimizers as one, for the Sharding interface: its step
// steps each (the thread steps them one by one instead).
class EachBucket : public torch::optim::Optimizer {
 public:
  EachBucket(const std::vector<torch::Tensor>& all, std::vector<torch::optim::Optimizer*> each)
      : torch::optim::Optimizer({torch::optim::OptimizerParamGroup(all)},
                                std::make_unique<torch::optim::SGDOptions>(0.0)),
        each_(std::move(each)) {}
  torch::Tensor step(LossClosure) override {
    for (torch::optim::Optimizer* optimizer : each_) optimizer->step();
    return {};
  }

 private:
  std::vector<torch::optim::Optimizer*> each_;
};

}  // namespace

OverlappedSharding::OverlappedSharding(torch::nn::Module& model, workbook::Communicator& comm,
                                       const ch07::MakeOptimizer& make_optimizer,
                                       const std::vector<torch::Tensor>& held_back, bool overlap,
                                       const ch07::ShardingOptions& options)
    : comm_(comm) {
  frozen_parameter_bytes_ = ch07::frozen_parameter_bytes(model);
  WB_ASSERT(options.max_grad_norm == 0.0, "overlap: clipping needs every bucket's norm before any steps");
  auto is_held_back = [&](const torch::Tensor& p) {
    return std::any_of(held_back.begin(), held_back.end(),
                       [&](const torch::Tensor& h) { return h.defined() && h.is_same(p); });
  };
  std::vector<torch::Tensor> hooked, kept_back;
  for (const torch::Tensor& p : ch07::trainable_parameters(model)) (is_held_back(p) ? kept_back : hooked).push_back(p);
  WB_ASSERT(!hooked.empty() || !kept_back.empty(), "overlap: the model has no trainable parameters");
  // Chapter 4's buckets over the hooked parameters (reverse registration
  // order, the order backward makes their gradients), then the held-back ones.
  std::vector<std::vector<torch::Tensor>> members;
  if (!hooked.empty())
    for (const ch04::Bucket& bucket :
         ch04::assign_buckets(hooked, options.first_bucket_bytes, options.bucket_cap_bytes)) {
      members.emplace_back();
      for (size_t i : bucket.parameters) members.back().push_back(hooked[i]);
    }
  if (!kept_back.empty()) members.push_back(kept_back);
  std::vector<ch07::FlatGroup*> groups;
  for (std::vector<torch::Tensor>& bucket : members) {
    for (size_t slot = 0; slot < bucket.size(); ++slot) {
      bucket_of_.push_back(buckets_.size());
      slot_of_.push_back(slot);
      held_back_.push_back(is_held_back(bucket[slot]));
      parameters_.push_back(bucket[slot]);
    }
    buckets_.push_back(std::make_unique<ch07::FlatGroup>(bucket, comm.size(), comm.rank(), options.partition));
    ch07::FlatGroup& group = *buckets_.back();
    groups.push_back(&group);
    gradients_.push_back(torch::zeros_like(group.flat()));
    owned_.push_back(group.owned().detach());  // as stage 1's: a leaf sharing the buffer
    owned_.back().mutable_grad() = group.shard_gradient().narrow(0, 0, owned_.back().numel());
  }
  std::vector<torch::optim::Optimizer*> each;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    optimizers_.push_back(make_optimizer({groups[b]}, {owned_[b]}));
    each.push_back(optimizers_.back().get());
  }
  optimizer_ = std::make_unique<EachBucket>(owned_, each);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (held_back_[i]) continue;
    const unsigned handle =
        parameters_[i].register_hook([this, i](const torch::Tensor& gradient) { gradient_arrived(i, gradient); });
    hooks_.emplace_back(parameters_[i], handle);
  }
  missing_.resize(buckets_.size());
  start_step();
  patient_ = overlap && comm.size() > 1 && comm.backend() == workbook::Backend::Mpi;
  if (patient_) thread_ = std::thread([this] { communication_loop(); });
}

OverlappedSharding::~OverlappedSharding() {
  for (auto& [parameter, handle] : hooks_) parameter.remove_hook(handle);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    launched_ -= queue_.size();  // not started: dropped (a peer may never come)
    queue_.clear();
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<ch07::FlatGroup*> OverlappedSharding::groups() {
  std::vector<ch07::FlatGroup*> groups;
  for (auto& bucket : buckets_) groups.push_back(bucket.get());
  return groups;
}

torch::Tensor OverlappedSharding::slot(size_t i) {
  const ch07::Partition& partition = buckets_[bucket_of_[i]]->partition();
  return gradients_[bucket_of_[i]].narrow(0, partition.offsets[slot_of_[i]], partition.sizes[slot_of_[i]]);
}

void OverlappedSharding::zero_grad() {
  // A step that ended early (an error in backward) may have buckets in flight: they end first.
  wait_for_launched();
  start_step();
  for (torch::Tensor& p : parameters_)
    if (p.grad().defined()) p.mutable_grad().reset();
}

void OverlappedSharding::start_step() {
  arrived_.assign(parameters_.size(), 0);
  final_.assign(parameters_.size(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b]->parameters().size();
  next_to_launch_ = 0;
  launched_from_hooks_ = 0;
}

void OverlappedSharding::wait_for_launched() {
  if (!thread_.joinable()) return;
  const workbook::trace::Span span(workbook::trace::Kind::Wait, "waiting for the buckets");
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return reduced_ == launched_; });
}

void OverlappedSharding::gradient_arrived(size_t i, const torch::Tensor& gradient) {
  ++arrived_[i];
  if (expected_.empty()) return;  // the first step only counts (Note [final gradients])
  WB_CHECK(arrived_[i] <= expected_[i],
           "overlap: a parameter of bucket {} got gradient {} in this step, its first step got {}: its bucket was "
           "reduced already (a step must use each parameter as often as the first did)",
           bucket_of_[i], arrived_[i], expected_[i]);
  if (arrived_[i] < expected_[i]) return;
  torch::NoGradGuard no_grad;
  torch::Tensor place = slot(i);
  const torch::Tensor& accumulated = parameters_[i].grad();
  if (accumulated.defined()) torch::add_out(place, accumulated.reshape(-1), gradient.reshape(-1));
  else place.copy_(gradient.reshape(-1));
  final_[i] = true;
  --missing_[bucket_of_[i]];
  // In index order, on every rank: each rank's calls are then the same, in the same order.
  while (next_to_launch_ < buckets_.size() && missing_[next_to_launch_] == 0) {
    if (thread_.joinable()) ++launched_from_hooks_;
    launch(next_to_launch_++);
  }
}

void OverlappedSharding::launch(size_t b) {
  if (!thread_.joinable()) return;  // finished in step()
  workbook::trace::mark(workbook::trace::Kind::Communication, "bucket {} launched", b);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(b);
    ++launched_;
  }
  changed_.notify_all();
}

// Note: [collectives that leave the core] MPI_Reduce_scatter spins until
// its data has come: from the communication thread it would take, for a
// bucket's whole time on the link, half of the core that backward runs on.
// Traced on 2 emulated nodes at 1 Gbit/s (2026-11-30, one rank a node, a
// draft of fbf326e whose thread called the library; the traces not kept):
// the buckets reduced that way during backward made it 39 ms longer (0.152
// to 0.191 s), almost all that the overlap hid. So the thread moves a bucket
// by exchanges, whose waits sleep between polls (Note [waiting without
// taking a core] in communicator_mpi.cpp). Reduce-scatter: at step k each
// rank sends its copy of shard r + k to rank r + k and adds what rank r − k
// sent of its own shard r; all-gather: it sends its shard to rank r + k and
// puts rank r − k's in its place. Each rank sends (n − 1)/n of the bucket in
// each, as a ring does. Without the thread, the library's calls.
void OverlappedSharding::finish(size_t b) {
  torch::NoGradGuard no_grad;
  ch07::FlatGroup& group = *buckets_[b];
  torch::Tensor& input = gradients_[b];
  torch::Tensor& mine = group.shard_gradient();
  const workbook::trace::Span span(workbook::trace::Kind::Communication, "bucket {}: reduce-scatter, step, all-gather "
                                   "({} elements)", b, input.numel());
  if (!patient_) {
    comm_.reduce_scatter(input, mine, workbook::ReduceOp::Average);
    optimizers_[b]->step();
    comm_.all_gather(group.shard(), group.flat());  // in place
    return;
  }
  const int n = comm_.size(), r = comm_.rank();
  const int64_t count = mine.numel();
  if (!incoming_.defined() || incoming_.numel() < count) incoming_ = torch::empty({count}, input.options());
  torch::Tensor incoming = incoming_.narrow(0, 0, count);
  mine.copy_(input.narrow(0, r * count, count));
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    comm_.start_exchange(input.narrow(0, to * count, count), to, incoming, from).wait();
    mine.add_(incoming);
  }
  mine.div_(n);
  optimizers_[b]->step();
  const torch::Tensor shard = group.shard();
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    torch::Tensor theirs = group.flat().narrow(0, from * count, count);
    comm_.start_exchange(shard, to, theirs, from).wait();
  }
}

void OverlappedSharding::step() {
  torch::NoGradGuard no_grad;
  // What no hook made final: .grad as it stands (the held-back rows after
  // ex11.4's exchange), or zeros.
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (final_[i]) continue;
    const torch::Tensor& gradient = parameters_[i].grad();
    if (gradient.defined()) slot(i).copy_(gradient.reshape(-1));
    else slot(i).zero_();
    final_[i] = true;
    --missing_[bucket_of_[i]];
  }
  last_launched_from_hooks_ = launched_from_hooks_;
  while (next_to_launch_ < buckets_.size()) launch(next_to_launch_++);
  if (thread_.joinable()) {
    wait_for_launched();
    // A collective that failed leaves its group unusable: every later step says so.
    if (failure_) std::rethrow_exception(failure_);
  } else {
    for (size_t b = 0; b < buckets_.size(); ++b) finish(b);
  }
  if (expected_.empty()) expected_ = arrived_;  // the first step's counts (Note [final gradients])
  start_step();
}

void OverlappedSharding::communication_loop() {
  // This thread's waits for peers should leave the core to backward.
  workbook::set_patient_waiting(true);
  workbook::trace::name_this_thread("communication");
  while (true) {
    size_t b = 0;
    bool failed = false;  // after a failure the rest is only counted, for step() to report it
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      b = queue_.front();
      queue_.pop_front();
      failed = failure_ != nullptr;
    }
    std::exception_ptr failure;
    if (!failed) try {
        finish(b);
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

ch07::HeldBytes OverlappedSharding::held() const {
  ch07::HeldBytes held;
  held.parameters = frozen_parameter_bytes_;
  for (const auto& bucket : buckets_) {
    held.parameters += bucket->flat().numel() * bucket->flat().element_size();
    held.gradients += bucket->shard_gradient().numel() * bucket->shard_gradient().element_size();
  }
  for (const torch::Tensor& buffer : gradients_) held.gradients += buffer.numel() * buffer.element_size();
  for (const torch::Tensor& p : parameters_)
    if (p.grad().defined()) held.gradients += p.grad().numel() * p.grad().element_size();
  for (const auto& optimizer : optimizers_) held.optimizer_state += ch07::optimizer_state_bytes(*optimizer);
  return held;
}

}  // namespace ch11
