// watchdog.hpp — no hangs: a thread that ends the process when a call that
// waits on other ranks (a collective, a send, a receive) does not return in
// time, or when a test runs past its limit, saying which rank and which call.
#pragma once
#include <functional>
#include <string>

namespace workbook::watchdog {

// Note: [Why a watchdog, and not a timeout on each MPI call]
// A blocking MPI call has no timeout: when a peer has died, or called a
// different collective, or the same one with another count, it can wait
// forever. So each call that waits on peers is bracketed by a CallScope; a
// thread checks every 100 ms whether the call in progress has passed its
// deadline and, if it has, prints
//     rank 1 of 2: all_reduce #12 (float32 x 1475338, average) did not return in 60 s ...
// and ends the process with exit status 124. The launcher (mpirun, srun) then
// stops the other ranks, and each prints the call it was in (the SIGTERM
// handler below): so every rank says where it was. ProcessGroupNCCL's
// watchdog in PyTorch works the same way. The calls themselves stay the
// library's fast blocking ones: nothing is polled on the fast path.

// Names this process in every message ("rank 1 of 2"); set once the rank is known.
void set_process_label(const std::string& label);

// Marks a call that waits on peers: from construction to destruction the
// watchdog holds it to `timeout_s` (<= 0: no limit). `what` describes it.
class CallScope {
 public:
  CallScope(std::string what, double timeout_s);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
};

// The most recent call entered: "all_reduce #12 (...)", and whether it returned.
std::string last_call();

// A limit for a whole stretch of work (a test case): `what` must be over
// within `seconds`, or the process ends as for a call. disarm() ends it.
void arm(const std::string& what, double seconds);
void disarm();

// Runs just before the watchdog ends the process (after its message is
// printed), with that message: the test runner records the failure there.
void set_before_exit(std::function<void(const std::string& message)> hook);

// SIGTERM and SIGINT (the launcher stopping the job because another rank
// failed, or Ctrl-C) print this process's label and the call it was in, then
// end it. Installed by the first CallScope; harmless to call again.
void install_signal_handlers();

}  // namespace workbook::watchdog
