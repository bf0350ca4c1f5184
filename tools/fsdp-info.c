/* fsdp-info: what libfsdp was built with, each node's topology, and the
   process layout (shard and replicate groups, devices, binding) that the
   given options produce.
   mpiexec -n 8 fsdp-info -fsdp_ranks_per_node 4 -fsdp_sharding_factor 4 */
#include <stdlib.h>
#include <string.h>

#include "fsdp.h"

/* A word that starts an option, not a negative number. */
static bool is_key(const char *s)
{
  char *end;
  if (s[0] != '-') return false;
  (void)strtod(s, &end);
  return *end != '\0';
}

/* fsdp-info has no options of its own: any other word is a mistake that
   would otherwise show a layout the user did not ask for. */
static FSDPErrorCode check_args(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    FSDPCheck(
        !strncmp(argv[i], "-fsdp_", 6) || !strcmp(argv[i], "-help"), MPI_COMM_WORLD, FSDP_ERR_OPTION,
        "fsdp-info: unknown argument '%s': fsdp-info takes libfsdp's -fsdp_* options only (fsdp-info -help lists them)",
        argv[i]);
    if (i + 1 < argc && !is_key(argv[i + 1])) i++; /* its value */
  }
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  ShardGroup group;
  bool view;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  FSDPCallAbort(MPI_COMM_WORLD, check_args(argc, argv));
  /* A malformed -fsdp_view is refused before the line below replaces it. */
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetBool("-fsdp_view", "print the process layout at SetUp", true, &view, NULL));
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
