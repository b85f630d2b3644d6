// backends.hpp — (private to common/src) the two Communicator backends and
// the MPI library's start and stop, which both use.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "workbook/communicator.hpp"

namespace workbook::detail {

// Initializes MPI once per process (and finalizes it at a normal exit), then
// checks that MPI's rank and size agree with the launcher's variables.
// MPI_Init_thread is watched like a collective: it must return within
// `timeout_s` (watchdog.hpp).
void start_mpi(const LaunchEnv& env, double timeout_s);

// Throws CommunicationError naming the rank and the call when `code` is not MPI_SUCCESS.
void check_mpi(int code, const LaunchEnv& env, const char* call);

// MPI_Allgather of `bytes` (equal length on every rank) over `channel`.
std::vector<std::string> allgather_bytes(MPI_Comm channel, const std::string& bytes, const LaunchEnv& env);

// The job's rank (in MPI_COMM_WORLD) of each of `group`'s ranks, in order.
std::vector<int> job_ranks_of(MPI_Comm group);

std::unique_ptr<Communicator> make_mpi_communicator(const LaunchEnv& env, const CommunicatorOptions& options);
std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv& env, const CommunicatorOptions& options);

}  // namespace workbook::detail
