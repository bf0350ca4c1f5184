/* ShardGroup layouts, exhaustively for the world size this runs on: real and
   emulated nodes of 1..4 ranks, block and cyclic placement, every sharding
   factor that divides W, and the node and world shard domains.  Each rank
   checks its groups by communicating over them against a layout computed
   here from the rules in doc/shardgroup.md.
   mpitest: -n 1
   mpitest: -n 2
   mpitest: -n 3
   mpitest: -n 4
   mpitest: -n 6
   mpitest: -n 8 */
#include "fsdp_config.h" /* FSDP_HAVE_HWLOC */
#include "testutil.h"

#define MAXW 64

typedef struct {
  int node[MAXW], local_rank[MAXW], local_size[MAXW], nnodes;
  int group[MAXW], index[MAXW], factor;
} Layout;

/* Nodes: real (k = 0: this machine, whose node we learn from MPI) or
   emulated, k ranks per node, consecutive (block) or dealt out (cyclic). */
static void expected_nodes(int W, int k, bool cyclic, const int *real_leader, Layout *L)
{
  L->nnodes = 0;
  for (int r = 0; r < W; r++) {
    if (!k) {
      int leader = real_leader[r];
      L->node[r] = leader == r ? L->nnodes++ : L->node[leader];
    } else {
      int n = (W + k - 1) / k;
      L->node[r] = cyclic ? r % n : r / k;
      if (L->node[r] + 1 > L->nnodes) L->nnodes = L->node[r] + 1;
    }
  }
  for (int r = 0; r < W; r++) {
    L->local_rank[r] = L->local_size[r] = 0;
    for (int q = 0; q < W; q++)
      if (L->node[q] == L->node[r]) {
        L->local_size[r]++;
        if (q < r) L->local_rank[r]++;
      }
  }
}

/* Shard groups: ranks listed node by node, cut into runs of F. */
static void expected_groups(int W, int F, Layout *L)
{
  int pos = 0;
  L->factor = F;
  for (int n = 0; n < L->nnodes; n++)
    for (int r = 0; r < W; r++)
      if (L->node[r] == n) {
        L->group[r] = pos / F;
        L->index[r] = pos % F;
        pos++;
      }
}

static bool nodes_equal(int W, const Layout *L)
{
  for (int r = 0; r < W; r++)
    if (L->local_size[r] != L->local_size[0]) return false;
  return true;
}

/* The members of comm, in its rank order, must be `expect` (world ranks):
   each rank sends its world rank over comm, so the data must flow too. */
static void check_members(MPI_Comm comm, const int *expect, int n, int *members, const char *what, const char *config)
{
  int size, me = test_rank();
  MPI_Comm_size(comm, &size);
  TEST_ASSERT(size == n, "%s: %s communicator has %d ranks, expected %d", config, what, size, n);
  MPI_Allgather(&me, 1, MPI_INT, members, 1, MPI_INT, comm);
  for (int i = 0; i < n; i++)
    TEST_ASSERT(members[i] == expect[i], "%s: %s communicator member %d is world rank %d, expected %d", config, what, i,
                members[i], expect[i]);
}

static int checked;

static void check_layout(int W, int rank, const Layout *L, ShardGroup g, const char *config)
{
  MPI_Comm shard, replicate;
  int index, factor, rindex, rsize, node, nnodes, lr, ls, expect[MAXW], members[MAXW], n;

  TEST_OK(ShardGroupGetShardComm(g, &shard, &index, &factor));
  TEST_OK(ShardGroupGetReplicateComm(g, &replicate, &rindex, &rsize));
  TEST_OK(ShardGroupGetNode(g, &node, &nnodes));
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  TEST_ASSERT(factor == L->factor && rsize == W / L->factor, "%s: F = %d, replicas %d; expected %d, %d", config, factor,
              rsize, L->factor, W / L->factor);
  TEST_ASSERT(index == L->index[rank] && rindex == L->group[rank], "%s: shard index %d, group %d; expected %d, %d",
              config, index, rindex, L->index[rank], L->group[rank]);
  TEST_ASSERT(node == L->node[rank] && nnodes == L->nnodes && lr == L->local_rank[rank] && ls == L->local_size[rank],
              "%s: node %d of %d, local %d of %d; expected node %d of %d, local %d of %d", config, node, nnodes, lr, ls,
              L->node[rank], L->nnodes, L->local_rank[rank], L->local_size[rank]);
  /* The shard group: the ranks of my group, by shard index. */
  n = 0;
  for (int i = 0; i < L->factor; i++)
    for (int r = 0; r < W; r++)
      if (L->group[r] == L->group[rank] && L->index[r] == i) expect[n++] = r;
  check_members(shard, expect, n, members, "shard", config);
  /* The spec's promise, checked on the members the library gave: a factor
     that divides the ranks of equal nodes keeps every group on one node. */
  if (nodes_equal(W, L) && L->local_size[0] % L->factor == 0)
    for (int i = 0; i < n; i++)
      TEST_ASSERT(L->node[members[i]] == L->node[rank], "%s: shard group member %d is on node %d, rank %d on node %d",
                  config, members[i], L->node[members[i]], rank, L->node[rank]);
  /* The replicate group: ranks holding my shard index, by shard group. */
  n = 0;
  for (int s = 0; s < W / L->factor; s++)
    for (int r = 0; r < W; r++)
      if (L->index[r] == L->index[rank] && L->group[r] == s) expect[n++] = r;
  check_members(replicate, expect, n, members, "replicate", config);
  checked++;
}

int main(int argc, char **argv)
{
  int rank, W, leader, real_leader[MAXW], divisors = 0;
  MPI_Comm node_comm;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  TEST_ASSERT(W <= MAXW, "at most %d ranks", MAXW);
  /* The real nodes, as MPI sees them, for the k = 0 case. */
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm);
  MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node_comm);
  MPI_Allgather(&leader, 1, MPI_INT, real_leader, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Comm_free(&node_comm);

  for (int k = 0; k <= 4 && k <= W; k++)
    for (int cyclic = 0; cyclic <= (k ? 1 : 0); cyclic++)
      for (int F = -2; F <= W; F++) { /* -2: domain world, -1: domain node, else F */
        Layout L;
        ShardGroup g;
        char config[160], value[16];
        if (F == 0 || (F > 0 && W % F)) continue;
        snprintf(config, sizeof config, "W=%d, nodes: %s%d, %s%d", W, k ? (cyclic ? "cyclic " : "block ") : "real ", k,
                 F > 0 ? "F=" : "domain ", F);
        expected_nodes(W, k, cyclic, real_leader, &L);
        TEST_OK(ShardGroupCreate(MPI_COMM_WORLD, &g));
        snprintf(value, sizeof value, "%d", k);
        TEST_OK(FSDPOptionsSetValue("-fsdp_ranks_per_node", value));
        TEST_OK(FSDPOptionsSetValue("-fsdp_rank_placement", cyclic ? "cyclic" : "block"));
        /* Emulated nodes on a small synthetic machine: discovering this one
           (PCI included) for every layout would dominate the run time. */
#if FSDP_HAVE_HWLOC
        TEST_OK(FSDPOptionsSetValue("-fsdp_topology", k ? "pack:2 core:2 pu:1" : ""));
#endif
        TEST_OK(ShardGroupSetFromOptions(g));
        if (F > 0) TEST_OK(ShardGroupSetShardingFactor(g, F));
        else TEST_OK(ShardGroupSetShardDomain(g, F == -2 ? FSDP_SHARD_DOMAIN_WORLD : FSDP_SHARD_DOMAIN_NODE));
        if (F == -1 && !nodes_equal(W, &L)) {
          /* The node domain needs equal nodes: an error, the same on every rank. */
          TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
          TEST_CODE(FSDP_ERR_ARG, ShardGroupSetUp(g));
          TEST_MESSAGE_HAS("shard domain node needs the same number of ranks on every node");
          TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
        } else {
          TEST_OK(ShardGroupSetUp(g));
          expected_groups(W, F > 0 ? F : F == -2 ? W : L.local_size[0], &L);
          check_layout(W, rank, &L, g, config);
        }
        TEST_OK(ShardGroupDestroy(&g));
        TEST_ASSERT(g == NULL, "ShardGroupDestroy sets the handle to NULL");
        if (F > 0 && k == 0) divisors++;
      }
  TEST_OK(FSDPOptionsClearValue("-fsdp_ranks_per_node"));
  TEST_OK(FSDPOptionsClearValue("-fsdp_rank_placement"));
  TEST_OK(FSDPOptionsClearValue("-fsdp_topology"));
  if (rank == 0) printf("%d layouts checked on %d ranks (%d sharding factors)\n", checked, W, divisors);
  TEST_OK(FSDPFinalize());
  return 0;
}
