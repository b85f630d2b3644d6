// watchdog.cpp — the thread that ends a process stuck in a call (watchdog.hpp).
#include "workbook/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace workbook::watchdog {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct State {
  std::mutex mutex;
  std::string label = "process " + std::to_string(getpid());
  bool in_call = false;
  std::string call;              // the call in progress, or the last one
  double call_deadline = 0.0;    // 0: no limit
  double call_timeout = 0.0;
  bool armed = false;
  std::string armed_what;
  double armed_deadline = 0.0, armed_limit = 0.0;
  double call_start = 0.0;
  std::function<void(const std::string&)> before_exit;
  std::function<std::optional<PeerFailure>()> peer_failure_probe;
  bool thread_started = false;
  long call_id = 0;              // counts the calls entered
  Waiting waiting;               // whom the call in progress waits for
  std::string board_prefix;      // the wait board's files: <prefix>.wait-<rank>; "" when none
  int job_rank = 0, job_size = 1;
};

// Never destroyed: the watchdog thread may look at it while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

// What the signal handler writes: kept formatted, because a handler may not
// allocate or format (it may only call async-signal-safe functions like
// write). Two buffers: the next text is written into the one the handler is
// not reading, then the index flips, so the handler never sees half a text.
char g_signal_texts[2][1024] = {"stopped by a signal\n", "stopped by a signal\n"};
std::atomic<int> g_signal_current{0};

// remove_on_exit's path, kept where the signal handler can read it.
char g_owned_file[1024] = "";

// This rank's entry on the wait board, likewise.
char g_wait_file[1024] = "";

void remove_owned_file() {
  if (g_owned_file[0] != '\0') unlink(g_owned_file);  // async-signal-safe
  if (g_wait_file[0] != '\0') unlink(g_wait_file);
}

void update_signal_text(const State& s) {
  std::string text = s.in_call ? fmt::format("{}: stopped by a signal while in {} (another rank failed or died, "
                                             "or the job was cancelled)\n", s.label, s.call)
                               : fmt::format("{}: stopped by a signal{}\n", s.label,
                                             s.call.empty() ? "" : "; the last call it made, " + s.call + ", had returned");
  const int next = 1 - g_signal_current.load();
  text.resize(std::min(text.size(), sizeof g_signal_texts[next] - 1));
  std::memcpy(g_signal_texts[next], text.c_str(), text.size() + 1);
  g_signal_current.store(next);
}

extern "C" void on_signal(int signal_number) {
  const char* text = g_signal_texts[g_signal_current.load()];
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
  remove_owned_file();
  _exit(128 + signal_number);
}

[[noreturn]] void end_process(const std::string& message) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    hook = state().before_exit;
  }
  fmt::print(stderr, "{}\n", message);
  std::fflush(stderr);
  if (hook) hook(message);
  remove_owned_file();
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(124);
}

// The watchdog thread's side of the wait board (Note [a deadlock is named,
// not timed out]): this rank's entry written and withdrawn, its peers' read.
class BoardWatch {
 public:
  // Returns the message that ends the process, or "".
  std::string tick(const State& snapshot, bool in_call, double waited) {
    if (snapshot.board_prefix.empty()) return "";
    const long id = snapshot.call_id;
    const Waiting& w = snapshot.waiting;
    const bool waits = in_call && (!w.sends_to.empty() || !w.receives_from.empty() || !w.collective.empty());
    if (published_ >= 0 && (!in_call || published_ != id)) withdraw();
    if (!waits || waited < 1.0) return "";
    if (published_ != id) publish(snapshot, id);
    if (waited < 2.0 || detail_now() < next_look_) return "";
    next_look_ = detail_now() + 0.5;
    std::vector<std::optional<detail::WaitEntry>> board(static_cast<size_t>(snapshot.job_size));
    for (int q = 0; q < snapshot.job_size; ++q) board[q] = read(snapshot.board_prefix, q);
    const std::vector<int> cycle = detail::deadlock_cycle(snapshot.job_rank, board);
    std::string key;
    for (int r : cycle) key += fmt::format("{}:{} ", r, board[r]->call_id);
    if (key.empty() || key != key_) {
      key_ = key;
      key_since_ = detail_now();
      return "";
    }
    // Seen unchanged 1.5 s apart: the lowest rank of the cycle reports; the others, later, if still here.
    const double held = detail_now() - key_since_;
    const bool lowest = *std::min_element(cycle.begin(), cycle.end()) == snapshot.job_rank;
    if (held < 1.5 || (!lowest && held < 8.0)) return "";
    return fmt::format("{}: {}\nEnding this process.", snapshot.label, detail::describe_deadlock(cycle, board));
  }

 private:
  static double detail_now() { return now(); }

  void publish(const State& snapshot, long id) {
    detail::WaitEntry entry{snapshot.job_rank, id, snapshot.label, snapshot.call, snapshot.waiting};
    const std::string path = snapshot.board_prefix + ".wait-" + std::to_string(snapshot.job_rank);
    const std::string partial = path + ".partial";
    {
      std::ofstream out(partial);
      out << detail::format_entry(entry);
    }
    std::rename(partial.c_str(), path.c_str());
    published_ = id;
  }

  void withdraw() {
    if (g_wait_file[0] != '\0') unlink(g_wait_file);
    published_ = -1;
  }

  static std::optional<detail::WaitEntry> read(const std::string& prefix, int rank) {
    std::ifstream in(prefix + ".wait-" + std::to_string(rank));
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return detail::parse_entry(rank, text.str());
  }

  long published_ = -1;     // the call whose entry is on the board, or -1
  double next_look_ = 0.0;  // when to read the peers' entries next
  std::string key_;         // the cycle last seen (rank:call ...)
  double key_since_ = 0.0;
};

void watch() {
  double failure_heard = 0.0;  // when the probe first answered (0: it has not)
  BoardWatch board;
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    State& s = state();
    std::function<std::optional<PeerFailure>()> probe;
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      probe = s.peer_failure_probe;
      waiting = s.in_call;
    }
    // Asked outside the lock: the probe reads a file, and CallScope must not wait for that.
    const std::optional<PeerFailure> failure = probe && waiting ? probe() : std::nullopt;
    if (!failure) failure_heard = 0.0;
    else if (failure_heard == 0.0) failure_heard = now();
    std::string message;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      const double t = now();
      const double waited = t - std::max(failure_heard, s.call_start);
      if (s.in_call && s.call_deadline > 0 && t > s.call_deadline)
        message = fmt::format("{}: {} did not return in {:.0f} s: another rank died, is stuck, or called a different "
                              "collective (or the same one with another count). Ending this process.",
                              s.label, s.call, s.call_timeout);
      else if (s.armed && t > s.armed_deadline)
        message = fmt::format("{}: {} ran past its {:.0f} s limit; {}. Ending this process.", s.label, s.armed_what,
                              s.armed_limit,
                              s.call.empty() ? "it made no collective call"
                                             : fmt::format("the last call it entered: {}{}", s.call,
                                                           s.in_call ? " (still waiting in it)" : " (returned)"));
      else if (failure && s.in_call && waited >= failure->grace_s)
        message = fmt::format("{}: {}. This rank has waited {:.0f} s since, in {}. Ending this process.", s.label,
                              failure->message, waited, s.call);
    }
    if (message.empty()) {
      // The board's files are read and written outside the lock, from a copy.
      State snapshot;
      bool in_call = false;
      double waited = 0.0;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        snapshot.label = s.label;
        snapshot.call = s.call;
        snapshot.call_id = s.call_id;
        snapshot.waiting = s.waiting;
        snapshot.board_prefix = s.board_prefix;
        snapshot.job_rank = s.job_rank;
        snapshot.job_size = s.job_size;
        in_call = s.in_call;
        waited = now() - s.call_start;
      }
      // A peer that said it failed explains the wait better than the cycle it leaves behind.
      if (!failure) message = board.tick(snapshot, in_call, waited);
    }
    if (!message.empty()) end_process(message);
  }
}

void start_thread_locked(State& s) {
  if (s.thread_started) return;
  s.thread_started = true;
  std::thread(watch).detach();
}

}  // namespace

void set_process_label(const std::string& label) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.label = label;
  update_signal_text(s);
}

CallScope::CallScope(std::string what, double timeout_s, Waiting waiting) {
  install_signal_handlers();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  start_thread_locked(s);
  s.in_call = true;
  ++s.call_id;
  s.waiting = std::move(waiting);
  s.call = std::move(what);
  s.call_timeout = timeout_s;
  s.call_start = now();
  s.call_deadline = timeout_s > 0 ? s.call_start + timeout_s : 0.0;
  update_signal_text(s);
}

CallScope::~CallScope() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.in_call = false;
  update_signal_text(s);
}

std::string last_call() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.call.empty()) return "none";
  return s.call + (s.in_call ? " (in progress)" : " (returned)");
}

void arm(const std::string& what, double seconds) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  start_thread_locked(s);
  s.armed = seconds > 0;
  s.armed_what = what;
  s.armed_limit = seconds;
  s.armed_deadline = now() + seconds;
}

void disarm() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.armed = false;
}

void set_before_exit(std::function<void(const std::string&)> hook) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.before_exit = std::move(hook);
}

void set_wait_board(const std::string& prefix, int job_rank, int job_size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.board_prefix = prefix;
  s.job_rank = job_rank;
  s.job_size = job_size;
  const std::string path = prefix.empty() ? "" : prefix + ".wait-" + std::to_string(job_rank);
  std::snprintf(g_wait_file, sizeof g_wait_file, "%s", path.size() < sizeof g_wait_file ? path.c_str() : "");
}

void set_peer_failure_probe(std::function<std::optional<PeerFailure>()> probe) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.peer_failure_probe = std::move(probe);
}

void remove_on_exit(const std::string& path) {
  const size_t length = std::min(path.size(), sizeof g_owned_file - 1);
  std::memcpy(g_owned_file, path.data(), length);
  g_owned_file[length] = '\0';
}

void install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  });
}

}  // namespace workbook::watchdog
