#!/bin/sh
# kill_rank_after.sh RANK WHEN COMMAND... — run under mpiexec: on rank RANK,
# COMMAND is killed (SIGKILL, no chance to say goodbye) when WHEN comes; on
# the other ranks it runs normally. How the tests make a peer die mid-run.
#   WHEN = SECONDS       after that many seconds
#   WHEN = epoch:FILE    once FILE (the run's --json, which rank 0 writes)
#                        holds an epoch line: the rank dies in the middle of
#                        training however fast or busy the machine is
rank=$1
when=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}" = "$rank" ]; then
  case $when in
    epoch:*)
      file=${when#epoch:}
      # Removed before COMMAND starts: rank 0 cannot open it before every
      # rank has started (it opens it once the ranks are connected).
      rm -f "$file"
      (
        for _ in $(seq 1200); do
          grep -q '"type":"epoch"' "$file" 2>/dev/null && break
          sleep 0.1
        done
        kill -9 $$
      ) &
      ;;
    *) (sleep "$when"; kill -9 $$) & ;;
  esac
fi
exec "$@"
