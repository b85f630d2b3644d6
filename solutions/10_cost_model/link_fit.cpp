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
  // BEGIN SOLUTION ex10.1
  // Ordinary least squares of seconds on bytes (Note [fit in seconds, not in
  // logarithms]), centred first: the sizes run from bytes to tens of MiB, and
  // Σn² would lose the small end's digits in a double.
  double mean_bytes = 0.0, mean_seconds = 0.0;
  for (const Timing& t : timings) {
    mean_bytes += static_cast<double>(t.bytes);
    mean_seconds += t.seconds;
  }
  mean_bytes /= static_cast<double>(timings.size());
  mean_seconds /= static_cast<double>(timings.size());
  double covariance = 0.0, variance = 0.0;
  for (const Timing& t : timings) {
    const double dn = static_cast<double>(t.bytes) - mean_bytes;
    covariance += dn * (t.seconds - mean_seconds);
    variance += dn * dn;
  }
  link.beta_s_per_byte = covariance / variance;
  link.alpha_s = mean_seconds - link.beta_s_per_byte * mean_bytes;
  // END SOLUTION
  return link;
}

Link fit_shaped_link(const std::vector<Timing>& timings) {
  WB_CHECK(!timings.empty(), "fit_shaped_link: no timings");
  Link link;
  // BEGIN SOLUTION ex10.1
  int64_t smallest = timings.front().bytes;
  for (const Timing& t : timings) smallest = std::min(smallest, t.bytes);
  std::vector<double> smallest_seconds;
  std::vector<Timing> bandwidth_bound;
  for (const Timing& t : timings) {
    if (t.bytes == smallest) smallest_seconds.push_back(t.seconds);
    if (t.bytes >= (256 << 10)) bandwidth_bound.push_back(t);
  }
  link.alpha_s = workbook::median(smallest_seconds);
  link.beta_s_per_byte = fit_link(bandwidth_bound).beta_s_per_byte;
  // END SOLUTION
  return link;
}

}  // namespace ch10
