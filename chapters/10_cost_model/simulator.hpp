// simulator.hpp — an event simulator of the α–β model that runs real code:
// every simulated rank is a thread with a Communicator of its own whose
// messages carry the data and are charged α + n·β of simulated time. So
// Chapter 4's ring, unchanged, reports what it would cost on a link, and
// the closed form of ex10.4 can be checked against the schedule the ring
// actually follows.
//
//        rank 0                rank 1              (simulated seconds →)
//   now ──┬─ exchange ─────────────┬─ exchange
//         │  ═══ α + n·β ═══►      │   wait(): rank 1 needs the message
//         ▼                        ▼
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "cost_model.hpp"
#include "workbook/communicator.hpp"

namespace ch10 {

// A simulated rank's two clocks.
struct RankClock {
  double now_s = 0.0;        // how far this rank's program has got
  double link_free_s = 0.0;  // when its outgoing link has finished every message handed to it
};

// ---- ex10.2 -------------------------------------------------------------------
// The world the two clocks describe: the lesson's section 2 (a message of n
// bytes takes α + n·β; a rank has one outgoing link, which carries one
// message at a time, from the moment it leaves until it has arrived;
// handing it a message does not stop the program).
//
// `sender` hands a message of `bytes` bytes to its link. Returns when the
// message has arrived, and leaves `sender`'s clocks true. The sender's
// program does not wait here (a blocking send or an exchange's wait(), in
// the given code, says when it may use the buffer again).
double send_message(RankClock& sender, double bytes, const Link& link);
// `receiver`'s program takes a message that arrives at `arrival_s`; its
// clock afterwards says where its program is.
void receive_message(RankClock& receiver, double arrival_s);

// ---- given ----------------------------------------------------------------------
struct SimulatedRun {
  std::vector<double> finish_s;  // each rank's clock when its body returned
  int64_t messages = 0;          // messages sent, by all ranks
  double seconds() const;        // the latest finish: the collective's time
};

// Note: [a simulator that runs the real schedule]
// simulate() runs `body` on `ranks` threads, each with a Communicator
// (rank r of `ranks`) whose point-to-point calls move the tensors between
// the threads and time them with ex10.2's two functions:
//   send(t, to)                   the message leaves; the call returns when it has arrived
//   recv(t, from)                 waits for the next message from `from`
//   start_exchange(s, to, r, from) s leaves at once; wait(): both have arrived
//   send_without_waiting(comm, t, to)   (below) the message leaves; the call returns at once
// Collectives and split() are not simulated (a UserError): the point is to
// time schedules built from messages, as Chapter 4's ring is. Messages
// between two ranks arrive in the order they were sent. A rank waiting for
// a message no rank will send (every rank waiting, none of them for a
// message already there) fails at once, naming the rank and the peer;
// any rank's exception ends the run and is rethrown, naming the rank.
// message_bytes() is 2^40: a ring sends each segment whole, unless told a
// chunk size (RingOptions::chunk_elements).
SimulatedRun simulate(int ranks, const Link& link, const std::function<void(workbook::Communicator&)>& body);

// Inside simulate()'s body: this rank computes for `seconds` (its clock
// moves on; what it has handed to its link goes on travelling). A UserError
// on any other Communicator.
void compute_for(workbook::Communicator& comm, double seconds);

// Inside simulate()'s body: hands `tensor` (copied) to this rank's link for
// rank `to` and returns at once, as MPI_Isend does: the program goes on
// while the message travels (a pipeline stage computes its next
// micro-batch). The receiver takes it with recv(). A UserError on any other
// Communicator.
void send_without_waiting(workbook::Communicator& comm, const torch::Tensor& tensor, int to);

}  // namespace ch10
