/* ShardGroup errors: each bad layout, topology or call is an error on every
   rank, with a message that names the values; nothing hangs, and a group
   that failed to set up can be fixed and set up again.
   mpitest: -n 4 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>

#include "fsdp_config.h" /* FSDP_HAVE_HWLOC */
#include "testutil.h"

static const char *const used_options[] = {
    "-fsdp_topology",        "-fsdp_ranks_per_node", "-fsdp_bind", "-fsdp_shard_domain",
    "-fsdp_sharding_factor", "-fsdp_rank_placement", "-fsdp_view", NULL};

/* SetUp with these options must fail with `code` on every rank, saying `text`. */
static void expect_setup_error(const char *options, FSDPErrorCode code, const char *text)
{
  ShardGroup g;
  for (int i = 0; used_options[i]; i++) TEST_OK(FSDPOptionsClearValue(used_options[i]));
  TEST_OK(FSDPOptionsInsertString(options));
  TEST_OK(ShardGroupCreate(MPI_COMM_WORLD, &g));
  TEST_OK(ShardGroupSetFromOptions(g));
  TEST_CODE(code, ShardGroupSetUp(g));
  TEST_MESSAGE_HAS(text);
  TEST_OK(ShardGroupDestroy(&g));
}

int main(int argc, char **argv)
{
  ShardGroup g;
  MPI_Comm comm;
  FSDPViewer self;
  char options[512];
  int rank, W, value;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  TEST_ASSERT(W == 4, "the messages below are for 4 ranks");
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));

  /* Sharding factors the world cannot hold. */
  expect_setup_error("-fsdp_sharding_factor 3", FSDP_ERR_ARG, "sharding factor 3 does not divide world size 4");
  expect_setup_error("-fsdp_sharding_factor 8", FSDP_ERR_ARG, "sharding factor 8 is larger than the world size 4");
  /* Nodes of different sizes, when the domain needs equal ones. */
  expect_setup_error("-fsdp_ranks_per_node 3", FSDP_ERR_ARG,
                     "shard domain node needs the same number of ranks on every node, but node 0 has 3 and node 1 "
                     "has 1 (set -fsdp_sharding_factor");
  /* A node larger than the world. */
  expect_setup_error("-fsdp_ranks_per_node 8", FSDP_ERR_ARG, "-fsdp_ranks_per_node 8 is larger than the world size 4");
  /* Ranks that disagree: an error on all of them, before anything collective
     depends on the settings (a view only some ranks print would hang). */
  snprintf(options, sizeof options, "-fsdp_sharding_factor %d", rank == 0 ? 2 : 4);
  expect_setup_error(options, FSDP_ERR_ARG,
                     "ranks disagree on the ShardGroup's -fsdp_sharding_factor: rank 0 has 2, rank 1 has 4");
  expect_setup_error(rank == 0 ? "-fsdp_view" : "", FSDP_ERR_ARG,
                     "ranks disagree on the ShardGroup's -fsdp_view: rank 0 has true, rank 1 has false");
#if FSDP_HAVE_HWLOC
  expect_setup_error(rank == 3 ? "-fsdp_topology 'pack:2 core:2 pu:1'" : "", FSDP_ERR_ARG,
                     "ranks disagree on the ShardGroup's -fsdp_topology: rank 0 and rank 3 give different values");
  {
    /* Nothing is bound before the ranks agree. */
    cpu_set_t before, after;
    TEST_ASSERT(sched_getaffinity(0, sizeof before, &before) == 0, "sched_getaffinity failed");
    expect_setup_error(rank == 0 ? "-fsdp_bind core" : "", FSDP_ERR_ARG,
                       "ranks disagree on the ShardGroup's -fsdp_bind: rank 0 has core, rank 1 has none");
    TEST_ASSERT(sched_getaffinity(0, sizeof after, &after) == 0, "sched_getaffinity failed");
    TEST_ASSERT(CPU_EQUAL(&before, &after), "a SetUp that failed changed the CPU binding");
  }
#endif

#if FSDP_HAVE_HWLOC
  /* Topology files that are missing, and descriptions that are neither. */
  expect_setup_error("-fsdp_topology /nonexistent/node.xml", FSDP_ERR_ARG,
                     "-fsdp_topology '/nonexistent/node.xml': no such file (No such file or directory), and not an "
                     "hwloc synthetic description");
  expect_setup_error("-fsdp_topology 'pack:two core:2'", FSDP_ERR_ARG,
                     "-fsdp_topology 'pack:two core:2': no such file");
  /* Malformed XML files: tests/test_topology_xml.c, under each of hwloc's parsers. */
  /* Package and NUMA domains need ranks placed on one package or NUMA node. */
  expect_setup_error("-fsdp_topology 'pack:2 core:2 pu:1' -fsdp_shard_domain package", FSDP_ERR_ARG,
                     "shard domain package needs every rank bound within one package, but rank 0 is unbound");
  expect_setup_error("-fsdp_topology 'pack:2 numa:2 core:1 pu:1' -fsdp_shard_domain numa -fsdp_bind package",
                     FSDP_ERR_ARG, "but rank 0 is bound to CPUs of more than one NUMA node");
  /* 4 ranks bound over 3 packages: groups of 2, 1 and 1. */
  expect_setup_error("-fsdp_topology 'pack:3 core:1 pu:1' -fsdp_shard_domain package -fsdp_bind package", FSDP_ERR_ARG,
                     "shard domain package gives shard groups of different sizes: 2 ranks on node 0 package 0, 1 on "
                     "node 0 package 1");
#else
  expect_setup_error("-fsdp_topology 'pack:2 core:2 pu:1'", FSDP_ERR_UNSUPPORTED, "needs hwloc");
  expect_setup_error("-fsdp_bind core", FSDP_ERR_UNSUPPORTED, "needs hwloc");
#endif

  /* An option value outside its choices. */
  for (int i = 0; used_options[i]; i++) TEST_OK(FSDPOptionsClearValue(used_options[i]));
  TEST_OK(ShardGroupCreate(MPI_COMM_WORLD, &g));
  TEST_OK(FSDPOptionsSetValue("-fsdp_shard_domain", "socket"));
  TEST_CODE(FSDP_ERR_OPTION, ShardGroupSetFromOptions(g));
  TEST_MESSAGE_HAS("'socket' (from the program) is not one of node package numa world");
  TEST_OK(FSDPOptionsClearValue("-fsdp_shard_domain"));

  /* Calls out of order, and arguments out of range. */
  TEST_CODE(FSDP_ERR_STATE, ShardGroupGetShardComm(g, &comm, NULL, NULL));
  TEST_MESSAGE_HAS("ShardGroupGetShardComm before ShardGroupSetUp");
  TEST_CODE(FSDP_ERR_ARG, ShardGroupSetShardingFactor(g, -2));
  TEST_MESSAGE_HAS("sharding factor -2 must be positive");
  TEST_CODE(FSDP_ERR_ARG, ShardGroupSetShardDomain(g, (FSDPShardDomain)7));
  TEST_MESSAGE_HAS("shard domain 7 is not one of");
  TEST_CODE(FSDP_ERR_ARG, ShardGroupSetBind(g, (FSDPBind)-1));
  TEST_MESSAGE_HAS("binding -1 is not one of");

  /* A failed SetUp leaves the group usable: fix it and set it up. */
  TEST_OK(ShardGroupSetShardingFactor(g, 3));
  TEST_CODE(FSDP_ERR_ARG, ShardGroupSetUp(g));
  TEST_OK(ShardGroupSetShardingFactor(g, 2));
  TEST_OK(ShardGroupSetUp(g));
  TEST_OK(ShardGroupGetShardComm(g, &comm, NULL, &value));
  TEST_ASSERT(value == 2, "F = %d after fixing the factor, expected 2", value);
  TEST_CODE(FSDP_ERR_STATE, ShardGroupSetShardingFactor(g, 4));
  TEST_MESSAGE_HAS("ShardGroupSetShardingFactor after ShardGroupSetUp");
  /* A view needs the group's ranks. */
  TEST_OK(FSDPViewerASCIIOpen(MPI_COMM_SELF, "stdout", &self));
  TEST_CODE(FSDP_ERR_ARG, ShardGroupView(g, self));
  TEST_MESSAGE_HAS("ShardGroupView needs a viewer on the group's communicator");
  TEST_OK(FSDPViewerDestroy(&self));
  TEST_OK(ShardGroupDestroy(&g));
  TEST_OK(ShardGroupDestroy(&g)); /* NULL: nothing to do */

  /* A group on part of the world: a NULL viewer is stdout on the group's ranks. */
  {
    MPI_Comm half;
    Capture cap;
    char *out;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &half);
    for (int i = 0; used_options[i]; i++) TEST_OK(FSDPOptionsClearValue(used_options[i]));
    TEST_OK(ShardGroupCreate(half, &g));
    TEST_OK(ShardGroupSetUp(g));
    capture_begin(&cap, 1);
    TEST_OK(ShardGroupView(g, NULL));
    out = capture_end(&cap);
    if (rank % 2 == 0)
      TEST_ASSERT(strstr(out, "ShardGroup: 2 ranks on 1 node\n") == out, "view on half printed:\n%s", out);
    else TEST_ASSERT(out[0] == '\0', "rank %d printed:\n%s", rank, out);
    free(out);
    TEST_OK(ShardGroupDestroy(&g));
    MPI_Comm_free(&half);
  }

  TEST_CODE(FSDP_ERR_ARG, ShardGroupCreate(MPI_COMM_NULL, &g));
  TEST_MESSAGE_HAS("comm must not be MPI_COMM_NULL");
  TEST_CODE(FSDP_ERR_ARG, ShardGroupCreate(MPI_COMM_WORLD, NULL));

  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPFinalize());
  return 0;
}
