// trace.cpp — the spans of every thread, the clock offsets, and the file.
#include "workbook/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/errors.hpp"

namespace workbook::trace {
namespace {

struct Event {
  Kind kind;
  std::string name;
  int64_t begin_ns, end_ns;
};

// One per thread that recorded something; only its thread appends to it, and
// write() reads it when the others are idle (between steps, at the end).
struct ThreadLog {
  int id = 0;
  std::string name = "main";
  std::vector<Event> events;
};

struct Recorder {
  std::mutex mutex;  // guards `threads` (a new thread's log), not the logs
  std::vector<std::unique_ptr<ThreadLog>> threads;
  std::string file;
  int64_t offset_ns = 0;       // this rank's clock minus rank 0's (rank 0: 0)
  int64_t uncertainty_ns = 0;  // half the round trip the offset was measured in
  size_t dropped = 0;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

// Past this many spans a thread records no more (a long run traced by
// mistake must not eat the memory); the file says how many were dropped.
constexpr size_t kMostEventsPerThread = 2'000'000;

ThreadLog& this_thread_log() {
  thread_local ThreadLog* log = nullptr;
  if (!log) {
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.threads.push_back(std::make_unique<ThreadLog>());
    log = r.threads.back().get();
    log->id = static_cast<int>(r.threads.size()) - 1;
    log->events.reserve(4096);
  }
  return *log;
}

// Rank r's offset to rank 0, and half the round trip it was measured in.
struct Offset {
  int64_t offset_ns = 0, uncertainty_ns = 0;
};

Offset measure_offset(Communicator& comm) {
  constexpr int kRoundTrips = 16;
  Offset mine;
  torch::Tensor stamp = torch::zeros({1}, torch::kInt64);
  for (int peer = 1; peer < comm.size(); ++peer) {
    int64_t best_round_trip = std::numeric_limits<int64_t>::max();
    for (int k = 0; k < kRoundTrips; ++k) {
      if (comm.rank() == 0) {
        const int64_t sent = detail::now_ns();
        comm.send(stamp, peer);
        comm.recv(stamp, peer);
        const int64_t back = detail::now_ns();
        const int64_t peer_read = stamp.item<int64_t>();
        if (back - sent < best_round_trip) {
          best_round_trip = back - sent;
          // Sent to the peer below: its offset, measured on rank 0's side.
          mine.offset_ns = peer_read - (sent + back) / 2;
          mine.uncertainty_ns = best_round_trip / 2;
        }
      } else if (comm.rank() == peer) {
        comm.recv(stamp, 0);
        stamp.fill_(detail::now_ns());
        comm.send(stamp, 0);
      }
    }
    // Rank 0 tells the peer its offset.
    torch::Tensor result = torch::tensor({mine.offset_ns, mine.uncertainty_ns}, torch::kInt64);
    if (comm.rank() == 0) comm.send(result, peer);
    if (comm.rank() == peer) {
      comm.recv(result, 0);
      mine.offset_ns = result[0].item<int64_t>();
      mine.uncertainty_ns = result[1].item<int64_t>();
    }
  }
  if (comm.rank() == 0) mine = {};
  return mine;
}

// This rank's spans as trace events, on rank 0's clock: ts and dur in
// microseconds, pid the rank, tid the thread.
nlohmann::json rank_events(int rank, const std::string& host) {
  Recorder& r = recorder();
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"args", {{"name", fmt::format("rank {} ({})", rank, host)}}}});
  events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& thread : r.threads) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", thread->id},
                      {"args", {{"name", thread->name}}}});
    for (const Event& e : thread->events) {
      const bool mark = e.end_ns < e.begin_ns;
      nlohmann::json event = {{"ph", mark ? "i" : "X"},
                              {"name", e.name},
                              {"cat", kind_name(e.kind)},
                              {"pid", rank},
                              {"tid", thread->id},
                              {"ts", static_cast<double>(e.begin_ns - r.offset_ns) / 1e3}};
      if (mark) event["s"] = "t";
      else event["dur"] = static_cast<double>(e.end_ns - e.begin_ns) / 1e3;
      events.push_back(std::move(event));
    }
  }
  return events;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Step: return "step";
    case Kind::Data: return "data";
    case Kind::Compute: return "compute";
    case Kind::Communication: return "communication";
    case Kind::Wait: return "wait";
    case Kind::Optimizer: return "optimizer";
    case Kind::Checkpoint: return "checkpoint";
  }
  return "?";
}

namespace detail {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(Kind kind, std::string name, int64_t begin_ns, int64_t end_ns) {
  ThreadLog& log = this_thread_log();
  if (log.events.size() >= kMostEventsPerThread) {
    std::lock_guard<std::mutex> lock(recorder().mutex);
    ++recorder().dropped;
    return;
  }
  log.events.push_back({kind, std::move(name), begin_ns, end_ns});
}

}  // namespace detail

void name_this_thread(const std::string& name) {
  if (on()) this_thread_log().name = name;
}

void start(const std::string& file, Communicator& comm) {
  Recorder& r = recorder();
  WB_ASSERT(!on(), "trace::start called twice");
  const Offset offset = measure_offset(comm);
  r.file = file;
  r.offset_ns = offset.offset_ns;
  r.uncertainty_ns = offset.uncertainty_ns;
  this_thread_log();  // the main thread's track comes first
  detail::g_on.store(true);
}

void write(Communicator& comm) {
  Recorder& r = recorder();
  if (!on()) return;
  detail::g_on.store(false);  // the gathering below is not part of the run
  const std::string text = rank_events(comm.rank(), host_name()).dump();
  torch::Tensor header = torch::tensor({static_cast<int64_t>(text.size()), r.uncertainty_ns,
                                        static_cast<int64_t>(r.dropped)}, torch::kInt64);
  if (comm.rank() != 0) {
    comm.send(header, 0);
    torch::Tensor bytes = torch::from_blob(const_cast<char*>(text.data()), {static_cast<int64_t>(text.size())},
                                           torch::kUInt8);
    comm.send(bytes, 0);
    return;
  }
  nlohmann::json all = nlohmann::json::parse(text);
  nlohmann::json offsets = nlohmann::json::array({0.0});
  size_t dropped = r.dropped;
  for (int peer = 1; peer < comm.size(); ++peer) {
    comm.recv(header, peer);
    torch::Tensor bytes = torch::empty({header[0].item<int64_t>()}, torch::kUInt8);
    comm.recv(bytes, peer);
    const nlohmann::json theirs = nlohmann::json::parse(
        std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel())));
    all.insert(all.end(), theirs.begin(), theirs.end());
    offsets.push_back(static_cast<double>(header[1].item<int64_t>()) / 1e3);
    dropped += static_cast<size_t>(header[2].item<int64_t>());
  }
  // Times from the first span on: a timeline that starts at 0.
  double first = std::numeric_limits<double>::max();
  for (const nlohmann::json& e : all)
    if (e["ph"] != "M") first = std::min(first, e["ts"].get<double>());
  for (nlohmann::json& e : all)
    if (e["ph"] != "M") e["ts"] = e["ts"].get<double>() - first;
  const nlohmann::json document = {
      {"traceEvents", all},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"workbook_trace", 1},
        {"ranks", comm.size()},
        {"clock_uncertainty_us", offsets},
        {"dropped_spans", dropped},
        {"note", "ts and dur in microseconds on rank 0's clock; clock_uncertainty_us: per rank, half the round "
                 "trip its offset to rank 0 was measured in"}}}};
  const std::filesystem::path path = r.file;
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary);
    WB_CHECK(static_cast<bool>(out), "--trace {}: cannot write there", path.string());
    out << document.dump() << "\n";
    WB_CHECK(static_cast<bool>(out), "--trace {}: writing failed (disk full?)", path.string());
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace workbook::trace
