// launch.hpp — who this process is in a multi-process job: rank, world size
// and local rank, read from the environment the launcher set.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace workbook {

// Note: [Launchers and their variables]
// Every launcher tells its processes who they are through the environment:
//
//   launcher               rank                  world size              local rank
//   mpirun (Open MPI)      OMPI_COMM_WORLD_RANK  OMPI_COMM_WORLD_SIZE    OMPI_COMM_WORLD_LOCAL_RANK
//   mpiexec (MPICH, Intel) PMI_RANK              PMI_SIZE                MPI_LOCALRANKID
//   srun (SLURM)           SLURM_PROCID          SLURM_STEP_NUM_TASKS    SLURM_LOCALID
//                                                (or SLURM_NTASKS)
//   jsrun (LSF)            JSM_NAMESPACE_RANK    JSM_NAMESPACE_SIZE      JSM_NAMESPACE_LOCAL_RANK
//   pbsdsh (PBS)           PBS_VNODENUM          PBS_NP                  -
//
// The first launcher in this order whose variables are present wins: an
// mpirun inside a SLURM or LSF job sees its own variables and the
// scheduler's, and mpirun is the one that started this process. The MPI
// library knows rank and size too; the Communicator checks that it agrees.
// The local rank is what MPI does not say: it picks this process's GPU.
struct LaunchEnv {
  int rank = 0;          // this process: 0 .. world_size-1
  int world_size = 1;    // processes in the job
  int local_rank = 0;    // among the processes on this node: selects the GPU
  int local_size = 0;    // processes on this node (0: the launcher does not say)
  std::string launcher = "single process";  // e.g. "mpirun (OMPI_COMM_WORLD_*)"
  // Empty for the whole job. For a group of its ranks (Communicator::split),
  // what the group is and who this process is in the job: rank and
  // world_size are then the group's ("rank 1 of 2 in tensor group 1 (rank 3
  // of 4 in the job)").
  std::string group;
  // A group's members as ranks of the job, in the group's order (empty for
  // the whole job): how the watchdog's wait board names a group's peers.
  std::vector<int> job_ranks;
  int job_rank(int rank_here) const { return job_ranks.empty() ? rank_here : job_ranks.at(rank_here); }

  bool distributed() const { return world_size > 1; }
  std::string label() const;  // "rank 1 of 4"; in a group, "rank 1 of 2 in <group>"
};

using GetEnv = std::function<const char*(const char*)>;

// Reads the launcher's variables (from `getenv`, the process environment by
// default). None present: a single process. A launcher's variables present
// but incomplete, not numbers, or inconsistent (rank >= size, ...): a
// UserError that names the variables and says how to launch.
LaunchEnv read_launch_env(const GetEnv& getenv = {});

// Intra-op CPU threads for each rank by default: the cores this process may
// use, shared by the ranks on this node when the launcher did not bind each
// rank to its own cores. At least 1.
int default_threads_per_rank(const LaunchEnv& env);

}  // namespace workbook
