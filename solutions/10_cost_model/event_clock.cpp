// event_clock.cpp — ex10.2: when a message leaves, when it arrives, and
// what waiting for it does to a rank's clock.
#include <algorithm>

#include "simulator.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

double send_message(RankClock& sender, double bytes, const Link& link) {
  WB_ASSERT(bytes >= 0, "send_message: {} bytes", bytes);
  double arrival_s = 0.0;
  // BEGIN SOLUTION ex10.2
  const double leaves_s = std::max(sender.now_s, sender.link_free_s);
  arrival_s = leaves_s + link.seconds(bytes);
  sender.link_free_s = arrival_s;
  // END SOLUTION
  return arrival_s;
}

void receive_message(RankClock& receiver, double arrival_s) {
  // BEGIN SOLUTION ex10.2
  receiver.now_s = std::max(receiver.now_s, arrival_s);
  // END SOLUTION
}

}  // namespace ch10
