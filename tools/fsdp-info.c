/* fsdp-info: what libfsdp was built with, each node's topology, and the
   process layout (shard and replicate groups, devices, binding) that the
   given options produce.
   mpiexec -n 8 fsdp-info -fsdp_ranks_per_node 4 -fsdp_sharding_factor 4 */
#include "fsdp.h"

int main(int argc, char **argv)
{
  ShardGroup group;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPConfigView(NULL));
  FSDPCallAbort(MPI_COMM_WORLD, ShardGroupCreate(MPI_COMM_WORLD, &group));
  /* The layout is what this tool is for: shown whether or not -fsdp_view was given. */
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsSetValue("-fsdp_view", "true"));
  FSDPCallAbort(MPI_COMM_WORLD, ShardGroupSetFromOptions(group));
  FSDPCallAbort(MPI_COMM_WORLD, ShardGroupSetUp(group));
  FSDPCallAbort(MPI_COMM_WORLD, ShardGroupDestroy(&group));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
