// watchdog.cpp — the thread that ends a process stuck in a call (watchdog.hpp).
#include "workbook/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
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

void remove_owned_file() {
  if (g_owned_file[0] != '\0') unlink(g_owned_file);  // async-signal-safe
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

void watch() {
  double failure_heard = 0.0;  // when the probe first answered (0: it has not)
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

CallScope::CallScope(std::string what, double timeout_s) {
  install_signal_handlers();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  start_thread_locked(s);
  s.in_call = true;
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
