/* reduce_scatter_calls.c: the MPI calls a ZeRO step could make, timed alone on
 * Chapter 11's gradient (3,257,856 float32, 13 MB), one JSON line each
 * (rank 0), the median and best of 7 runs, each after a barrier.
 *
 *   mpicc -O2 -o /tmp/reduce_scatter_calls reduce_scatter_calls.c
 *   workbook cluster up --nodes 2 --link 1gbit
 *   hpc/cluster.sh mpirun --nodes 2 --ranks-per-node R /tmp/reduce_scatter_calls
 *
 * Kept beside its output, reduce_scatter_calls_*.jsonl, which Note [MPI_Reduce_scatter,
 * not _block] in common/src/communicator_mpi.cpp quotes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kRuns = 7, kCalls = 4 };

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int n = 3257856 - 3257856 % ranks, chunk = n / ranks;
  float* whole = malloc(sizeof(float) * n);
  float* gathered = malloc(sizeof(float) * n);
  float* mine = malloc(sizeof(float) * chunk);
  int* counts = malloc(sizeof(int) * ranks);
  for (int r = 0; r < ranks; ++r) counts[r] = chunk;
  const char* names[kCalls] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather"};
  for (int call = 0; call < kCalls; ++call) {
    double seconds[kRuns];
    for (int run = 0; run < kRuns; ++run) {
      for (int i = 0; i < n; ++i) whole[i] = 1.0f;
      for (int i = 0; i < chunk; ++i) mine[i] = 1.0f;
      MPI_Barrier(MPI_COMM_WORLD);
      const double started = MPI_Wtime();
      if (call == 0) MPI_Allreduce(MPI_IN_PLACE, whole, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (call == 1) MPI_Reduce_scatter_block(whole, mine, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (call == 2) MPI_Reduce_scatter(whole, mine, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (call == 3) MPI_Allgather(mine, chunk, MPI_FLOAT, gathered, chunk, MPI_FLOAT, MPI_COMM_WORLD);
      seconds[run] = MPI_Wtime() - started;
    }
    qsort(seconds, kRuns, sizeof(double), by_value);
    if (rank == 0)
      printf("{\"call\": \"%s\", \"ranks\": %d, \"bytes\": %d, \"runs\": %d, \"median_s\": %.4f, \"best_s\": %.4f}\n",
             names[call], ranks, (int)(sizeof(float) * n), kRuns, seconds[kRuns / 2], seconds[0]);
  }
  free(whole), free(gathered), free(mine), free(counts);
  MPI_Finalize();
  return 0;
}
