/* ShardGroup: the process layout of FSDP.  Nodes come from
   MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (or are emulated), each node's
   hardware from hwloc; shard groups are cut from ranks ordered node by node,
   so they follow the machine, not rank numbers.  Every rank gathers the same
   facts about every rank and computes the same layout from them: whatever
   goes wrong is found, and reported, by all ranks at once. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topoimpl.h"

typedef enum { PLACEMENT_BLOCK = 0, PLACEMENT_CYCLIC } RankPlacement;
static const char *const placement_names[] = {"block", "cyclic", NULL};
/* Which ranks share a node: MPI's shared-memory domains, or Slurm's nodes
   (SLURM_NODEID), for launchers whose MPI sees one host where Slurm has several. */
typedef enum { NODE_SOURCE_MPI = 0, NODE_SOURCE_SLURM } NodeSource;
static const char *const node_source_names[] = {"mpi", "slurm", NULL};

/* What every rank knows about every rank after SetUp. */
typedef struct {
  int node, local_rank, local_size;
  int package, numa; /* where it runs on its node; -1 unknown */
  bool bound;        /* to fewer CPUs than its node has */
  int ngpus;         /* GPUs on its node */
  uint64_t close_gpus;
  int group, index; /* shard group, and its shard in it */
  int device, nsharing;
} RankInfo;

struct ShardGroup_s {
  MPI_Comm comm, shard_comm, replicate_comm;
  struct NodeComm_s *node; /* node->comm: the ranks of this rank's node (MPI's, or Slurm's) */
  int rank, size;
  /* settings */
  int factor_requested; /* 0: from the domain */
  bool factor_from_option;
  FSDPShardDomain domain;
  FSDPBind bind;
  bool bind_force;    /* bind even where Slurm already bound the task */
  int ranks_per_node; /* 0: real nodes */
  RankPlacement placement;
  NodeSource node_source;
  char topology[1024]; /* -fsdp_topology; empty: this machine */
  bool view_at_setup;
  /* the layout */
  bool setup;
  int factor, nnodes;
  FSDPTopology *topo;
  FSDPPlacement where;
  RankInfo *ranks; /* [size] */
  char host[MPI_MAX_PROCESSOR_NAME];
  int node_ranks, node_cpus; /* the ranks on this rank's machine, and the CPUs they may run on */
  int machine_hosts;         /* the hosts (MPI's shared-memory nodes) on that machine: 1 but in containers */
  size_t node_memory;        /* the node's physical memory, bytes */
  size_t cgroup_limit;       /* the memory limit of this rank's cgroup (0: none) */
  int cgroup_ranks;          /* the node's ranks under that limit */
  char cgroup[512];          /* the cgroup directory that sets it */
};

/* ------------------------------------------------------------------ node communicators */

/* Splitting a communicator by node costs several collectives (a quarter of a
   second on 8 busy ranks), and programs make several groups, and contexts, from
   one communicator: the split is cached on the user's communicator as an MPI
   attribute, as PETSc caches its inner communicators.  The attribute and each
   group holding it count as references. */
typedef struct NodeComm_s {
  MPI_Comm comm;
  int refs;
} NodeComm;

static int node_comm_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t node_comm_keyval_once = PTHREAD_ONCE_INIT;

static void release_node_comm(NodeComm *node)
{
  if (node && --node->refs == 0) {
    MPI_Comm_free(&node->comm);
    (void)FSDPFree(&node);
  }
}

static int delete_node_comm_attr(MPI_Comm comm, int keyval, void *value, void *extra)
{
  (void)comm;
  (void)keyval;
  (void)extra;
  release_node_comm(value);
  return MPI_SUCCESS;
}

static void create_node_comm_keyval(void)
{
  if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_node_comm_attr, &node_comm_keyval, NULL) != MPI_SUCCESS)
    node_comm_keyval = MPI_KEYVAL_INVALID;
}

/* The node communicator of `user` (split from `dup`, a duplicate of it), a reference for the caller. */
static FSDPErrorCode acquire_node_comm(MPI_Comm user, MPI_Comm dup, NodeComm **node)
{
  NodeComm *n;
  int found = 0, rank;

  pthread_once(&node_comm_keyval_once, create_node_comm_keyval);
  FSDPCheck(node_comm_keyval != MPI_KEYVAL_INVALID, MPI_COMM_SELF, FSDP_ERR_MPI, "MPI_Comm_create_keyval failed");
  FSDPCallMPI(MPI_Comm_get_attr(user, node_comm_keyval, &n, &found));
  if (found) {
    n->refs++;
    *node = n;
    return FSDP_SUCCESS;
  }
  FSDPCallMPI(MPI_Comm_rank(dup, &rank));
  FSDPCall(FSDPCalloc(1, sizeof *n, FSDP_MEM_OTHER, &n));
  FSDPCallMPI(MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &n->comm));
  FSDPCallMPI(MPI_Comm_set_errhandler(n->comm, MPI_ERRORS_RETURN));
  n->refs = 2;
  FSDPCallMPI(MPI_Comm_set_attr(user, node_comm_keyval, n));
  *node = n;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ lifecycle */

static FSDPErrorCode free_comm(MPI_Comm *comm)
{
  if (*comm != MPI_COMM_NULL) FSDPCallMPI(MPI_Comm_free(comm));
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupCreate(MPI_Comm comm, ShardGroup *group)
{
  ShardGroup g;
  FSDPErrorCode ierr;

  FSDPCheck(group, MPI_COMM_SELF, FSDP_ERR_ARG, "group must not be NULL");
  *group = NULL;
  FSDPCall(FSDPCheckCreateComm_Private(comm, __func__));
  FSDPCollective(comm);
  FSDPCall(FSDPCalloc(1, sizeof *g, FSDP_MEM_OTHER, &g));
  g->shard_comm = g->replicate_comm = MPI_COMM_NULL;
  FSDPCallMPI(MPI_Comm_dup(comm, &g->comm));
  FSDPCallMPI(MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN));
  if ((ierr = acquire_node_comm(comm, g->comm, &g->node))) {
    (void)free_comm(&g->comm);
    (void)FSDPFree(&g);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  FSDPCallMPI(MPI_Comm_rank(g->comm, &g->rank));
  FSDPCallMPI(MPI_Comm_size(g->comm, &g->size));
  g->domain = FSDP_SHARD_DOMAIN_NODE;
  *group = g;
  return FSDP_SUCCESS;
}

/* Back to the state before SetUp. */
static FSDPErrorCode reset_layout(ShardGroup g)
{
  FSDPCall(free_comm(&g->shard_comm));
  FSDPCall(free_comm(&g->replicate_comm));
  FSDPCall(FSDPTopologyDestroy_Private(&g->topo));
  FSDPCall(FSDPFree(&g->ranks));
  g->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupDestroy(ShardGroup *group)
{
  ShardGroup g;
  FSDPCheck(group, MPI_COMM_SELF, FSDP_ERR_ARG, "group must not be NULL");
  if (!(g = *group)) return FSDP_SUCCESS;
  FSDPCollectiveTeardown(g->comm);
  FSDPCall(reset_layout(g));
  release_node_comm(g->node);
  FSDPCall(free_comm(&g->comm));
  FSDPCall(FSDPFree(group));
  return FSDP_SUCCESS;
}

/* Settings can change until SetUp. */
#define CHECK_SETTABLE(g)                                                                                              \
  do {                                                                                                                 \
    FSDPCheck(g, MPI_COMM_SELF, FSDP_ERR_ARG, "group must not be NULL");                                               \
    FSDPCheck(!(g)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s after ShardGroupSetUp: the layout is already built",     \
              __func__);                                                                                               \
  } while (0)

FSDPErrorCode ShardGroupSetShardingFactor(ShardGroup group, int factor)
{
  CHECK_SETTABLE(group);
  FSDPCheck(factor >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "sharding factor %d must be positive, or 0 to derive it", factor);
  group->factor_requested = factor;
  group->factor_from_option = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupSetShardDomain(ShardGroup group, FSDPShardDomain domain)
{
  CHECK_SETTABLE(group);
  FSDPCheck(domain >= FSDP_SHARD_DOMAIN_NODE && domain <= FSDP_SHARD_DOMAIN_WORLD, MPI_COMM_SELF, FSDP_ERR_ARG,
            "shard domain %d is not one of FSDP_SHARD_DOMAIN_NODE, _PACKAGE, _NUMA, _WORLD", (int)domain);
  group->domain = domain;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupSetBind(ShardGroup group, FSDPBind bind)
{
  CHECK_SETTABLE(group);
  FSDPCheck(bind >= FSDP_BIND_NONE && bind <= FSDP_BIND_PACKAGE, MPI_COMM_SELF, FSDP_ERR_ARG,
            "binding %d is not one of FSDP_BIND_NONE, _CORE, _NUMA, _PACKAGE", (int)bind);
  group->bind = bind;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetRequestedFactor_Private(ShardGroup group, int *factor)
{
  FSDPCheck(group && factor, MPI_COMM_SELF, FSDP_ERR_ARG, "group and factor must not be NULL");
  *factor = group->factor_requested;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetNodeLoad_Private(ShardGroup group, int *ranks, int *cpus, int *hosts)
{
  FSDPCheck(group && group->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "the group is not set up");
  *ranks = group->node_ranks;
  *cpus = group->node_cpus;
  if (hosts) *hosts = group->machine_hosts;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetNodeMemory_Private(ShardGroup group, size_t *physical, size_t *cgroup_limit,
                                              int *cgroup_ranks, const char **cgroup)
{
  FSDPCheck(group && group->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "the group is not set up");
  *physical = group->node_memory;
  *cgroup_limit = group->cgroup_limit;
  *cgroup_ranks = group->cgroup_ranks;
  *cgroup = group->cgroup;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupSetViewAtSetUp_Private(ShardGroup group, bool view)
{
  CHECK_SETTABLE(group);
  group->view_at_setup = view;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupSetFromOptions(ShardGroup group)
{
  int64_t value;
  int choice;
  bool set;

  CHECK_SETTABLE(group);
  FSDPCall(FSDPOptionsGetInt("-fsdp_sharding_factor", "ranks per shard group (F); 0 derives it from -fsdp_shard_domain",
                             group->factor_requested, 0, INT32_MAX, &value, &set));
  if (set) {
    group->factor_requested = (int)value;
    group->factor_from_option = true;
  }
  FSDPCall(FSDPOptionsGetEnum("-fsdp_shard_domain", "what one shard group spans when F is not given",
                              FSDPShardDomainNames, (int)group->domain, &choice, NULL));
  group->domain = (FSDPShardDomain)choice;
  FSDPCall(FSDPOptionsGetEnum("-fsdp_bind", "bind each rank to its share of the node's CPUs", FSDPBindNames,
                              (int)group->bind, &choice, NULL));
  group->bind = (FSDPBind)choice;
  FSDPCall(FSDPOptionsGetBool("-fsdp_bind_force", "with -fsdp_bind: bind even a task that Slurm has already bound",
                              group->bind_force, &group->bind_force, NULL));
  FSDPCall(FSDPOptionsGetString("-fsdp_topology",
                                "hwloc XML file or synthetic description to use instead of this machine's topology",
                                group->topology, group->topology, sizeof group->topology, NULL));
  FSDPCall(FSDPOptionsGetInt("-fsdp_ranks_per_node", "emulate nodes of this many ranks (0: the real nodes)",
                             group->ranks_per_node, 0, INT32_MAX, &value, NULL));
  group->ranks_per_node = (int)value;
  FSDPCall(FSDPOptionsGetEnum("-fsdp_rank_placement",
                              "with -fsdp_ranks_per_node: consecutive ranks share a node (block), or ranks are dealt "
                              "out round-robin (cyclic)",
                              placement_names, (int)group->placement, &choice, NULL));
  group->placement = (RankPlacement)choice;
  FSDPCall(FSDPOptionsGetEnum("-fsdp_node_source",
                              "which ranks share a node: MPI's shared-memory domains (mpi) or Slurm's nodes, from "
                              "SLURM_NODEID (slurm)",
                              node_source_names, (int)group->node_source, &choice, NULL));
  group->node_source = (NodeSource)choice;
  FSDPCall(FSDPOptionsGetBool("-fsdp_view", "print the process layout at SetUp", group->view_at_setup,
                              &group->view_at_setup, NULL));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ SetUp */

/* What each rank tells every other at SetUp, in one allgather: its settings
   (which must agree), its node's leader, how its topology step went, and
   where it runs. */
enum {
  R_FACTOR,
  R_DOMAIN,
  R_BIND,
  R_RPN,
  R_PLACEMENT,
  R_VIEW,
  R_NODE_SOURCE,
  R_TOPOLOGY, /* settings */
  R_LEADER,
  R_STATUS,
  R_PACKAGE,
  R_NUMA,
  R_BOUND,
  R_NGPUS,
  R_CLOSE_LO,
  R_CLOSE_HI,
  R_N
};

/* FNV-1a, to compare -fsdp_topology strings across ranks in one integer. */
static int string_hash(const char *s)
{
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return (int)h;
}

/* A setting's value as its option spells it. */
static const char *setting_text(int s, int v, char *buf, size_t len)
{
  const char *const *names = s == R_DOMAIN        ? FSDPShardDomainNames
                             : s == R_BIND        ? FSDPBindNames
                             : s == R_PLACEMENT   ? placement_names
                             : s == R_NODE_SOURCE ? node_source_names
                                                  : NULL;
  if (s == R_VIEW) return v ? "true" : "false";
  if (names) return names[v];
  snprintf(buf, len, "%d", v);
  return buf;
}

static FSDPErrorCode check_settings(ShardGroup g, const int *all)
{
  static const char *const what[R_LEADER] = {"-fsdp_sharding_factor", "-fsdp_shard_domain",   "-fsdp_bind",
                                             "-fsdp_ranks_per_node",  "-fsdp_rank_placement", "-fsdp_view",
                                             "-fsdp_node_source",     "-fsdp_topology"};
  char a[16], b[16];
  for (int r = 1; r < g->size; r++)
    for (int s = 0; s < R_LEADER; s++) {
      if (all[r * R_N + s] == all[s]) continue;
      FSDPCheck(s != R_TOPOLOGY, g->comm, FSDP_ERR_ARG,
                "ranks disagree on the ShardGroup's -fsdp_topology: rank 0 and rank %d give different values (give "
                "every rank the same options)",
                r);
      FSDPCheck(0, g->comm, FSDP_ERR_ARG,
                "ranks disagree on the ShardGroup's %s: rank 0 has %s, rank %d has %s (give every rank the same "
                "options)",
                what[s], setting_text(s, all[s], a, sizeof a), r, setting_text(s, all[r * R_N + s], b, sizeof b));
    }
  FSDPCheck(g->ranks_per_node <= g->size, g->comm, FSDP_ERR_ARG,
            "-fsdp_ranks_per_node %d is larger than the world size %d: a node cannot hold more ranks than the job has",
            g->ranks_per_node, g->size);
  if (g->factor_requested) {
    FSDPCheck(g->factor_requested <= g->size, g->comm, FSDP_ERR_ARG,
              "sharding factor %d is larger than the world size %d", g->factor_requested, g->size);
    FSDPCheck(g->size % g->factor_requested == 0, g->comm, FSDP_ERR_ARG,
              "sharding factor %d does not divide world size %d", g->factor_requested, g->size);
  }
  return FSDP_SUCCESS;
}

/* Node of every rank: emulated (k ranks per node, block or cyclic), or the
   real nodes from each rank's leader (its node's lowest rank; leader[r] is
   read with stride R_N).  Local ranks count up in rank order on each node. */
static FSDPErrorCode assign_nodes(ShardGroup g, int k, RankPlacement placement, const int *leader)
{
  RankInfo *info = g->ranks;
  int W = g->size, nnodes = 0, *count;

  if (k) {
    nnodes = (W + k - 1) / k;
    for (int r = 0; r < W; r++) info[r].node = placement == PLACEMENT_BLOCK ? r / k : r % nnodes;
  } else {
    for (int r = 0; r < W; r++) {
      int l = leader[r * R_N];
      info[r].node = l == r ? nnodes++ : info[l].node; /* l < r: already numbered */
    }
  }
  g->nnodes = nnodes;
  FSDPCall(FSDPCalloc((size_t)nnodes, sizeof *count, FSDP_MEM_OTHER, &count));
  for (int r = 0; r < W; r++) info[r].local_rank = count[info[r].node]++;
  for (int r = 0; r < W; r++) info[r].local_size = count[info[r].node];
  FSDPCall(FSDPFree(&count));
  return FSDP_SUCCESS;
}

/* Ranks listed node by node, in local-rank order within each node: pos[r] is
   rank r's place in that list, first[n] (nnodes + 1 entries) where node n's
   ranks begin in it. */
static void node_major_order(ShardGroup g, int *pos, int *first)
{
  for (int n = 0; n <= g->nnodes; n++) first[n] = 0;
  for (int r = 0; r < g->size; r++) first[g->ranks[r].node + 1]++;
  for (int n = 0; n < g->nnodes; n++) first[n + 1] += first[n];
  for (int r = 0; r < g->size; r++) pos[r] = first[g->ranks[r].node] + g->ranks[r].local_rank;
}

static const char *domain_object(FSDPShardDomain d) { return d == FSDP_SHARD_DOMAIN_PACKAGE ? "package" : "NUMA node"; }

/* Shard group and index of every rank, and F. */
static FSDPErrorCode build_groups(ShardGroup g)
{
  RankInfo *info = g->ranks;
  int W = g->size, F, *scratch;

  FSDPCall(FSDPMalloc((2 * (size_t)W + 1) * sizeof *scratch, FSDP_MEM_OTHER, &scratch));
  if (g->factor_requested || g->domain == FSDP_SHARD_DOMAIN_WORLD || g->domain == FSDP_SHARD_DOMAIN_NODE) {
    F = g->factor_requested ? g->factor_requested : W;
    if (!g->factor_requested && g->domain == FSDP_SHARD_DOMAIN_NODE) {
      F = info[0].local_size;
      for (int r = 1; r < W; r++)
        if (info[r].local_size != F) {
          int n = info[r].node, size = info[r].local_size;
          FSDPCall(FSDPFree(&scratch));
          FSDPCheck(0, g->comm, FSDP_ERR_ARG,
                    "shard domain node needs the same number of ranks on every node, but node 0 has %d and node %d "
                    "has %d (set -fsdp_sharding_factor, or launch as many ranks on each node)",
                    F, n, size);
        }
    }
    node_major_order(g, scratch, scratch + W);
    for (int r = 0; r < W; r++) {
      info[r].group = scratch[r] / F;
      info[r].index = scratch[r] % F;
    }
  } else {
    /* One group per (node, package) or (node, NUMA node), numbered in that order. */
    int *count = scratch, maxobj = 0, ngroups = 0;
    for (int r = 0; r < W; r++) {
      int obj = g->domain == FSDP_SHARD_DOMAIN_PACKAGE ? info[r].package : info[r].numa;
      if (obj < 0) {
        char why[96];
#if !FSDP_HAVE_HWLOC
        snprintf(why, sizeof why, "not placed (libfsdp was built without hwloc)");
#else
        if (info[r].bound) snprintf(why, sizeof why, "bound to CPUs of more than one %s", domain_object(g->domain));
        else snprintf(why, sizeof why, "unbound");
#endif
        FSDPCall(FSDPFree(&scratch));
        FSDPCheck(0, g->comm, FSDP_ERR_ARG,
                  "shard domain %s needs every rank bound within one %s, but rank %d is %s (bind with -fsdp_bind "
                  "core, numa or package, or through the launcher, e.g. srun --cpu-bind=cores)",
                  FSDPShardDomainNames[g->domain], domain_object(g->domain), r, why);
      }
      if (obj > maxobj) maxobj = obj;
      info[r].group = obj; /* for now: the object; numbered below */
    }
    /* key = node * (maxobj + 1) + object, ordered; a group per key that has ranks. */
    {
      int nkeys = g->nnodes * (maxobj + 1), *id;
      FSDPCall(FSDPCalloc((size_t)nkeys * 2, sizeof *id, FSDP_MEM_OTHER, &id));
      for (int r = 0; r < W; r++) id[info[r].node * (maxobj + 1) + info[r].group]++;
      for (int key = 0; key < nkeys; key++) id[nkeys + key] = id[key] ? ngroups++ : -1;
      for (int r = 0; r < W; r++) {
        int key = info[r].node * (maxobj + 1) + info[r].group;
        info[r].group = id[nkeys + key];
      }
      FSDPCall(FSDPFree(&id));
    }
    for (int i = 0; i < ngroups; i++) count[i] = 0;
    for (int r = 0; r < W; r++) info[r].index = count[info[r].group]++; /* rank order = local rank order */
    F = count[0];
    for (int i = 1; i < ngroups; i++)
      if (count[i] != F) {
        int r0 = 0, ri = 0, c = count[i];
        for (int r = W - 1; r >= 0; r--) {
          if (info[r].group == 0) r0 = r;
          if (info[r].group == i) ri = r;
        }
        FSDPCall(FSDPFree(&scratch));
        FSDPCheck(0, g->comm, FSDP_ERR_ARG,
                  "shard domain %s gives shard groups of different sizes: %d ranks on node %d %s %d, %d on node %d %s "
                  "%d (bind ranks evenly with -fsdp_bind, or set -fsdp_sharding_factor)",
                  FSDPShardDomainNames[g->domain], F, info[r0].node, domain_object(g->domain),
                  g->domain == FSDP_SHARD_DOMAIN_PACKAGE ? info[r0].package : info[r0].numa, c, info[ri].node,
                  domain_object(g->domain), g->domain == FSDP_SHARD_DOMAIN_PACKAGE ? info[ri].package : info[ri].numa);
      }
  }
  FSDPCall(FSDPFree(&scratch));
  g->factor = F;
  return FSDP_SUCCESS;
}

/* GPUs of one node (ranks[0..n-1], in local-rank order) to its ranks: first a
   free GPU close to the rank's CPUs, then any free GPU, then (more ranks than
   GPUs) the least used close one.  load[] has room for every GPU. */
static void assign_node_devices(RankInfo *info, const int *ranks, int n, int *load)
{
  int ngpus = info[ranks[0]].ngpus;

  /* An emulated node may span real nodes: use the GPUs all of them have. */
  for (int i = 1; i < n; i++)
    if (info[ranks[i]].ngpus < ngpus) ngpus = info[ranks[i]].ngpus;
  for (int d = 0; d < ngpus; d++) load[d] = 0;
  for (int i = 0; i < n; i++) info[ranks[i]].device = -1;
  if (!ngpus) return;
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < n; i++) {
      RankInfo *r = &info[ranks[i]];
      int best = -1;
      if (r->device >= 0) continue;
      for (int d = 0; d < ngpus; d++) {
        bool near = d < FSDP_PLACEMENT_MAX_GPUS && (r->close_gpus >> d & 1);
        if (pass == 0 && near && !load[d]) best = best < 0 ? d : best;
        if (pass == 1 && !load[d]) best = best < 0 ? d : best;
        if (pass == 2 && (near || !r->close_gpus) && (best < 0 || load[d] < load[best])) best = d;
      }
      if (best >= 0) {
        r->device = best;
        load[best]++;
      }
    }
  for (int i = 0; i < n; i++) info[ranks[i]].nsharing = load[info[ranks[i]].device];
}

static FSDPErrorCode assign_devices(ShardGroup g)
{
  int *order, *pos, *first, *load, maxgpus = 0;

  for (int r = 0; r < g->size; r++)
    if (g->ranks[r].ngpus > maxgpus) maxgpus = g->ranks[r].ngpus;
  FSDPCall(
      FSDPCalloc(2 * (size_t)g->size + (size_t)g->nnodes + 1 + (size_t)maxgpus, sizeof *order, FSDP_MEM_OTHER, &order));
  pos = order + g->size;
  first = pos + g->size;
  load = first + g->nnodes + 1;
  node_major_order(g, pos, first);
  for (int r = 0; r < g->size; r++) order[pos[r]] = r;
  for (int n = 0; n < g->nnodes; n++) assign_node_devices(g->ranks, order + first[n], first[n + 1] - first[n], load);
  FSDPCall(FSDPFree(&order));
  return FSDP_SUCCESS;
}

/* The shard and replicate communicators, from member lists every rank knows:
   MPI_Comm_create_group involves only the members, so it costs a third of
   what MPI_Comm_split over the whole communicator does. */
static FSDPErrorCode create_comms(ShardGroup g)
{
  const RankInfo *me = &g->ranks[g->rank];
  int F = g->factor, *shard, *replicate;
  MPI_Group all, members;

  FSDPCall(FSDPMalloc(((size_t)F + (size_t)(g->size / F)) * sizeof *shard, FSDP_MEM_OTHER, &shard));
  replicate = shard + F;
  for (int r = 0; r < g->size; r++) {
    if (g->ranks[r].group == me->group) shard[g->ranks[r].index] = r;
    if (g->ranks[r].index == me->index) replicate[g->ranks[r].group] = r;
  }
  FSDPCallMPI(MPI_Comm_group(g->comm, &all));
  FSDPCallMPI(MPI_Group_incl(all, F, shard, &members));
  FSDPCallMPI(MPI_Comm_create_group(g->comm, members, 1, &g->shard_comm));
  FSDPCallMPI(MPI_Group_free(&members));
  FSDPCallMPI(MPI_Group_incl(all, g->size / F, replicate, &members));
  FSDPCallMPI(MPI_Comm_create_group(g->comm, members, 2, &g->replicate_comm));
  FSDPCallMPI(MPI_Group_free(&members));
  FSDPCallMPI(MPI_Group_free(&all));
  FSDPCall(FSDPFree(&shard));
  FSDPCallMPI(MPI_Comm_set_errhandler(g->shard_comm, MPI_ERRORS_RETURN));
  FSDPCallMPI(MPI_Comm_set_errhandler(g->replicate_comm, MPI_ERRORS_RETURN));
  return FSDP_SUCCESS;
}

/* This rank's node, local rank and size, before anything is gathered: from
   emulation, or from its node communicator. */
static FSDPErrorCode my_node(ShardGroup g, int *local_rank, int *local_size)
{
  if (g->ranks_per_node) {
    FSDPCall(assign_nodes(g, g->ranks_per_node, g->placement, NULL));
    *local_rank = g->ranks[g->rank].local_rank;
    *local_size = g->ranks[g->rank].local_size;
  } else {
    FSDPCallMPI(MPI_Comm_rank(g->node->comm, local_rank));
    FSDPCallMPI(MPI_Comm_size(g->node->comm, local_size));
  }
  return FSDP_SUCCESS;
}

/* This rank's node leader (in g->comm), and where it stands on its node. */
static FSDPErrorCode locate(ShardGroup g, int *leader, int *local_rank, int *local_size)
{
  MPI_Group node_group, group;
  int zero = 0;

  FSDPCallMPI(MPI_Comm_group(g->node->comm, &node_group));
  FSDPCallMPI(MPI_Comm_group(g->comm, &group));
  FSDPCallMPI(MPI_Group_translate_ranks(node_group, 1, &zero, group, leader));
  FSDPCallMPI(MPI_Group_free(&node_group));
  FSDPCallMPI(MPI_Group_free(&group));
  FSDPCall(FSDPCalloc((size_t)g->size, sizeof *g->ranks, FSDP_MEM_OTHER, &g->ranks));
  FSDPCall(my_node(g, local_rank, local_size));
  return FSDP_SUCCESS;
}

/* Every rank's node source and node emulation, agreed before any rank acts
   on them: -fsdp_node_source slurm makes collective calls the others would
   not make.  With slurm, the node communicator becomes the ranks with this
   rank's SLURM_NODEID; a rank without one fails everywhere, named. */
static FSDPErrorCode slurm_node(ShardGroup g)
{
  const char *env = getenv("SLURM_NODEID");
  char *end = NULL;
  long id = env && *env ? strtol(env, &end, 10) : -1;
  /* MAX of {source, -source, rpn, -rpn, the first rank without a node id (as -(2 rank + unset) - 1)} */
  int mine[5], all[5];
  NodeComm *n = NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  FSDPErrorCode ierr = FSDP_SUCCESS;

  if (!end || *end || id < 0 || id > INT32_MAX) id = -1;
  mine[0] = (int)g->node_source;
  mine[1] = -(int)g->node_source;
  mine[2] = g->ranks_per_node;
  mine[3] = -g->ranks_per_node;
  mine[4] = id >= 0 || g->node_source != NODE_SOURCE_SLURM ? INT32_MIN : -(2 * g->rank + !env) - 1;
  FSDPCallMPI(MPI_Allreduce(mine, all, 5, MPI_INT, MPI_MAX, g->comm));
  FSDPCheck(all[0] == -all[1], g->comm, FSDP_ERR_ARG,
            "ranks disagree on the ShardGroup's -fsdp_node_source (give every rank the same options)");
  FSDPCheck(all[2] == -all[3], g->comm, FSDP_ERR_ARG,
            "ranks disagree on the ShardGroup's -fsdp_ranks_per_node (give every rank the same options)");
  if (g->node_source != NODE_SOURCE_SLURM || g->ranks_per_node) return FSDP_SUCCESS;
  FSDPCheck(all[4] == INT32_MIN, g->comm, FSDP_ERR_OPTION,
            "-fsdp_node_source slurm: SLURM_NODEID is %s on rank %d (launch the job with srun, or use "
            "-fsdp_node_source mpi)",
            (-all[4] - 1) % 2 ? "not set" : "not a node number", (-all[4] - 1) / 2);
  FSDPCallMPI(MPI_Comm_split(g->comm, (int)id, g->rank, &comm));
  if (!(ierr = FSDPCalloc(1, sizeof *n, FSDP_MEM_OTHER, &n))) {
    n->comm = comm;
    n->refs = 1;
    if (MPI_Comm_set_errhandler(n->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS)
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Comm_set_errhandler failed");
  }
  if (ierr) { /* n owns comm once made */
    if (n) release_node_comm(n);
    else MPI_Comm_free(&comm);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  release_node_comm(g->node);
  g->node = n;
  return FSDP_SUCCESS;
}

/* -fsdp_bind over a task that srun has bound (--cpu-bind, SLURM_CPU_BIND_TYPE)
   would undo the binding the job asked Slurm for: refused unless forced. */
static FSDPErrorCode slurm_bound(ShardGroup g)
{
  const char *type = getenv("SLURM_CPU_BIND_TYPE"), *list = getenv("SLURM_CPU_BIND_LIST");

  if (!type || !*type || !strncmp(type, "none", 4)) return FSDP_SUCCESS;
  FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "-fsdp_bind %s: Slurm already bound this task (SLURM_CPU_BIND_TYPE=%s%s%s), and libfsdp will not "
            "rebind it: drop -fsdp_bind to keep Slurm's binding, launch with srun --cpu-bind=none, or add "
            "-fsdp_bind_force",
            FSDPBindNames[g->bind], type, list && *list ? ", SLURM_CPU_BIND_LIST=" : "", list && *list ? list : "");
  return FSDP_SUCCESS;
}

/* The least memory limit set on `dir` (a cgroup's directory under `mount`),
   or on the cgroups above it, in `file`; where it is set, in *where. */
static void cgroup_walk(const char *mount, const char *path, const char *file, size_t *limit, char *where, size_t len)
{
  char dir[1024];
  size_t top = strlen(mount);
  int n = snprintf(dir, sizeof dir, "%s%s", mount, path);
  if (n < 0 || (size_t)n >= sizeof dir) return;
  for (;;) {
    char name[1100], text[64], *end;
    unsigned long long v;
    FILE *f;
    size_t at = strlen(dir);
    while (at > top && dir[at - 1] == '/') dir[--at] = '\0';
    snprintf(name, sizeof name, "%s/%s", dir, file);
    if ((f = fopen(name, "r"))) {
      /* "max" (v2), or v1's "unlimited" (a page-rounded 2^63 - 1): no limit */
      if (fgets(text, sizeof text, f) && (v = strtoull(text, &end, 10)) > 0 && end != text && v < (1ULL << 62) &&
          (!*limit || v < *limit)) {
        *limit = (size_t)v;
        snprintf(where, len, "%s", dir);
      }
      fclose(f);
    }
    if (at <= top) break;
    while (at > top && dir[at - 1] != '/') at--;
    dir[at] = '\0';
  }
}

/* The memory limit of this process's cgroups (v2 memory.max, v1
   memory.limit_in_bytes), from the one it is in up to the hierarchy's root,
   at their usual mounts; 0 when none is set. */
static size_t cgroup_memory_limit(char *where, size_t len)
{
  char line[1024];
  size_t limit = 0;
  FILE *f = fopen("/proc/self/cgroup", "r");
  where[0] = '\0';
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) { /* id:controllers:path */
    char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL, *nl;
    if (!b) continue;
    if ((nl = strchr(b, '\n'))) *nl = '\0';
    *a = *b = '\0';
    if (!strcmp(line, "0") && !a[1]) cgroup_walk("/sys/fs/cgroup", b + 1, "memory.max", &limit, where, len);
    else {
      char *c, *save = NULL;
      for (c = strtok_r(a + 1, ",", &save); c; c = strtok_r(NULL, ",", &save))
        if (!strcmp(c, "memory"))
          cgroup_walk("/sys/fs/cgroup/memory", b + 1, "memory.limit_in_bytes", &limit, where, len);
    }
  }
  fclose(f);
  return limit;
}

/* The node's memory: its physical memory (the machine's ranks share it),
   and the limit of this rank's cgroup with the number of the ranks that
   share it: those of host (MPI's node) whose limit is set in the same
   directory.  Not the machine's: a container has a cgroup of its own, which
   it may see at the same path as other containers see theirs.  Collective
   on host. */
static FSDPErrorCode count_node_memory(ShardGroup g, MPI_Comm host)
{
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t h[2];

  g->node_memory = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
  g->cgroup_limit = cgroup_memory_limit(g->cgroup, sizeof g->cgroup);
  h[0] = FSDPHashBytes_Private(FSDP_HASH_INIT, g->cgroup, strlen(g->cgroup) + 1);
  h[1] = ~h[0];
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MIN, host));
  if (h[0] == ~h[1]) FSDPCallMPI(MPI_Comm_size(host, &g->cgroup_ranks)); /* one cgroup (or none): the usual case */
  else {
    MPI_Comm same;
    uint64_t mine = FSDPHashBytes_Private(FSDP_HASH_INIT, g->cgroup, strlen(g->cgroup) + 1);
    FSDPCallMPI(MPI_Comm_split(host, (int)(mine % INT32_MAX), 0, &same));
    FSDPCallMPI(MPI_Comm_size(same, &g->cgroup_ranks));
    FSDPCallMPI(MPI_Comm_free(&same));
  }
  return FSDP_SUCCESS;
}

/* The CPUs the node's ranks may run on: the union of their affinity masks
   (a launcher's or Slurm's binding, a cgroup's cpuset).  The node is the
   machine the ranks share (FSDPMachineComm_Private), even where Slurm's
   node ids name the ShardGroup's nodes (several slurmd on one machine) or
   each container of a host is a node of its own to MPI. */
FSDPErrorCode FSDPNodeCPUs_Private(MPI_Comm host, int *cpus)
{
  enum { WORDS = CPU_SETSIZE / 64 };
  uint64_t mask[WORDS] = {0};
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) mask[c / 64] |= 1ULL << (c % 64);
  } else {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; c++) mask[c / 64] |= 1ULL << (c % 64);
  }
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, mask, WORDS, MPI_UINT64_T, MPI_BOR, host));
  *cpus = 0;
  for (int w = 0; w < WORDS; w++) *cpus += __builtin_popcountll(mask[w]);
  return FSDP_SUCCESS;
}

/* This kernel's boot id (Linux), empty where there is none. */
static void boot_id(char id[64])
{
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  id[0] = '\0';
  if (f) {
    if (!fgets(id, 64, f)) id[0] = '\0';
    fclose(f);
  }
}

FSDPErrorCode FSDPMachineComm_Private(MPI_Comm comm, MPI_Comm host, MPI_Comm *machine, int *hosts)
{
  char id[64];
  int rank, size, host_size, leader, same = 0, first = -1, split, seen = 0;
  uint64_t mine[3], *all = NULL;
  FSDPErrorCode ierr;
  *machine = host;
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  FSDPCallMPI(MPI_Comm_size(host, &host_size));
  leader = rank;
  FSDPCallMPI(MPI_Bcast(&leader, 1, MPI_INT, 0, host));
  /* The id's two hashes; without an id, the host's own (its first rank). */
  boot_id(id);
  mine[0] = id[0] ? FSDPHashBytes_Private(FSDP_HASH_INIT, id, strlen(id)) : 0;
  mine[1] = id[0] ? FSDPHashBytes_Private(FSDP_HASH_INIT ^ 0x5bd1e995u, id, strlen(id)) : (uint64_t)leader;
  mine[2] = (uint64_t)leader;
  ierr = FSDPMalloc((size_t)size * sizeof mine, FSDP_MEM_OTHER, &all);
  FSDPCall(FSDPErrorAgree_Private(comm, ierr));
  if (MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, comm))
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Allgather of the boot ids failed");
  /* The machine's ranks, the first of them, and its hosts (their first ranks, each counted once). */
  for (int r = 0; !ierr && r < size; r++) {
    const uint64_t *x = all + 3 * (size_t)r;
    if (x[0] != mine[0] || x[1] != mine[1]) continue;
    if (first < 0) first = r;
    same++;
    if ((int)x[2] == r) seen++;
  }
  {
    FSDPErrorCode e = FSDPFree(&all);
    if (!ierr) ierr = e;
  }
  FSDPCall(FSDPErrorAgree_Private(comm, ierr));
  if (hosts) *hosts = seen;
  split = same != host_size;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, &split, 1, MPI_INT, MPI_MAX, comm));
  if (split) FSDPCallMPI(MPI_Comm_split(comm, first, rank, machine));
  return FSDP_SUCCESS;
}

/* The load of this rank's machine: its ranks, their CPUs, its memory. */
static FSDPErrorCode count_node_cpus(ShardGroup g)
{
  MPI_Comm host = g->node->comm, machine;
  if (g->node_source != NODE_SOURCE_MPI)
    FSDPCallMPI(MPI_Comm_split_type(g->comm, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &host));
  FSDPCall(FSDPMachineComm_Private(g->comm, host, &machine, &g->machine_hosts));
  FSDPCallMPI(MPI_Comm_size(machine, &g->node_ranks));
  FSDPCall(FSDPNodeCPUs_Private(machine, &g->node_cpus));
  FSDPCall(count_node_memory(g, host));
  if (machine != host) FSDPCallMPI(MPI_Comm_free(&machine));
  if (host != g->node->comm) FSDPCallMPI(MPI_Comm_free(&host));
  return FSDP_SUCCESS;
}

static FSDPErrorCode setup(ShardGroup g)
{
  int mine[R_N] = {0}, *all, leader = -1, local_rank = 0, local_size = 1, failed = 0, len;
  FSDPErrorCode ierr;

  /* Until the allgather, a step that fails on some ranks only records it, so
     that every rank makes the same collective calls.  The node comes first
     (the topology is collective on it). */
  ierr = slurm_node(g);
  if (!ierr) ierr = FSDPTopologyLoad_Private(g->node->comm, "-fsdp_topology", g->topology, &g->topo);
  if (!ierr) ierr = locate(g, &leader, &local_rank, &local_size);
  if (!ierr) ierr = FSDPTopologyPlace_Private(g->topo, g->bind, local_rank, local_size, &g->where);
  mine[R_FACTOR] = g->factor_requested;
  mine[R_DOMAIN] = (int)g->domain;
  mine[R_BIND] = (int)g->bind;
  mine[R_RPN] = g->ranks_per_node;
  mine[R_PLACEMENT] = (int)g->placement;
  mine[R_VIEW] = g->view_at_setup;
  mine[R_NODE_SOURCE] = (int)g->node_source;
  mine[R_TOPOLOGY] = string_hash(g->topology);
  mine[R_LEADER] = leader;
  mine[R_STATUS] = (int)ierr;
  mine[R_PACKAGE] = g->where.package;
  mine[R_NUMA] = g->where.numa;
  mine[R_BOUND] = g->where.bound;
  mine[R_NGPUS] = g->topo ? FSDPTopologyNumGPUs_Private(g->topo) : 0;
  mine[R_CLOSE_LO] = (int)(uint32_t)g->where.close_gpus;
  mine[R_CLOSE_HI] = (int)(uint32_t)(g->where.close_gpus >> 32);
  FSDPCall(FSDPMalloc((size_t)g->size * R_N * sizeof *all, FSDP_MEM_OTHER, &all));
  FSDPCallMPI(MPI_Allgather(mine, R_N, MPI_INT, all, R_N, MPI_INT, g->comm));
  for (int r = 0; r < g->size; r++) failed |= all[r * R_N + R_STATUS] != FSDP_SUCCESS;
  if (failed) ierr = FSDPErrorAgree_Private(g->comm, ierr);
  else if (!(ierr = check_settings(g, all))) ierr = assign_nodes(g, g->ranks_per_node, g->placement, all + R_LEADER);
  for (int r = 0; r < g->size && !ierr; r++) {
    const int *p = all + r * R_N;
    g->ranks[r].package = p[R_PACKAGE];
    g->ranks[r].numa = p[R_NUMA];
    g->ranks[r].bound = p[R_BOUND];
    g->ranks[r].ngpus = p[R_NGPUS];
    g->ranks[r].close_gpus = (uint64_t)(uint32_t)p[R_CLOSE_LO] | (uint64_t)(uint32_t)p[R_CLOSE_HI] << 32;
  }
  FSDPCall(FSDPFree(&all));
  FSDPCall(ierr);
  /* Every rank agrees on -fsdp_bind now; bind only after that, on this machine's topology. */
  if (g->bind != FSDP_BIND_NONE) {
    if (FSDPTopologyIsThisSystem_Private(g->topo)) {
      ierr = g->bind_force ? FSDP_SUCCESS : slurm_bound(g);
      if (!ierr) ierr = FSDPTopologyBind_Private(g->topo, g->bind, local_rank, local_size);
    }
    FSDPCall(FSDPErrorAgree_Private(g->comm, ierr));
  }
  FSDPCall(count_node_cpus(g));
  FSDPCall(build_groups(g));
  FSDPCall(assign_devices(g));
  FSDPCall(create_comms(g));
  MPI_Get_processor_name(g->host, &len);
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupSetUp(ShardGroup group)
{
  FSDPLogEvent event;
  FSDPErrorCode ierr;

  FSDPCheck(group, MPI_COMM_SELF, FSDP_ERR_ARG, "group must not be NULL");
  FSDPCollective(group->comm);
  if (group->setup) return FSDP_SUCCESS;
  FSDPCall(FSDPLogEventRegister("ShardGroupSetUp", &event));
  FSDPCall(FSDPLogEventBegin(event));
  ierr = setup(group);
  FSDPCall(FSDPLogEventEnd(event, 0));
  if (ierr) {
    (void)reset_layout(group);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  group->setup = true;
  if (group->view_at_setup) FSDPCall(ShardGroupView(group, NULL));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ getters */

#define CHECK_SETUP(g)                                                                                                 \
  do {                                                                                                                 \
    FSDPCheck(g, MPI_COMM_SELF, FSDP_ERR_ARG, "group must not be NULL");                                               \
    FSDPCheck((g)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s before ShardGroupSetUp: no layout yet", __func__);        \
  } while (0)

FSDPErrorCode ShardGroupGetComm(ShardGroup group, MPI_Comm *comm)
{
  FSDPCheck(group, MPI_COMM_SELF, FSDP_ERR_ARG, "group must not be NULL");
  if (comm) *comm = group->comm;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetShardComm(ShardGroup group, MPI_Comm *comm, int *index, int *factor)
{
  CHECK_SETUP(group);
  if (comm) *comm = group->shard_comm;
  if (index) *index = group->ranks[group->rank].index;
  if (factor) *factor = group->factor;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetReplicateComm(ShardGroup group, MPI_Comm *comm, int *index, int *size)
{
  CHECK_SETUP(group);
  if (comm) *comm = group->replicate_comm;
  if (index) *index = group->ranks[group->rank].group;
  if (size) *size = group->size / group->factor;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetNode(ShardGroup group, int *node, int *nnodes)
{
  CHECK_SETUP(group);
  if (node) *node = group->ranks[group->rank].node;
  if (nnodes) *nnodes = group->nnodes;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetLocalRank(ShardGroup group, int *local_rank, int *local_size)
{
  CHECK_SETUP(group);
  if (local_rank) *local_rank = group->ranks[group->rank].local_rank;
  if (local_size) *local_size = group->ranks[group->rank].local_size;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetDevice(ShardGroup group, int *device, int *nsharing)
{
  CHECK_SETUP(group);
  if (device) *device = group->ranks[group->rank].device;
  if (nsharing) *nsharing = group->ranks[group->rank].device >= 0 ? group->ranks[group->rank].nsharing : 0;
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupGetDevicePCIBusId(ShardGroup group, const char **busid)
{
  int device;
  CHECK_SETUP(group);
  FSDPCheck(busid, MPI_COMM_SELF, FSDP_ERR_ARG, "busid must not be NULL");
  device = group->ranks[group->rank].device;
  *busid = device >= 0 ? FSDPTopologyGPUBusId_Private(group->topo, device) : NULL;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ view */

/* "0-3", "0,4", "1,3-5": ranks listed compactly. */
static FSDPErrorCode print_ranks(FSDPViewer v, const int *ranks, int n)
{
  char text[256];
  size_t used = 0;
  for (int i = 0; i < n && used < sizeof text - 16; i++) {
    int j = i;
    while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
    if (j >= i + 2)
      used += (size_t)snprintf(text + used, sizeof text - used, "%s%d-%d", i ? "," : "", ranks[i], ranks[j]);
    else {
      used += (size_t)snprintf(text + used, sizeof text - used, "%s%d", i ? "," : "", ranks[i]);
      j = i;
    }
    i = j;
  }
  if (used >= sizeof text - 16) snprintf(text + sizeof text - 16, 16, ",...");
  FSDPCall(FSDPViewerASCIIPrintf(v, "%s\n", text));
  return FSDP_SUCCESS;
}

/* Whether shard groups lie within nodes, are made of whole nodes, or neither:
   every rank is compared with the first rank seen of its group and of its node. */
static FSDPErrorCode node_span(ShardGroup g, const char **span)
{
  const RankInfo *info = g->ranks;
  int ngroups = g->size / g->factor, *group_node, *node_group;
  bool within = true, whole = true;

  FSDPCall(FSDPMalloc(((size_t)ngroups + (size_t)g->nnodes) * sizeof *group_node, FSDP_MEM_OTHER, &group_node));
  node_group = group_node + ngroups;
  for (int i = 0; i < ngroups; i++) group_node[i] = -1;
  for (int n = 0; n < g->nnodes; n++) node_group[n] = -1;
  for (int r = 0; r < g->size; r++) {
    int s = info[r].group, n = info[r].node;
    if (group_node[s] < 0) group_node[s] = n;
    if (node_group[n] < 0) node_group[n] = s;
    within = within && group_node[s] == n;
    whole = whole && node_group[n] == s;
  }
  FSDPCall(FSDPFree(&group_node));
  *span = within ? "within one node" : whole ? "over whole nodes" : "across node boundaries";
  return FSDP_SUCCESS;
}

/* Under Slurm, the job, its step and nodes (rank 0's environment), and where the nodes came from. */
static FSDPErrorCode view_slurm(ShardGroup g, FSDPViewer v)
{
  const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID"), *nodes = getenv("SLURM_JOB_NODELIST");
  const char *restarts = getenv("SLURM_RESTART_COUNT");

  if (!job) return FSDP_SUCCESS;
  FSDPCall(FSDPViewerASCIIPrintf(v, "Slurm: job %s, step %s, nodes %s", job, step ? step : "none (outside srun)",
                                 nodes ? nodes : "?"));
  if (restarts && strcmp(restarts, "0")) FSDPCall(FSDPViewerASCIIPrintf(v, ", restart %s", restarts));
  FSDPCall(FSDPViewerASCIIPrintf(v, "; nodes of this group from %s\n",
                                 g->ranks_per_node                     ? "-fsdp_ranks_per_node"
                                 : g->node_source == NODE_SOURCE_SLURM ? "SLURM_NODEID (-fsdp_node_source slurm)"
                                                                       : "MPI (-fsdp_node_source mpi)"));
  return FSDP_SUCCESS;
}

static FSDPErrorCode view_group(FSDPViewer v, void *ctx)
{
  ShardGroup g = ctx;
  const RankInfo *me = &g->ranks[g->rank];
  MPI_Comm vcomm;
  int cmp, W = g->size, F = g->factor, ngroups = W / F, *members, *column;
  char summary[256], device[96], local[32], shard[32], replicate[32];
  const char *span = "";

  FSDPCall(FSDPViewerGetComm(v, &vcomm));
  FSDPCallMPI(MPI_Comm_compare(vcomm, g->comm, &cmp));
  FSDPCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, g->comm, FSDP_ERR_ARG,
            "ShardGroupView needs a viewer on the group's communicator (or NULL)");
  FSDPCall(FSDPViewerASCIIPrintf(v, "ShardGroup: %d rank%s on %d node%s", W, W == 1 ? "" : "s", g->nnodes,
                                 g->nnodes == 1 ? "" : "s"));
  if (g->ranks_per_node)
    FSDPCall(FSDPViewerASCIIPrintf(v, " (emulated: -fsdp_ranks_per_node %d, %s placement)", g->ranks_per_node,
                                   placement_names[g->placement]));
  FSDPCall(FSDPViewerASCIIPrintf(v, "\n"));
  FSDPCall(FSDPViewerASCIIPushTab(v));
  FSDPCall(view_slurm(g, v));
  if (g->factor_requested)
    FSDPCall(FSDPViewerASCIIPrintf(v, "sharding factor F = %d (%s)\n", F,
                                   g->factor_from_option ? "-fsdp_sharding_factor" : "ShardGroupSetShardingFactor"));
  else
    FSDPCall(
        FSDPViewerASCIIPrintf(v, "sharding factor F = %d (shard domain %s)\n", F, FSDPShardDomainNames[g->domain]));
  FSDPCall(node_span(g, &span));
  FSDPCall(FSDPViewerASCIIPrintf(v, "%d shard group%s of %d rank%s, %s; %d replicate group%s of %d rank%s\n", ngroups,
                                 ngroups == 1 ? "" : "s", F, F == 1 ? "" : "s", span, F, F == 1 ? "" : "s", ngroups,
                                 ngroups == 1 ? "" : "s"));
  FSDPCall(FSDPViewerASCIIPrintf(v, "topology: %s; binding: %s%s\n", FSDPTopologySource_Private(g->topo),
                                 FSDPBindNames[g->bind],
                                 g->bind != FSDP_BIND_NONE && !FSDPTopologyIsThisSystem_Private(g->topo)
                                     ? " (planned only: the topology is not this machine's)"
                                     : ""));

  /* Each node by its first rank. */
  if (me->local_rank == 0) {
    int nsharing = 0;
    FSDPTopologySummary_Private(g->topo, summary, sizeof summary);
    FSDPCall(FSDPViewerASCIISynchronizedPrintf(v, "node %d (%s): %d rank%s; %s\n", me->node, g->host, me->local_size,
                                               me->local_size == 1 ? "" : "s", summary));
    FSDPCall(FSDPViewerASCIIPushTab(v));
    FSDPCall(FSDPTopologyViewGPUs_Private(g->topo, v));
    for (int r = 0; r < W; r++)
      if (g->ranks[r].node == me->node && g->ranks[r].device >= 0 && g->ranks[r].nsharing > 1) nsharing++;
    if (nsharing)
      FSDPCall(FSDPViewerASCIISynchronizedPrintf(v, "%d of %d ranks share a GPU with another rank\n", nsharing,
                                                 me->local_size));
    FSDPCall(FSDPViewerASCIIPopTab(v));
  }
  FSDPCall(FSDPViewerFlush(v));

  /* Group lists, from members[group * F + index] */
  FSDPCall(FSDPMalloc(((size_t)W + (size_t)ngroups) * sizeof *members, FSDP_MEM_OTHER, &members));
  column = members + W;
  for (int r = 0; r < W; r++) members[g->ranks[r].group * F + g->ranks[r].index] = r;
  FSDPCall(FSDPViewerASCIIPrintf(v, "shard groups (ranks in shard order):\n"));
  for (int s = 0; s < ngroups; s++) {
    FSDPCall(FSDPViewerASCIIPrintf(v, "  %d: ", s));
    FSDPCall(print_ranks(v, members + s * F, F));
  }
  FSDPCall(FSDPViewerASCIIPrintf(v, "replicate groups (one per shard index, ranks in group order):\n"));
  for (int i = 0; i < F; i++) {
    for (int s = 0; s < ngroups; s++) column[s] = members[s * F + i];
    FSDPCall(FSDPViewerASCIIPrintf(v, "  %d: ", i));
    FSDPCall(print_ranks(v, column, ngroups));
  }
  FSDPCall(FSDPFree(&members));

  /* One row per rank; shard = shard group:shard index, replicate = replicate group:index in it. */
  FSDPCall(FSDPViewerASCIIPrintf(v, "rank  node  local  shard  replicate  device                   binding\n"));
  snprintf(local, sizeof local, "%d/%d", me->local_rank, me->local_size);
  snprintf(shard, sizeof shard, "%d:%d", me->group, me->index);
  snprintf(replicate, sizeof replicate, "%d:%d", me->index, me->group);
  if (me->device < 0) snprintf(device, sizeof device, "host");
  else
    snprintf(device, sizeof device, "GPU %d %s%s", me->device, FSDPTopologyGPUBusId_Private(g->topo, me->device),
             me->nsharing > 1 ? " shared" : "");
  FSDPCall(FSDPViewerASCIISynchronizedPrintf(v, "%4d  %4d  %5s  %5s  %9s  %-23s  %s\n", g->rank, me->node, local, shard,
                                             replicate, device, g->where.cpus));
  FSDPCall(FSDPViewerFlush(v));
  FSDPCall(FSDPViewerASCIIPopTab(v));
  return FSDP_SUCCESS;
}

FSDPErrorCode ShardGroupView(ShardGroup group, FSDPViewer viewer)
{
  CHECK_SETUP(group);
  /* NULL: stdout on the group's ranks, which need not be MPI_COMM_WORLD's. */
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, group->comm, view_group, group));
  return FSDP_SUCCESS;
}
