// watchdog.hpp — no hangs: a thread that ends the process when a call that
// waits on other ranks (a collective, a send, a receive) does not return in
// time, or when a test runs past its limit, saying which rank and which call.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

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

// Whom a call waits for, in the job's ranks (a group's ranks translated):
// what the wait board (below) compares between ranks.
struct Waiting {
  std::vector<int> sends_to, receives_from;  // point to point
  std::string collective;  // "" for point to point; else the same text on every rank in the same call
  std::vector<int> group;  // a collective's ranks
};

// Marks a call that waits on peers: from construction to destruction the
// watchdog holds it to `timeout_s` (<= 0: no limit). `what` describes it;
// `waiting` says for whom (empty: not known, never part of a deadlock found).
class CallScope {
 public:
  CallScope(std::string what, double timeout_s, Waiting waiting = {});
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

// Note: [A peer's failure ends the wait in seconds]
// A call's 30 s limit is for a peer nobody has heard from. When a peer has
// said that it failed (a test's check failed or threw on one rank, which
// then left the test), the others may be waiting in a call it will never
// make: waiting out the 30 s only hides the failure behind a time-out. So
// the test runner gives the watchdog a probe that answers "has a peer
// failed?" (it reads the peers' notices, mpi_main.cpp); a call still waiting
// `grace_s` after the answer came, or after it began if later, ends the
// process with the probe's message, which names the failed rank and check.
// The probe runs on the watchdog's thread, only while a call waits.
struct PeerFailure {
  std::string message;   // "rank 1 of 2 failed in test ... at file:line: ..."
  double grace_s = 5.0;  // how long a call may still wait after it
};
void set_peer_failure_probe(std::function<std::optional<PeerFailure>()> probe);

// Note: [a deadlock is named, not timed out]
// When every rank of a cycle waits for the next (two blocking sends toward
// each other, exchanges that do not pair, a collective that a peer has not
// joined because it waits in a send), no time-out can say why: each rank
// sees only its own call. So, as MPI correctness checkers such as MUST do,
// the ranks keep a wait-for graph: a call that has waited 1 s writes what it
// waits for to `<prefix>.wait-<rank>` (the watchdog's thread, never the
// call's: nothing on the fast path), and a rank whose call has waited 2 s
// reads its peers' files. An edge "r waits for q" counts only when q waits
// too, in a call that cannot satisfy r's (q does not receive from r while r
// sends to q; q is in another collective). A cycle of such edges, seen
// unchanged 1.5 s apart, is a deadlock: the lowest rank in it ends its
// process with every rank's call and the likely cause (at about 3.5 s, so a
// 3 s time-out still ends first); the others follow if the launcher has not
// stopped them. A peer's failure notice, when heard, is reported instead. Ranks on
// machines without a shared folder (no prefix) keep the call's time-out.
void set_wait_board(const std::string& prefix, int job_rank, int job_size);

namespace detail {
// One rank's entry on the wait board: the call it has waited in for a while.
struct WaitEntry {
  int rank = -1;     // in the job
  long call_id = 0;  // which of its calls (the board compares sightings by it)
  std::string label, what;
  Waiting waiting;
};
std::string format_entry(const WaitEntry& entry);
std::optional<WaitEntry> parse_entry(int rank, const std::string& text);
// The cycle through `self` of ranks that wait for each other and cannot go
// on (Note [a deadlock is named, not timed out]), as its ranks in order;
// empty when there is none. `board[q]`: rank q's entry, if it waits.
std::vector<int> deadlock_cycle(int self, const std::vector<std::optional<WaitEntry>>& board);
// What a cycle's ranks wait in, for whom, and the likely cause.
std::string describe_deadlock(const std::vector<int>& cycle, const std::vector<std::optional<WaitEntry>>& board);
}  // namespace detail

// A file this process created for its peers (the runner's notices):
// removed on every exit the watchdog makes, its own and a signal's.
void remove_on_exit(const std::string& path);

// SIGTERM and SIGINT (the launcher stopping the job because another rank
// failed, or Ctrl-C) print this process's label and the call it was in, then
// end it. Installed by the first CallScope; harmless to call again.
void install_signal_handlers();

}  // namespace workbook::watchdog
