// link_fit.cpp — ex10.1: α and β from ping-pong timings.
#include <algorithm>
#include <set>

#include "cost_model.hpp"
#include "workbook/errors.hpp"
#include "workbook/statistics.hpp"

namespace ch10 {

Link fit_link(const std::vector<Timing>& timings) {
  std::set<int64_t> sizes;
  for (const Timing& t : timings) sizes.insert(t.bytes);
  WB_CHECK(sizes.size() >= 2, "fit_link needs timings of at least two message sizes, got {}", sizes.size());
  Link link;
  WB_NOT_IMPLEMENTED("ex10.1");  // TODO(ex10.1): your code here
  return link;
}

Link fit_shaped_link(const std::vector<Timing>& timings) {
  WB_CHECK(!timings.empty(), "fit_shaped_link: no timings");
  Link link;
  WB_NOT_IMPLEMENTED("ex10.1");  // TODO(ex10.1): your code here
  return link;
}

}  // namespace ch10
