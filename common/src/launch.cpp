// launch.cpp — reading rank, world size and local rank from the launcher.
#include "workbook/launch.hpp"

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "workbook/device.hpp"
#include "workbook/errors.hpp"

namespace workbook {
namespace {

struct LauncherVariables {
  const char* name;
  const char* rank;
  const char* size;
  const char* size_fallback;  // may be null
  const char* local_rank;     // may be null
  const char* local_size;     // may be null
};

// In priority order (see the Note in launch.hpp).
const LauncherVariables kLaunchers[] = {
    {"mpirun (OMPI_COMM_WORLD_*)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", nullptr,
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpiexec (PMI_*)", "PMI_RANK", "PMI_SIZE", nullptr, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"srun (SLURM_*)", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"jsrun (JSM_NAMESPACE_*)", "JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", nullptr, "JSM_NAMESPACE_LOCAL_RANK",
     "JSM_NAMESPACE_LOCAL_SIZE"},
    {"pbsdsh (PBS_*)", "PBS_VNODENUM", "PBS_NP", nullptr, nullptr, nullptr},
};

// The variable's value as a non-negative integer; nullopt when unset.
std::optional<int> read_int(const GetEnv& getenv, const char* name, const char* launcher) {
  if (name == nullptr) return std::nullopt;
  const char* text = getenv(name);
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  WB_CHECK(*text != '\0' && *end == '\0' && errno == 0 && value >= 0 && value < (1L << 30),
           "{}={} is not a process number; the launcher ({}) set it, or someone set it by hand", name, text,
           launcher);
  return static_cast<int>(value);
}

}  // namespace

std::string LaunchEnv::label() const {
  return group.empty() ? fmt::format("rank {} of {}", rank, world_size)
                       : fmt::format("rank {} of {} in {}", rank, world_size, group);
}

LaunchEnv read_launch_env(const GetEnv& getenv_given) {
  const GetEnv getenv = getenv_given ? getenv_given : [](const char* name) { return std::getenv(name); };
  for (const LauncherVariables& l : kLaunchers) {
    // SLURM sets its task counts in every shell of an allocation (salloc,
    // sbatch); only srun's tasks have a SLURM_PROCID. The other launchers'
    // variables exist only in the processes they start.
    const bool slurm = std::string(l.rank) == "SLURM_PROCID";
    const bool any = getenv(l.rank) ||
                     (!slurm && (getenv(l.size) || (l.size_fallback && getenv(l.size_fallback))));
    if (!any) continue;
    std::optional<int> rank = read_int(getenv, l.rank, l.name);
    std::optional<int> size = read_int(getenv, l.size, l.name);
    if (!size) size = read_int(getenv, l.size_fallback, l.name);
    const std::string size_names = l.size_fallback ? fmt::format("{} (or {})", l.size, l.size_fallback) : l.size;
    WB_CHECK(rank.has_value(), "{} is set but {} is not: a launcher sets both. Start the job with mpirun, srun "
             "or jsrun (or unset {} to run a single process)", size_names, l.rank, size_names);
    WB_CHECK(size.has_value(), "{} is set but {} is not: a launcher sets both. Start the job with mpirun, srun "
             "or jsrun (or unset {} to run a single process)", l.rank, size_names, l.rank);
    WB_CHECK(*size >= 1 && *rank < *size, "{}={} is not a rank of a {}-process job ({}={}): the environment is "
             "inconsistent", l.rank, *rank, *size, size_names, *size);
    LaunchEnv env;
    env.launcher = l.name;
    env.rank = *rank;
    env.world_size = *size;
    // Without a local rank (pbsdsh), one process per node is assumed.
    env.local_rank = read_int(getenv, l.local_rank, l.name).value_or(0);
    env.local_size = read_int(getenv, l.local_size, l.name).value_or(0);
    // Note: local ranks need not follow ranks: Open MPI 5 (PRRTE), oversubscribed,
    // gives rank 1 of 3 local rank 2. Only their range is checked.
    WB_CHECK(env.local_size <= env.world_size,
             "{}: local size {} is larger than the job's {} processes: the environment is inconsistent", l.name,
             env.local_size, env.world_size);
    WB_CHECK(env.local_size == 0 || env.local_rank < env.local_size,
             "{}: local rank {} is not below the local size {}: the environment is inconsistent", l.name,
             env.local_rank, env.local_size);
    return env;
  }
  return LaunchEnv{};
}

int default_threads_per_rank(const LaunchEnv& env) {
  const int cores = available_cores();
  // Bound to its own cores (mpirun binds ranks to cores when they fit): all of them.
  const int node_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cores < node_cores) return cores;
  const int sharing = std::max(1, env.local_size > 0 ? env.local_size : 1);
  return std::max(1, cores / sharing);
}

}  // namespace workbook
