/* bench-shardgroup: what ShardGroupSetUp costs, and what its two choices save,
   measured in one run: the node split cached on the user's communicator, and
   MPI_Comm_create_group instead of MPI_Comm_split for the shard and replicate
   communicators.  Times are the slowest rank's.
   make benchmarks && mpiexec -n 8 ./benchmarks/bench-shardgroup [-fsdp_bench_reps N] [ShardGroup options] */
#include "fsdp.h"

/* Seconds for `reps` rounds of `what` on comm, the slowest rank's, per round. */
#define TIME_ROUNDS(comm, reps, result, ...)                                                                           \
  do {                                                                                                                 \
    double t0_, t_;                                                                                                    \
    MPI_Barrier(comm);                                                                                                 \
    t0_ = MPI_Wtime();                                                                                                 \
    for (int64_t i_ = 0; i_ < (reps); i_++) {                                                                          \
      __VA_ARGS__;                                                                                                     \
    }                                                                                                                  \
    t_ = (MPI_Wtime() - t0_) / (double)(reps);                                                                         \
    MPI_Allreduce(&t_, &(result), 1, MPI_DOUBLE, MPI_MAX, comm);                                                       \
  } while (0)

static FSDPErrorCode one_group(MPI_Comm comm)
{
  ShardGroup g;
  FSDPCall(ShardGroupCreate(comm, &g));
  FSDPCall(ShardGroupSetFromOptions(g));
  FSDPCall(ShardGroupSetUp(g));
  FSDPCall(ShardGroupDestroy(&g));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  MPI_Comm comm, node, shard, replicate;
  MPI_Group all, members;
  int rank, size, F = 2, ranges[1][3];
  int64_t reps;
  double first, cached, split_type, split, create_group;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_reps", "rounds to time", 10, 1, 1000000, &reps, NULL));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size % 2) F = 1;

  /* A fresh communicator: the first group splits it by node, the others reuse the split. */
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  TIME_ROUNDS(comm, 1, first, FSDPCallAbort(comm, one_group(comm)));
  TIME_ROUNDS(comm, reps, cached, FSDPCallAbort(comm, one_group(comm)));

  /* The MPI calls behind the choices. */
  TIME_ROUNDS(comm, reps, split_type, MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
              MPI_Comm_free(&node));
  TIME_ROUNDS(comm, reps, split, MPI_Comm_split(comm, rank / F, rank, &shard);
              MPI_Comm_split(comm, rank % F, rank, &replicate); MPI_Comm_free(&shard); MPI_Comm_free(&replicate));
  MPI_Comm_group(comm, &all);
  TIME_ROUNDS(comm, reps, create_group, {
    ranges[0][0] = rank / F * F, ranges[0][1] = rank / F * F + F - 1, ranges[0][2] = 1;
    MPI_Group_range_incl(all, 1, ranges, &members);
    MPI_Comm_create_group(comm, members, 1, &shard);
    MPI_Group_free(&members);
    ranges[0][0] = rank % F, ranges[0][1] = size - F + rank % F, ranges[0][2] = F;
    MPI_Group_range_incl(all, 1, ranges, &members);
    MPI_Comm_create_group(comm, members, 2, &replicate);
    MPI_Group_free(&members);
    MPI_Comm_free(&shard);
    MPI_Comm_free(&replicate);
  });
  MPI_Group_free(&all);
  MPI_Comm_free(&comm);

  if (rank == 0) {
    printf("bench-shardgroup: %d ranks, %lld rounds, slowest rank, ms per round\n", size, (long long)reps);
    printf("  Create+SetUp+Destroy, first on a communicator: %8.2f\n", first * 1e3);
    printf("  Create+SetUp+Destroy, node split cached:        %8.2f  (first/cached %.1f)\n", cached * 1e3,
           first / cached);
    printf("  MPI_Comm_split_type(SHARED), saved by caching:  %8.2f\n", split_type * 1e3);
    printf("  2 x MPI_Comm_split (F = %d):                     %8.2f\n", F, split * 1e3);
    printf("  2 x MPI_Comm_create_group (F = %d):              %8.2f  (split/create_group %.1f)\n", F,
           create_group * 1e3, split / create_group);
  }
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
