// mpi_test.hpp — what a multi-process test needs from its runner
// (mpi_main.cpp): this rank's launch environment, a fresh Communicator per
// test, and agreement across ranks.
#pragma once
#include <memory>

#include "workbook/communicator.hpp"
#include "workbook/launch.hpp"

namespace mpi_test {

// This process's rank, world size and local rank (read once at start).
const workbook::LaunchEnv& env();

// A new MPI Communicator for one test. With the runner's defaults: every
// collective is checked across ranks, and a call waits at most 30 s
// ($WORKBOOK_CHECK_COLLECTIVES, $WORKBOOK_COMM_TIMEOUT override them).
// Every rank must create it (creation is collective), in the same order.
std::unique_ptr<workbook::Communicator> communicator();

// True on every rank when `condition` is true on every rank: REQUIRE on the
// result stops every rank together, where a REQUIRE on one rank alone would
// leave the others waiting in the test's next collective.
bool all_ranks(bool condition);

}  // namespace mpi_test
