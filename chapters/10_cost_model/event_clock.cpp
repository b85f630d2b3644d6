// event_clock.cpp — ex10.2: when a message leaves, when it arrives, and
// what waiting for it does to a rank's clock.
#include <algorithm>

#include "simulator.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

double send_message(RankClock& sender, double bytes, const Link& link) {
  WB_ASSERT(bytes >= 0, "send_message: {} bytes", bytes);
  double arrival_s = 0.0;
  WB_NOT_IMPLEMENTED("ex10.2");  // TODO(ex10.2): your code here
  return arrival_s;
}

void receive_message(RankClock& receiver, double arrival_s) {
  WB_NOT_IMPLEMENTED("ex10.2");  // TODO(ex10.2): your code here
}

}  // namespace ch10
