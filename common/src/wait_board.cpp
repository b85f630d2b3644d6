// wait_board.cpp — the wait-for graph between ranks (Note [a deadlock is
// named, not timed out] in watchdog.hpp): the entries ranks write, the cycle
// that is a deadlock, and its description.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "workbook/watchdog.hpp"

namespace workbook::watchdog::detail {
namespace {

bool contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

bool point_to_point(const WaitEntry& e) { return e.waiting.collective.empty(); }

// Whether `r` waits for `q` in a way q's present call cannot satisfy.
bool blocked_by(const WaitEntry& r, const WaitEntry& q) {
  const Waiting &a = r.waiting, &b = q.waiting;
  if (contains(a.sends_to, q.rank) && !contains(b.receives_from, r.rank)) return true;
  if (contains(a.receives_from, q.rank) && !contains(b.sends_to, r.rank)) return true;
  return !a.collective.empty() && contains(a.group, q.rank) && q.rank != r.rank && b.collective != a.collective;
}

std::vector<int> numbers(std::istringstream& in) {
  std::vector<int> out;
  for (int v; in >> v;) out.push_back(v);
  return out;
}

}  // namespace

std::string format_entry(const WaitEntry& e) {
  return fmt::format("id {}\nlabel {}\nwhat {}\nsends {}\nreceives {}\ncollective {}\ngroup {}\n", e.call_id, e.label,
                     e.what, fmt::join(e.waiting.sends_to, " "), fmt::join(e.waiting.receives_from, " "),
                     e.waiting.collective, fmt::join(e.waiting.group, " "));
}

std::optional<WaitEntry> parse_entry(int rank, const std::string& text) {
  WaitEntry e;
  e.rank = rank;
  std::istringstream lines(text);
  int fields = 0;
  for (std::string line; std::getline(lines, line); ++fields) {
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space), value = space == std::string::npos ? "" : line.substr(space + 1);
    std::istringstream in(value);
    if (key == "id") in >> e.call_id;
    else if (key == "label") e.label = value;
    else if (key == "what") e.what = value;
    else if (key == "sends") e.waiting.sends_to = numbers(in);
    else if (key == "receives") e.waiting.receives_from = numbers(in);
    else if (key == "collective") e.waiting.collective = value;
    else if (key == "group") e.waiting.group = numbers(in);
    else return std::nullopt;
  }
  if (fields != 7) return std::nullopt;  // not an entry the writer wrote
  return e;
}

std::vector<int> deadlock_cycle(int self, const std::vector<std::optional<WaitEntry>>& board) {
  const int n = static_cast<int>(board.size());
  if (self < 0 || self >= n || !board[self]) return {};
  // Depth-first from `self` along blocked edges, back to `self`.
  std::vector<int> path = {self};
  std::vector<bool> seen(n, false);
  seen[self] = true;
  std::function<bool(int)> search = [&](int r) {
    for (int q = 0; q < n; ++q) {
      if (q == r || !board[q] || !blocked_by(*board[r], *board[q])) continue;
      if (q == self) return true;
      if (seen[q]) continue;
      seen[q] = true;
      path.push_back(q);
      if (search(q)) return true;
      path.pop_back();
    }
    return false;
  };
  return search(self) ? path : std::vector<int>{};
}

std::string describe_deadlock(const std::vector<int>& cycle, const std::vector<std::optional<WaitEntry>>& board) {
  std::string text = "deadlock: these ranks wait for each other in a cycle, and none can go on:";
  bool any_collective = false, any_point = false, sends_only = true;
  for (size_t i = 0; i < cycle.size(); ++i) {
    const WaitEntry& r = *board[cycle[i]];
    const WaitEntry& q = *board[cycle[(i + 1) % cycle.size()]];
    text += fmt::format("\n  job rank {} ({}) waits in {} for job rank {}", r.rank, r.label, r.what, q.rank);
    any_collective = any_collective || !point_to_point(r);
    any_point = any_point || point_to_point(r);
    sends_only = sends_only && point_to_point(r) && contains(r.waiting.sends_to, q.rank) &&
                 !contains(q.waiting.receives_from, r.rank) && !contains(r.waiting.receives_from, q.rank);
  }
  if (any_collective && any_point)
    text += "\nA rank waits in a collective that a peer has not joined, because that peer still waits in a "
            "point-to-point call. The ranks made different numbers of sends, receives or exchanges before it (a "
            "count worked out from one rank's own sizes, a number of chunks say, is the usual cause), or only some "
            "ranks call the collective.";
  else if (any_collective)
    text += "\nThe ranks wait in different collectives: every rank of a group must make the same collective calls, "
            "in the same order.";
  else if (sends_only)
    text += "\nEach sends to the next and none receives: a blocking send of a large message returns only once its "
            "peer has received it (a small one may return at once, so the same code can work at one size and hang "
            "at another). Exchange both ways at once (start_exchange, exchange), or order the calls so that one "
            "side receives first.";
  else
    text += "\nTheir point-to-point calls do not pair: each waits on a peer that is not, now, sending to it or "
            "receiving from it. Every send needs its receive on the peer, in the same order on both sides.";
  return text;
}

}  // namespace workbook::watchdog::detail
