// test_wait_board.cpp — the wait-for graph (Note [a deadlock is named, not
// timed out] in watchdog.hpp): which waits form a deadlock, and which do not.
#include "catch2_compat.hpp"
#include "workbook/watchdog.hpp"

using Catch::Matchers::ContainsSubstring;
using workbook::watchdog::Waiting;
using workbook::watchdog::detail::WaitEntry;
using Board = std::vector<std::optional<WaitEntry>>;

namespace {

WaitEntry send(int rank, int to) { return {rank, 1, "rank", "send #1", Waiting{{to}, {}, "", {}}}; }
WaitEntry recv(int rank, int from) { return {rank, 1, "rank", "recv #1", Waiting{{}, {from}, "", {}}}; }
WaitEntry exchange(int rank, int to, int from) { return {rank, 1, "rank", "exchange #1", Waiting{{to}, {from}, "", {}}}; }
WaitEntry collective(int rank, const std::string& which, std::vector<int> group) {
  return {rank, 1, "rank", which, Waiting{{}, {}, which, std::move(group)}};
}

}  // namespace

TEST_CASE("wait board: sends toward each other are a cycle; a send and its receive are not", "[watchdog]") {
  using workbook::watchdog::detail::deadlock_cycle;
  REQUIRE(deadlock_cycle(0, Board{send(0, 1), send(1, 0)}) == std::vector<int>{0, 1});
  REQUIRE(deadlock_cycle(1, Board{send(0, 1), send(1, 0)}) == std::vector<int>{1, 0});
  REQUIRE(deadlock_cycle(0, Board{send(0, 1), recv(1, 0)}).empty());  // slow, not stuck
  REQUIRE(deadlock_cycle(0, Board{send(0, 1), std::nullopt}).empty());  // rank 1 computes: it may yet receive
  REQUIRE(deadlock_cycle(0, Board{exchange(0, 1, 2), exchange(1, 2, 0), exchange(2, 0, 1)}).empty());  // a ring
  const Board unpaired{exchange(0, 1, 1), exchange(1, 2, 2), exchange(2, 0, 0)};
  REQUIRE(deadlock_cycle(0, unpaired) == std::vector<int>{0, 1, 2});
  REQUIRE_THAT(workbook::watchdog::detail::describe_deadlock({0, 1, 2}, unpaired), ContainsSubstring("do not pair"));
  REQUIRE_THAT(workbook::watchdog::detail::describe_deadlock({0, 1}, Board{send(0, 1), send(1, 0)}),
               ContainsSubstring("none receives"));
}

TEST_CASE("wait board: a collective a peer has not joined, and the same collective everywhere", "[watchdog]") {
  using workbook::watchdog::detail::deadlock_cycle;
  const Board some{collective(0, "all_reduce #1", {0, 1}), recv(1, 0)};
  REQUIRE(deadlock_cycle(0, some) == std::vector<int>{0, 1});
  REQUIRE_THAT(workbook::watchdog::detail::describe_deadlock({0, 1}, some), ContainsSubstring("has not joined"));
  REQUIRE(deadlock_cycle(0, Board{collective(0, "all_reduce #1", {0, 1}), collective(1, "all_reduce #1", {0, 1})}).empty());
  // A group's collective waits only for the group: rank 2, elsewhere, is no part of it.
  REQUIRE(deadlock_cycle(0, Board{collective(0, "all_reduce #1", {0, 1}), collective(1, "all_reduce #1", {0, 1}),
                                  send(2, 0)})
              .empty());
}

TEST_CASE("wait board: an entry survives its file, and a torn one is refused", "[watchdog]") {
  using namespace workbook::watchdog::detail;
  const WaitEntry e = exchange(3, 4, 2);
  const auto back = parse_entry(3, format_entry(e));
  REQUIRE(back);
  REQUIRE(back->waiting.sends_to == std::vector<int>{4});
  REQUIRE(back->waiting.receives_from == std::vector<int>{2});
  REQUIRE(back->what == "exchange #1");
  REQUIRE_FALSE(parse_entry(3, "id 1\nlabel x\n"));
}
