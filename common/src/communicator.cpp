// communicator.cpp — what every backend shares: argument checks, counting,
// the watchdog around each call, and the cross-rank check of collectives.
#include "workbook/communicator.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workbook/errors.hpp"
#include "workbook/trace.hpp"
#include "workbook/watchdog.hpp"

namespace workbook {
namespace {

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kInt32: return "int32";
    case torch::kInt64: return "int64";
    case torch::kUInt8: return "uint8";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return c10::toString(dtype);
  }
}

bool supported(torch::ScalarType dtype) {
  return dtype == torch::kFloat32 || dtype == torch::kFloat64 || dtype == torch::kInt32 || dtype == torch::kInt64 ||
         dtype == torch::kUInt8 || dtype == torch::kFloat16 || dtype == torch::kBFloat16;
}

// "float32 x 1475338, average" / "float32 x 10, root 0" / "int64 x 3, to rank 1"
std::string arguments(CommOp op, torch::ScalarType dtype, int64_t count, int peer, ReduceOp reduce) {
  std::string text = op == CommOp::Barrier || op == CommOp::Split ? "" : fmt::format("{} x {}", dtype_name(dtype), count);
  switch (op) {
    case CommOp::Broadcast: return text + fmt::format(", root {}", peer);
    case CommOp::AllReduce:
    case CommOp::ReduceScatter:
      return text + (reduce == ReduceOp::Sum ? ", sum" : reduce == ReduceOp::Average ? ", average" : ", max");
    case CommOp::Send: return text + fmt::format(", to rank {}", peer);
    case CommOp::Recv: return text + fmt::format(", from rank {}", peer);
    case CommOp::Exchange: return text;  // the caller adds both peers
    case CommOp::AllToAll: return fmt::format("{}, counts of each rank's own", dtype_name(dtype));  // they differ by rank
    default: return text;
  }
}

bool overlaps(const torch::Tensor& a, const torch::Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a.numel() > 0 && b.numel() > 0 && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

bool is_own_chunk(const torch::Tensor& input, const torch::Tensor& output, int rank) {
  return input.data_ptr() == static_cast<const char*>(output.data_ptr()) + rank * input.nbytes();
}

// Note: [one call at a time] MPI is started SERIALIZED (communicator_mpi.cpp):
// two threads may call it, never at once. A thread that communicates while
// another computes (Chapter 4's reducer, Chapter 11's overlap) could meet a
// call of the main thread's; so every call on an MPI or NCCL Communicator
// (takes_turns()) first takes this process's turn, and holds it until the
// call returns, an exchange's wait included: a second thread's call waits
// for the first to return. The watchdog, which watches one call a process,
// then sees every call whole. (The turn is not taken in a wait's sleeps: a
// call of another thread would then run inside the first's watch, and end
// it.) A layout whose calls wait for other ranks' main threads cannot take
// turns with a thread that waits for other ranks' threads: Chapter 11 keeps
// its thread to data-only layouts (Note [overlap at data-only layouts]).
// Chapter 10's simulated ranks are threads of one process that wait for each
// other inside their calls: they take no turns.
std::mutex& turn() {
  static std::mutex mutex;
  return mutex;
}

std::unique_lock<std::mutex> my_turn(bool takes_turns) {
  return takes_turns ? std::unique_lock<std::mutex>(turn()) : std::unique_lock<std::mutex>();
}

}  // namespace

const char* op_name(CommOp op) {
  static const char* names[kCommOpCount] = {"barrier", "broadcast", "all_reduce", "all_gather",
                                            "reduce_scatter", "send", "recv", "exchange", "split", "all_to_all"};
  return names[static_cast<int>(op)];
}

int64_t CommStats::collectives() const {
  int64_t total = 0;
  for (int i = 0; i < kCommOpCount; ++i)
    if (i != static_cast<int>(CommOp::Send) && i != static_cast<int>(CommOp::Recv) &&
        i != static_cast<int>(CommOp::Exchange))
      total += calls[i];
  return total;
}

int64_t CommStats::elements_sent() const {
  return elements[static_cast<int>(CommOp::Send)] + elements[static_cast<int>(CommOp::Exchange)];
}

int64_t CommStats::bytes_sent() const {
  return bytes[static_cast<int>(CommOp::Send)] + bytes[static_cast<int>(CommOp::Exchange)];
}

PendingExchange& PendingExchange::operator=(PendingExchange&& other) noexcept {
  if (this != &other) {
    if (wait_ && std::uncaught_exceptions() == 0) wait();
    wait_ = std::move(other.wait_);
    other.wait_ = nullptr;
    what_ = std::move(other.what_);
    timeout_s_ = other.timeout_s_;
    waiting_ = std::move(other.waiting_);
    takes_turns_ = other.takes_turns_;
  }
  return *this;
}

PendingExchange::~PendingExchange() {
  // Unwinding after an error, the peer may never answer: do not wait.
  if (wait_ && std::uncaught_exceptions() == 0) {
    try {
      wait();
    } catch (const std::exception& error) {
      fmt::print(stderr, "{}\n", error.what());
      std::fflush(stderr);
      std::abort();  // a destructor cannot throw, and the data is not there
    }
  }
}

void PendingExchange::wait() {
  if (!wait_) return;
  const std::unique_lock<std::mutex> turn_taken = my_turn(takes_turns_);  // Note [one call at a time]
  const watchdog::CallScope call(what_, timeout_s_, waiting_);
  const trace::Span span(trace::Kind::Wait, "wait: {}", what_);
  std::function<void()> waiting = std::move(wait_);
  wait_ = nullptr;
  waiting();
}

CommunicatorOptions CommunicatorOptions::from_environment() {
  CommunicatorOptions options;
  if (const char* timeout = std::getenv("WORKBOOK_COMM_TIMEOUT")) {
    char* end = nullptr;
    const double value = std::strtod(timeout, &end);
    WB_CHECK(*timeout != '\0' && *end == '\0', "WORKBOOK_COMM_TIMEOUT={} is not a number of seconds", timeout);
    options.timeout_s = value;
  }
  if (const char* check = std::getenv("WORKBOOK_CHECK_COLLECTIVES")) {
    const std::string value = check;
    WB_CHECK(value == "0" || value == "1", "WORKBOOK_CHECK_COLLECTIVES={} must be 0 or 1", value);
    options.check_collectives = value == "1";
  }
  return options;
}

Backend backend_for(const torch::Device& device) { return device.is_cuda() ? Backend::Nccl : Backend::Mpi; }

Communicator::Communicator(LaunchEnv env, CommunicatorOptions options)
    : env_(std::move(env)), options_(options) {
  if (env_.group.empty()) watchdog::set_process_label(env_.label());  // a group's names the job's rank in its calls
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const std::string& name) {
  WB_ASSERT(color >= 0, "split: color {} must be 0 or more", color);
  const auto call = begin(CommOp::Split, nullptr, 0, 0, ReduceOp::Sum);
  const std::string job = env_.group.empty() ? env_.label() : env_.group;
  return do_split(color, key, fmt::format("{} ({} in the job)", name, job));
}

void Communicator::check_tensor(const torch::Tensor& tensor, CommOp op, const char* role) const {
  WB_ASSERT(tensor.defined(), "{}: the {} tensor is undefined", op_name(op), role);
  WB_ASSERT(tensor.is_contiguous(), "{}: the {} tensor must be contiguous (call .contiguous())", op_name(op), role);
  WB_ASSERT(supported(tensor.scalar_type()), "{}: dtype {} is not supported (float32, float64, float16, bfloat16, int32, int64, uint8)",
            op_name(op), dtype_name(tensor.scalar_type()));
  WB_ASSERT(tensor.device() == device(), "{}: the {} tensor is on {}, but this {} communicator works on {}",
            op_name(op), role, tensor.device().str(), backend() == Backend::Mpi ? "MPI" : "NCCL", device().str());
}

struct Communicator::Call {
  std::unique_lock<std::mutex> turn;  // first: taken before anything is counted or watched
  watchdog::CallScope watched;
  trace::Span span;  // a collective's whole time, waiting for the others included
};

// One call begins: counted, described, watched by the watchdog until the
// returned scope ends, traced, and (a collective, with checking on)
// compared across ranks before any data moves.
std::unique_ptr<Communicator::Call> Communicator::begin(CommOp op, const torch::Tensor* tensor, int64_t count, int peer,
                                       ReduceOp reduce) {
  std::unique_lock<std::mutex> turn_taken = my_turn(takes_turns());
  const torch::ScalarType dtype = tensor ? tensor->scalar_type() : torch::kUInt8;
  if (tensor && reduce == ReduceOp::Average && (op == CommOp::AllReduce || op == CommOp::ReduceScatter))
    WB_ASSERT(tensor->is_floating_point(), "{} with average needs a floating-point tensor, got {}", op_name(op),
              dtype_name(dtype));
  ++sequence_;
  stats_.calls[static_cast<int>(op)] += 1;
  stats_.elements[static_cast<int>(op)] += count;
  if (tensor) stats_.bytes[static_cast<int>(op)] += count * static_cast<int64_t>(tensor->element_size());
  const std::string args = arguments(op, dtype, count, peer, reduce);
  const std::string what = fmt::format("{} #{} ({})", op_name(op), sequence_, args);
  const bool collective = op != CommOp::Send && op != CommOp::Recv && op != CommOp::Exchange;
  // Whom it waits for, for the wait board (Note [a deadlock is named, not timed out] in watchdog.hpp).
  watchdog::Waiting waiting;
  if (op == CommOp::Send) waiting.sends_to = {env_.job_rank(peer)};
  if (op == CommOp::Recv) waiting.receives_from = {env_.job_rank(peer)};
  if (collective) {
    for (int r = 0; r < size(); ++r) waiting.group.push_back(env_.job_rank(r));
    waiting.collective = fmt::format("{} #{} of ranks {}", op_name(op), stats_.collectives(),
                                     fmt::join(waiting.group, ","));
  }
  auto scope = std::unique_ptr<Call>(new Call{std::move(turn_taken), watchdog::CallScope(what, options_.timeout_s, std::move(waiting)),
                                              trace::Span(trace::Kind::Communication, "{}", what)});
  if (collective && options_.check_collectives && size() > 1) {
    // A fixed-length signature: the collective's place in the sequence of
    // collectives, its name and its arguments.
    std::string mine = fmt::format("{:>10} {} ({})", stats_.collectives(), op_name(op), args);
    mine.resize(120, ' ');
    const std::vector<std::string> all = exchange_signatures(mine);
    bool same = true;
    for (const std::string& s : all) same = same && s == mine;
    if (!same) {
      std::string table;
      for (size_t r = 0; r < all.size(); ++r) {
        std::string s = all[r];
        s.erase(s.find_last_not_of(' ') + 1);
        table += fmt::format("\n  rank {} is in collective #{}", r, s.substr(s.find_first_not_of(' ')));
      }
      throw CommunicationError(fmt::format(
          "{}: collective mismatch (checked before {} #{}): the ranks called different collectives:{}\n"
          "Every rank must make the same collective calls, in the same order, with the same dtype, count and root.",
          env_.label(), op_name(op), sequence_, table));
    }
  }
  return scope;
}

void Communicator::barrier() {
  const auto call = begin(CommOp::Barrier, nullptr, 0, 0, ReduceOp::Sum);
  do_barrier();
}

void Communicator::broadcast(torch::Tensor& tensor, int root) {
  check_tensor(tensor, CommOp::Broadcast, "");
  WB_ASSERT(root >= 0 && root < size(), "broadcast: root {} is not a rank of {}", root, size());
  const auto call = begin(CommOp::Broadcast, &tensor, tensor.numel(), root, ReduceOp::Sum);
  do_broadcast(tensor, root);
}

void Communicator::all_reduce(torch::Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, CommOp::AllReduce, "");
  const auto call = begin(CommOp::AllReduce, &tensor, tensor.numel(), 0, op);
  do_all_reduce(tensor, op);
}

void Communicator::all_gather(const torch::Tensor& input, torch::Tensor& output) {
  check_tensor(input, CommOp::AllGather, "input");
  check_tensor(output, CommOp::AllGather, "output");
  WB_ASSERT(output.numel() == input.numel() * size() && output.scalar_type() == input.scalar_type(),
            "all_gather: output must hold {} x {} elements of the input's dtype, has {}", size(), input.numel(),
            output.numel());
  // Note: [all-gather in place] ZeRO's step gathers into the flat buffer the
  // shards that already lie in it, at their own places. MPI (MPI_IN_PLACE)
  // and NCCL (sendbuff == recvbuff + rank * count) both gather in place
  // then, with no copy; any other overlap is undefined in both, so refused.
  WB_ASSERT(!overlaps(input, output) || is_own_chunk(input, output, rank()),
            "all_gather: the input overlaps the output, but is not this rank's chunk of it (elements [{}, {})): "
            "copy it out first (.clone()), or pass that chunk itself for a gather in place",
            rank() * input.numel(), (rank() + 1) * input.numel());
  const auto call = begin(CommOp::AllGather, &input, input.numel(), 0, ReduceOp::Sum);
  do_all_gather(input, output);
}

torch::Tensor Communicator::all_gather(const torch::Tensor& input) {
  std::vector<int64_t> shape = {size()};
  for (int64_t d : input.sizes()) shape.push_back(d);
  torch::Tensor output = torch::empty(shape, input.options());
  all_gather(input.contiguous(), output);
  return output;
}

void Communicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) {
  check_tensor(input, CommOp::ReduceScatter, "input");
  check_tensor(output, CommOp::ReduceScatter, "output");
  WB_ASSERT(input.numel() == output.numel() * size() && output.scalar_type() == input.scalar_type(),
            "reduce_scatter: input must hold {} x {} elements of the output's dtype, has {}", size(), output.numel(),
            input.numel());
  WB_ASSERT(!overlaps(input, output), "reduce_scatter: the output overlaps the input: give it a buffer of its own");
  const auto call = begin(CommOp::ReduceScatter, &output, output.numel(), 0, op);
  do_reduce_scatter(input, output, op);
}

void Communicator::all_to_all(const torch::Tensor& send, const std::vector<int64_t>& send_counts, torch::Tensor& recv,
                              const std::vector<int64_t>& recv_counts) {
  check_tensor(send, CommOp::AllToAll, "send");
  check_tensor(recv, CommOp::AllToAll, "recv");
  const auto ranks = static_cast<size_t>(size());
  WB_ASSERT(send_counts.size() == ranks && recv_counts.size() == ranks,
            "all_to_all: {} send counts and {} receive counts, one per rank of {}", send_counts.size(),
            recv_counts.size(), ranks);
  int64_t sending = 0, receiving = 0;
  for (size_t r = 0; r < ranks; ++r) {
    WB_ASSERT(send_counts[r] >= 0 && recv_counts[r] >= 0, "all_to_all: a negative count for rank {}", r);
    sending += send_counts[r];
    receiving += recv_counts[r];
  }
  WB_ASSERT(sending == send.numel() && receiving == recv.numel() && send.scalar_type() == recv.scalar_type(),
            "all_to_all: the send counts add up to {} and the receive counts to {}, but send holds {} and recv {} "
            "(of one dtype)", sending, receiving, send.numel(), recv.numel());
  WB_ASSERT(!overlaps(send, recv), "all_to_all: recv overlaps send: give it a buffer of its own");
  const auto call = begin(CommOp::AllToAll, &send, send.numel(), 0, ReduceOp::Sum);
  // Note: [counts compared first] Under MPI a rank that expects fewer
  // elements than its peer sends gets a truncation error, and one that
  // expects more keeps stale values in the rest; NCCL asks a send and its
  // receive for the same count, and says nothing of what happens otherwise
  // (its ncclSend and ncclRecv documentation). So the counts cross first,
  // as data (one element each way), and every rank learns through one
  // all-reduced flag whether any pair disagrees: all of them fail together,
  // each naming its own pairs.
  const torch::TensorOptions counts_on = torch::TensorOptions().dtype(torch::kInt64).device(device());
  const torch::Tensor mine = torch::tensor(send_counts, torch::kInt64).to(device());
  torch::Tensor theirs = torch::empty({size()}, counts_on);
  const std::vector<int64_t> one_each(ranks, 1);
  do_all_to_all(mine, one_each, theirs, one_each);
  const torch::Tensor sent_here = theirs.cpu();
  std::string pairs;
  for (size_t r = 0; r < ranks; ++r)
    if (sent_here[static_cast<int64_t>(r)].item<int64_t>() != recv_counts[r])
      pairs += fmt::format("{}rank {} sends {} element(s) to rank {}, which expects {}", pairs.empty() ? "" : "; ", r,
                           sent_here[static_cast<int64_t>(r)].item<int64_t>(), rank(), recv_counts[r]);
  torch::Tensor any_wrong = torch::full({1}, pairs.empty() ? 0 : 1, counts_on);
  do_all_reduce(any_wrong, ReduceOp::Max);
  if (any_wrong.item<int64_t>() != 0)
    throw CommunicationError(fmt::format(
        "{}: all_to_all #{}: the counts do not match: {}", env_.label(), sequence_,
        pairs.empty() ? "this rank's are right; another rank's message names the pairs" : pairs));
  do_all_to_all(send, send_counts, recv, recv_counts);
}

void Communicator::send(const torch::Tensor& tensor, int peer) {
  check_tensor(tensor, CommOp::Send, "");
  WB_ASSERT(peer >= 0 && peer < size() && peer != rank(), "send: {} is not another rank (this is rank {} of {})",
            peer, rank(), size());
  const auto call = begin(CommOp::Send, &tensor, tensor.numel(), peer, ReduceOp::Sum);
  do_send(tensor, peer);
}

void Communicator::recv(torch::Tensor& tensor, int peer) {
  check_tensor(tensor, CommOp::Recv, "");
  WB_ASSERT(peer >= 0 && peer < size() && peer != rank(), "recv: {} is not another rank (this is rank {} of {})",
            peer, rank(), size());
  const auto call = begin(CommOp::Recv, &tensor, tensor.numel(), peer, ReduceOp::Sum);
  do_recv(tensor, peer);
}

PendingExchange Communicator::start_exchange(const torch::Tensor& send, int to, torch::Tensor& recv, int from) {
  check_tensor(send, CommOp::Exchange, "send");
  check_tensor(recv, CommOp::Exchange, "recv");
  WB_ASSERT(to >= 0 && to < size() && to != rank() && from >= 0 && from < size() && from != rank(),
            "exchange: to {} and from {} must be other ranks (this is rank {} of {})", to, from, rank(), size());
  std::string what;
  {
    const auto call = begin(CommOp::Exchange, &send, send.numel(), to, ReduceOp::Sum);
    what = fmt::format("{} #{} ({} x {} to rank {}, {} x {} from rank {})", op_name(CommOp::Exchange), sequence_,
                       dtype_name(send.scalar_type()), send.numel(), to, dtype_name(recv.scalar_type()),
                       recv.numel(), from);
    std::function<void()> wait = do_start_exchange(send, to, recv, from);
    ++exchanges_in_flight_;
    stats_.most_exchanges_in_flight = std::max(stats_.most_exchanges_in_flight, exchanges_in_flight_);
    PendingExchange pending(
        [this, wait = std::move(wait)] {
          --exchanges_in_flight_;  // waited for from here on (counted before, should the wait fail)
          wait();
        },
        std::move(what), options_.timeout_s);
    pending.waiting_.sends_to = {env_.job_rank(to)};
    pending.waiting_.receives_from = {env_.job_rank(from)};
    pending.takes_turns_ = takes_turns();
    return pending;
  }
}

void exit_distributed(int status, const LaunchEnv& env) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (status != 0 && env.distributed()) std::_Exit(status);
  std::exit(status);
}

}  // namespace workbook
