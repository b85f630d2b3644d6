/* exchange_progress.c — does a 1 MiB exchange started with MPI_Isend and
 * MPI_Irecv (what Communicator::start_exchange calls) move while the rank
 * computes, outside MPI? Two ranks exchange 1 MiB (ring attention's block of
 * keys and values at cp=2, context 1024, width 256) and time the MPI_Waitall:
 * right after starting it, and after computing 50 ms outside MPI. If the
 * data moved during the computation, the second wait is near 0; if it moves
 * only inside MPI calls, the second wait is as long as the first.
 *
 *   mpicc -O2 -o exchange_progress exchange_progress.c
 *   hpc/cluster.sh up --link 1gbit && hpc/cluster.sh mpirun ./exchange_progress
 * One JSON line per rank and case. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double spin(double seconds) { /* compute outside MPI for `seconds` */
  double x = 0.0, start = MPI_Wtime();
  while (MPI_Wtime() - start < seconds) for (int i = 0; i < 1000; ++i) x += 1e-9 * i;
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int count = 1 << 18; /* floats: 1 MiB */
  float* out = calloc(count, sizeof(float));
  float* in = calloc(count, sizeof(float));
  const int peer = (rank + 1) % size;
  double sink = 0.0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    for (int computed = 0; computed <= 1; ++computed) {
      MPI_Request requests[2];
      MPI_Barrier(MPI_COMM_WORLD);
      const double started = MPI_Wtime();
      MPI_Irecv(in, count, MPI_FLOAT, peer, 1, MPI_COMM_WORLD, &requests[0]);
      MPI_Isend(out, count, MPI_FLOAT, peer, 1, MPI_COMM_WORLD, &requests[1]);
      if (computed) sink += spin(0.050);
      const double waited = MPI_Wtime();
      MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
      const double done = MPI_Wtime();
      printf("{\"rank\": %d, \"repeat\": %d, \"computed_ms\": %d, \"wait_ms\": %.2f, \"total_ms\": %.2f}\n", rank,
             repeat, computed ? 50 : 0, 1e3 * (done - waited), 1e3 * (done - started));
    }
  }
  free(out);
  free(in);
  MPI_Finalize();
  return sink < 0.0;
}
