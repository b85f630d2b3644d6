// simulator.cpp — simulate() (given): simulated ranks as threads, their
// messages in one shared post office, timed by event_clock.cpp.
#include "simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "workbook/errors.hpp"

namespace ch10 {
namespace {

struct Message {
  torch::Tensor data;
  double arrival_s = 0.0;
};

// What the simulated ranks share. One mutex: a simulation is about timing
// on a clock of its own, not about speed.
struct PostOffice {
  explicit PostOffice(int ranks) : clocks(ranks), waiting_for(ranks, -1), finished(ranks, false) {}
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<int, int>, std::deque<Message>> queues;  // (from, to) -> messages in flight
  std::vector<RankClock> clocks;
  std::vector<int> waiting_for;  // the peer each rank waits for, or -1
  std::vector<bool> finished;
  int64_t messages = 0;
  std::optional<std::string> failure;  // set once: every waiting rank stops

  // Every rank finished or waiting, none for a message already there.
  bool deadlocked() const {
    bool someone_waits = false;
    for (size_t r = 0; r < clocks.size(); ++r) {
      if (finished[r]) continue;
      if (waiting_for[r] < 0) return false;
      auto queue = queues.find({waiting_for[r], static_cast<int>(r)});
      if (queue != queues.end() && !queue->second.empty()) return false;
      someone_waits = true;
    }
    return someone_waits;
  }
};

class SimulatedCommunicator : public workbook::Communicator {
 public:
  SimulatedCommunicator(int rank, int ranks, PostOffice& office, const Link& link)
      : Communicator(environment(rank, ranks), options()), office_(office), link_(link) {}

  workbook::Backend backend() const override { return workbook::Backend::Mpi; }
  torch::Device device() const override { return torch::kCPU; }
  int64_t message_bytes() const override { return int64_t{1} << 40; }

  void post_without_waiting(const torch::Tensor& tensor, int to) {
    WB_CHECK(to >= 0 && to < size() && to != rank(), "{}: send_without_waiting to rank {}", launch_env().label(), to);
    post(tensor, to);
  }

  void compute(double seconds) {
    std::lock_guard<std::mutex> lock(office_.mutex);
    office_.clocks[rank()].now_s += seconds;
  }

 protected:
  void do_send(const torch::Tensor& tensor, int peer) override {
    const double arrival_s = post(tensor, peer);
    std::lock_guard<std::mutex> lock(office_.mutex);
    RankClock& clock = office_.clocks[rank()];
    clock.now_s = std::max(clock.now_s, arrival_s);  // a blocking send returns once its message is there
  }
  void do_recv(torch::Tensor& tensor, int peer) override { take(tensor, peer, 0.0); }
  std::function<void()> do_start_exchange(const torch::Tensor& send, int to, torch::Tensor& recv, int from) override {
    const double sent_arrival_s = post(send, to);
    torch::Tensor target = recv;
    return [this, target, from, sent_arrival_s]() mutable { take(target, from, sent_arrival_s); };
  }

  void do_barrier() override { not_simulated("barrier"); }
  void do_broadcast(torch::Tensor&, int) override { not_simulated("broadcast"); }
  void do_all_reduce(torch::Tensor&, workbook::ReduceOp) override { not_simulated("all_reduce"); }
  void do_all_gather(const torch::Tensor&, torch::Tensor&) override { not_simulated("all_gather"); }
  void do_reduce_scatter(const torch::Tensor&, torch::Tensor&, workbook::ReduceOp) override {
    not_simulated("reduce_scatter");
  }
  void do_all_to_all(const torch::Tensor&, const std::vector<int64_t>&, torch::Tensor&,
                     const std::vector<int64_t>&) override {
    not_simulated("all_to_all");
  }
  std::unique_ptr<Communicator> do_split(int, int, const std::string&) override { not_simulated("split"); }
  std::vector<std::string> exchange_signatures(const std::string&) override { not_simulated("a checked collective"); }

 private:
  static workbook::LaunchEnv environment(int rank, int ranks) {
    workbook::LaunchEnv env;
    env.rank = rank;
    env.world_size = ranks;
    env.local_size = ranks;
    env.launcher = "ch10::simulate";
    return env;
  }
  static workbook::CommunicatorOptions options() {
    workbook::CommunicatorOptions options;
    options.timeout_s = 0.0;  // the simulator finds deadlocks itself, and its threads share one process
    return options;
  }
  [[noreturn]] void not_simulated(const char* call) const {
    throw workbook::UserError(fmt::format("{}: the simulator times point-to-point messages only, not {}",
                                          launch_env().label(), call));
  }

  // Hands a copy of `tensor` to the link; returns when it arrives.
  double post(const torch::Tensor& tensor, int to) {
    std::lock_guard<std::mutex> lock(office_.mutex);
    const double bytes = static_cast<double>(tensor.numel() * static_cast<int64_t>(tensor.element_size()));
    const double arrival_s = send_message(office_.clocks[rank()], bytes, link_);
    office_.queues[{rank(), to}].push_back({tensor.clone(), arrival_s});
    ++office_.messages;
    office_.changed.notify_all();
    return arrival_s;
  }

  // Waits for the next message from `from` into `tensor`; the clock moves to
  // its arrival, and to `also_arrived_s` (an exchange's own message).
  void take(torch::Tensor& tensor, int from, double also_arrived_s) {
    std::unique_lock<std::mutex> lock(office_.mutex);
    auto& queue = office_.queues[{from, rank()}];
    office_.waiting_for[rank()] = from;
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (queue.empty() && !office_.failure) {
      if (office_.deadlocked())
        office_.failure = fmt::format("{}: waits for a message from rank {} that no rank will send (every rank is "
                                      "waiting): the schedule deadlocks",
                                      launch_env().label(), from);
      else if (office_.changed.wait_until(lock, limit) == std::cv_status::timeout)
        office_.failure = fmt::format("{}: waited 60 s for a message from rank {}", launch_env().label(), from);
      office_.changed.notify_all();
    }
    office_.waiting_for[rank()] = -1;
    if (office_.failure) throw workbook::CommunicationError(*office_.failure);
    Message message = std::move(queue.front());
    queue.pop_front();
    WB_ASSERT(message.data.numel() == tensor.numel() && message.data.scalar_type() == tensor.scalar_type(),
              "{}: received {} x {} from rank {} into {} x {}", launch_env().label(), message.data.numel(),
              c10::toString(message.data.scalar_type()), from, tensor.numel(), c10::toString(tensor.scalar_type()));
    tensor.copy_(message.data.view_as(tensor));
    RankClock& clock = office_.clocks[rank()];
    receive_message(clock, message.arrival_s);
    clock.now_s = std::max(clock.now_s, also_arrived_s);
  }

  PostOffice& office_;
  Link link_;
};

}  // namespace

double SimulatedRun::seconds() const {
  return finish_s.empty() ? 0.0 : *std::max_element(finish_s.begin(), finish_s.end());
}

SimulatedRun simulate(int ranks, const Link& link, const std::function<void(workbook::Communicator&)>& body) {
  WB_CHECK(ranks >= 1, "simulate: {} rank(s)", ranks);
  PostOffice office(ranks);
  std::vector<std::unique_ptr<SimulatedCommunicator>> comms;
  for (int r = 0; r < ranks; ++r) comms.push_back(std::make_unique<SimulatedCommunicator>(r, ranks, office, link));
  std::vector<std::exception_ptr> errors(ranks);
  int first_failed = -1;  // the cause; the others stopped because of it
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(*comms[r]);
      } catch (...) {
        errors[r] = std::current_exception();
        std::lock_guard<std::mutex> lock(office.mutex);
        if (first_failed < 0) first_failed = r;
        if (!office.failure) office.failure = fmt::format("rank {} of {} failed", r, ranks);
      }
      std::lock_guard<std::mutex> lock(office.mutex);
      office.finished[r] = true;
      office.changed.notify_all();
    });
  for (std::thread& t : threads) t.join();
  if (first_failed >= 0) {
    try {
      std::rethrow_exception(errors[first_failed]);
    } catch (const workbook::CommunicationError&) {
      throw;
    } catch (const workbook::NotImplemented&) {
      throw;  // a skeleton's exercise: its own message
    } catch (const std::exception& e) {
      throw workbook::UserError(fmt::format("simulate: rank {} of {}: {}", first_failed, ranks, e.what()));
    }
  }
  SimulatedRun run;
  for (const RankClock& clock : office.clocks) run.finish_s.push_back(clock.now_s);
  run.messages = office.messages;
  return run;
}

void compute_for(workbook::Communicator& comm, double seconds) {
  auto* simulated = dynamic_cast<SimulatedCommunicator*>(&comm);
  WB_CHECK(simulated != nullptr, "compute_for: only inside ch10::simulate");
  WB_CHECK(seconds >= 0, "compute_for: {} s", seconds);
  simulated->compute(seconds);
}

void send_without_waiting(workbook::Communicator& comm, const torch::Tensor& tensor, int to) {
  auto* simulated = dynamic_cast<SimulatedCommunicator*>(&comm);
  WB_CHECK(simulated != nullptr, "send_without_waiting: only inside ch10::simulate");
  simulated->post_without_waiting(tensor, to);
}

}  // namespace ch10
