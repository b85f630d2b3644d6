#!/bin/sh
# kill_rank_after.sh RANK SECONDS COMMAND... — run under mpiexec: on rank RANK,
# COMMAND is killed (SIGKILL, no chance to say goodbye) after SECONDS; on the
# other ranks it runs normally. How the tests make a peer die mid-training.
rank=$1
seconds=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}" = "$rank" ]; then
  (sleep "$seconds"; kill -9 $$) &
fi
exec "$@"
