#!/bin/sh
# outside_a_job.sh COMMAND... — runs COMMAND with no scheduler's job variables,
# so that a test means the same inside a SLURM allocation (ctest run on a
# compute node) as on a workstation; the test sets the ones it wants itself.
for name in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\|LSB_[A-Za-z0-9_]*\|LS_SUBCWD\|PBS_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset "$name"
done
exec "$@"
