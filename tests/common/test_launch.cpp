// The launch environment: rank, world size and local rank from each launcher's variables.
#include "catch2_compat.hpp"

#include <map>
#include <string>

#include "workbook/errors.hpp"
#include "workbook/launch.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

// A getenv over a fixed set of variables.
workbook::GetEnv fake(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("no launcher variables: a single process", "[launch]") {
  const workbook::LaunchEnv env = workbook::read_launch_env(fake({}));
  REQUIRE(env.rank == 0);
  REQUIRE(env.world_size == 1);
  REQUIRE(env.local_rank == 0);
  REQUIRE_FALSE(env.distributed());
  REQUIRE(env.launcher == "single process");
}

TEST_CASE("each launcher's variables are read", "[launch]") {
  SECTION("mpirun") {
    auto env = workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
    REQUIRE((env.rank == 3 && env.world_size == 4 && env.local_rank == 1 && env.local_size == 2));
    REQUIRE_THAT(env.launcher, ContainsSubstring("mpirun"));
    REQUIRE(env.label() == "rank 3 of 4");
  }
  SECTION("srun: the step's task count before the job's") {
    auto env = workbook::read_launch_env(fake({{"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "8"},
                                                {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}}));
    REQUIRE((env.rank == 5 && env.world_size == 8 && env.local_rank == 1));
    REQUIRE_THAT(env.launcher, ContainsSubstring("srun"));
  }
  SECTION("srun without a step count") {
    auto env = workbook::read_launch_env(fake({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}));
    REQUIRE((env.rank == 1 && env.world_size == 2 && env.local_rank == 0));
  }
  SECTION("jsrun (LSF)") {
    auto env = workbook::read_launch_env(fake({{"JSM_NAMESPACE_RANK", "2"}, {"JSM_NAMESPACE_SIZE", "6"},
                                                {"JSM_NAMESPACE_LOCAL_RANK", "2"}, {"LSB_JOBID", "77"}}));
    REQUIRE((env.rank == 2 && env.world_size == 6 && env.local_rank == 2));
  }
  SECTION("MPICH / Intel MPI") {
    auto env = workbook::read_launch_env(fake({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"}}));
    REQUIRE((env.rank == 1 && env.world_size == 3 && env.local_rank == 1));
  }
  SECTION("pbsdsh (PBS)") {
    auto env = workbook::read_launch_env(fake({{"PBS_VNODENUM", "1"}, {"PBS_NP", "2"}, {"PBS_JOBID", "9"}}));
    REQUIRE((env.rank == 1 && env.world_size == 2 && env.local_rank == 0));
  }
  SECTION("mpirun inside a SLURM job: mpirun started this process") {
    auto env = workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                                {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}));
    REQUIRE((env.rank == 1 && env.world_size == 2));
    REQUIRE_THAT(env.launcher, ContainsSubstring("mpirun"));
  }
}

TEST_CASE("an incomplete or inconsistent launch environment is one clear error", "[launch]") {
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "0"}})),
                      ContainsSubstring("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"));
  // An salloc shell has SLURM_NTASKS but no SLURM_PROCID: a plain process there is a single process.
  REQUIRE(workbook::read_launch_env(fake({{"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "5"}})).world_size == 1);
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"SLURM_PROCID", "0"}})),
                      ContainsSubstring("SLURM_PROCID is set but SLURM_STEP_NUM_TASKS (or SLURM_NTASKS) is not"));
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}})),
                      ContainsSubstring("PMI_RANK=2 is not a rank of a 2-process job"));
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "one"}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
                      ContainsSubstring("OMPI_COMM_WORLD_RANK=one is not a process number"));
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}})),
                      ContainsSubstring("not a rank of a 0-process job"));
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}})),
                      ContainsSubstring("local size 5 is larger than the job's 4 processes"));
  REQUIRE_THROWS_WITH(workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})),
                      ContainsSubstring("local rank 2 is not below the local size 2"));
  // Open MPI 5, 3 ranks oversubscribed on 2 cores: local ranks 0, 2, 1. Consistent.
  REQUIRE(workbook::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}))
              .local_rank == 2);
  REQUIRE_THROWS_AS(workbook::read_launch_env(fake({{"JSM_NAMESPACE_SIZE", "4"}})), workbook::UserError);
}
