// trace.hpp — a timeline of what every rank does: spans of loading data,
// computing, communicating and waiting, per rank and per thread, on one
// clock. Written as Chrome's trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open; `workbook report FILE` draws
// one step of it as a PNG.
//
//   program --trace run.json        (Program::connect starts it, Program::finish writes it)
//
//   {
//     workbook::trace::Span span(workbook::trace::Kind::Compute, "backward");
//     loss.backward();
//   }                                // the span ends here
//
// Note: [tracing off costs a branch] Tracing is off unless --trace is given.
// Off, a Span reads one atomic flag and does nothing else: no clock, no
// allocation, and its name is not even formatted (the format arguments are
// only used when it is on). On, a span costs two clock reads and one
// append to this thread's own list (no lock): `workbook bench ch04 -- --trace`
// measures what that adds to a step.
//
// Note: [one clock for every rank] Each rank reads its own steady clock. At
// the start, rank 0 exchanges a few messages with every other rank and
// keeps, per rank, the round trip that was shortest: the other rank read its
// clock during that round trip, so its offset to rank 0 is its reading minus
// the round trip's midpoint, within half the round trip (which the file
// records). Every span is moved onto rank 0's clock when the file is written.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace workbook {
class Communicator;

namespace trace {

// What a span is; the timeline's colour.
enum class Kind { Step, Data, Compute, Communication, Wait, Optimizer, Checkpoint };
const char* kind_name(Kind kind);

namespace detail {
inline std::atomic<bool> g_on{false};
int64_t now_ns();
void record(Kind kind, std::string name, int64_t begin_ns, int64_t end_ns);
}  // namespace detail

inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

class Span {
 public:
  Span(Kind kind, const char* name) : on_(on()) {
    if (on_) begin(kind, name);
  }
  Span(Kind kind, std::string name) : on_(on()) {
    if (on_) begin(kind, std::move(name));
  }
  template <typename... Args>
  Span(Kind kind, fmt::format_string<Args...> format, Args&&... args) : on_(on()) {
    if (on_) begin(kind, fmt::format(format, std::forward<Args>(args)...));
  }
  ~Span() { end(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  // Ends it before the scope does (once).
  void end() {
    if (!on_) return;
    on_ = false;
    detail::record(kind_, std::move(name_), begin_ns_, detail::now_ns());
  }

 private:
  void begin(Kind kind, std::string name) {
    kind_ = kind;
    name_ = std::move(name);
    begin_ns_ = detail::now_ns();
  }
  bool on_;
  Kind kind_ = Kind::Compute;
  std::string name_;
  int64_t begin_ns_ = 0;
};

// A moment on this thread's track ("bucket 0 launched"), drawn as a tick.
template <typename... Args>
void mark(Kind kind, fmt::format_string<Args...> format, Args&&... args) {
  if (!on()) return;
  const int64_t now = detail::now_ns();
  detail::record(kind, fmt::format(format, std::forward<Args>(args)...), now, now - 1);  // end < begin: a mark
}

// While one lives, nothing is recorded (a bench's untraced variant, beside
// its traced ones in one run). Local to this rank.
class Pause {
 public:
  Pause() : was_on_(detail::g_on.exchange(false)) {}
  ~Pause() { detail::g_on.store(was_on_); }
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  bool was_on_;
};

// The name of the calling thread's track ("main" unless named).
void name_this_thread(const std::string& name);

// Starts recording, to be written to `file` by write(). Collective: every
// rank calls it, with the same file (only rank 0 writes it). Measures the
// ranks' clock offsets first (Note: [one clock for every rank]).
void start(const std::string& file, Communicator& comm);

// Stops recording, gathers every rank's spans at rank 0 and writes the file
// (whole or not at all, even after a crash). Collective; nothing to do when
// tracing was not started. No other thread may use `comm` meanwhile.
void write(Communicator& comm);

}  // namespace trace
}  // namespace workbook
