/* bench-collective-bytes: ITERS collectives of one kind, as the library's
   MPI stream issues them (src/comm/stream.c: nonblocking as the nonblocking
   engine's, or blocking as the thread and sync engines'), after one that
   sets up the connections; nothing else.  benchmarks/cluster-collectives runs it
   on the namespace cluster and reads what a node's link carried, to see
   which algorithm the MPI chose (doc/fsdp-plan.md, "Bytes and time").
   Plain MPI: the library is not linked.
     mpiexec -n W benchmarks/bench-collective-bytes allgather|reduce_scatter|allreduce BYTES ITERS [blocking]
   BYTES: the unit of an all-gather or reduce-scatter (W shards of floats),
   or the vector an all-reduce sums. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
  static const char *const kinds[3] = {"allgather", "reduce_scatter", "allreduce"};
  int size, rank, iters, kind;
  bool blocking;
  long long bytes, count;
  float *send, *recv;
  MPI_Comm comm;

  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blocking = argc == 5 && !strcmp(argv[4], "blocking");
  if (blocking) argc--;
  kind = -1;
  for (int k = 0; k < 3 && argc == 4; k++)
    if (!strcmp(argv[1], kinds[k])) kind = k;
  bytes = argc == 4 ? atoll(argv[2]) : 0;
  iters = argc == 4 ? atoi(argv[3]) : -1;
  count = kind == 2 ? bytes / 4 : bytes / 4 / size; /* floats a call passes as its count */
  if (kind < 0 || count < 1 || count > 1 << 30 || iters < 0) {
    if (rank == 0)
      fprintf(stderr, "usage: bench-collective-bytes allgather|reduce_scatter|allreduce BYTES ITERS [blocking] "
                      "(BYTES at least 4 x ranks, 4 for allreduce; ITERS at least 0)\n");
    MPI_Finalize();
    return 2;
  }
  send = calloc((size_t)count * (size_t)size, sizeof *send);
  recv = calloc((size_t)count * (size_t)size, sizeof *recv);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm); /* as a context's shard and replicate groups are */
  for (int i = -1; i < iters; i++) {
    MPI_Request req = MPI_REQUEST_NULL;
    if (blocking && kind == 0) MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, comm);
    else if (blocking && kind == 1) MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, comm);
    else if (blocking) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, comm);
    else if (kind == 0) MPI_Iallgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, comm, &req);
    else if (kind == 1) MPI_Ireduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, comm, &req);
    else MPI_Iallreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(comm);
  if (rank == 0)
    printf("bench-collective-bytes: %s%s of %lld bytes, %d times: done\n", blocking ? "blocking " : "", argv[1], bytes,
           iters + 1);
  MPI_Comm_free(&comm);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
