/* ShardGroup on real and shipped topologies: GPU assignment by locality
   (distinct GPUs, then sharing), package and NUMA shard domains, topology
   discovery once per node, and CPU binding applied on this machine.
   mpitest: -n 4
   mpitest: -n 8 */
#include "fsdp_config.h" /* FSDP_HAVE_HWLOC */
#include "testutil.h"

#if FSDP_HAVE_HWLOC
#include <hwloc.h>

/* The GPUs of tests/topologies/2socket-8gpu.xml in PCI bus order; 0-3 hang off package 0. */
static const char *const dgx_busids[8] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                          "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};

static const char *const used_options[] = {"-fsdp_topology",     "-fsdp_ranks_per_node",  "-fsdp_bind",
                                           "-fsdp_shard_domain", "-fsdp_sharding_factor", NULL};

static char topology_dir[1024];

/* A set-up group from exactly these options ("%s" is the topology directory). */
static ShardGroup group_with(const char *fmt)
{
  ShardGroup g;
  char options[2048];
  for (int i = 0; used_options[i]; i++) TEST_OK(FSDPOptionsClearValue(used_options[i]));
  snprintf(options, sizeof options, fmt, topology_dir);
  TEST_OK(FSDPOptionsInsertString(options));
  TEST_OK(ShardGroupCreate(MPI_COMM_WORLD, &g));
  TEST_OK(ShardGroupSetFromOptions(g));
  TEST_OK(ShardGroupSetUp(g));
  return g;
}

static int spread(int i, int n, int nobj) { return (int)((long)i * nobj / n); }

static void check_device(ShardGroup g, int want, int want_sharing, const char *const *busids, const char *what)
{
  int device, sharing, lr;
  const char *busid;
  TEST_OK(ShardGroupGetLocalRank(g, &lr, NULL));
  TEST_OK(ShardGroupGetDevice(g, &device, &sharing));
  TEST_OK(ShardGroupGetDevicePCIBusId(g, &busid));
  TEST_ASSERT(device == want && sharing == want_sharing, "%s: local rank %d got GPU %d shared by %d, expected %d by %d",
              what, lr, device, sharing, want, want_sharing);
  if (busids)
    TEST_ASSERT(busid && !strcmp(busid, busids[want]), "%s: GPU %d has bus id %s, expected %s", what, device,
                busid ? busid : "(null)", busids[want]);
}

/* Every member of my shard group has the same value of `key`, and the group has `size` members. */
static void check_shard_group_shares(ShardGroup g, int key, int size, const char *what)
{
  MPI_Comm shard;
  int n, keys[64];
  TEST_OK(ShardGroupGetShardComm(g, &shard, NULL, NULL));
  MPI_Comm_size(shard, &n);
  TEST_ASSERT(n == size, "%s: shard group of %d ranks, expected %d", what, n, size);
  MPI_Allgather(&key, 1, MPI_INT, keys, 1, MPI_INT, shard);
  for (int i = 0; i < n; i++)
    TEST_ASSERT(keys[i] == key, "%s: shard group member %d has %d, I have %d", what, i, keys[i], key);
}

int main(int argc, char **argv)
{
  ShardGroup g;
  int rank, W, lr, ls, nnodes_real, leader;
  MPI_Comm node_comm;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  snprintf(topology_dir, sizeof topology_dir, "%s/tests/topologies", getenv("srcdir") ? getenv("srcdir") : ".");

  /* 8 GPUs, all ranks of this machine unbound: GPU = local rank, round-robin. */
  g = group_with("-fsdp_topology %s/2socket-8gpu.xml");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_device(g, lr % 8, ls > 8 ? 2 : 1, dgx_busids, "8 GPUs, unbound");
  TEST_OK(ShardGroupDestroy(&g));

  /* Nodes of 4 bound by package: 2 ranks per socket, each on a GPU of its socket. */
  g = group_with("-fsdp_topology %s/2socket-8gpu.xml -fsdp_ranks_per_node 4 -fsdp_bind package");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_device(g, (int[]){0, 1, 4, 5}[lr], 1, dgx_busids, "8 GPUs, nodes of 4 bound by package");
  TEST_OK(ShardGroupDestroy(&g));

  /* The same, sharded by package: each shard group is one socket and its GPUs. */
  g = group_with("-fsdp_topology %s/2socket-8gpu.xml -fsdp_ranks_per_node 4 -fsdp_bind package "
                 "-fsdp_shard_domain package");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  {
    int device;
    TEST_OK(ShardGroupGetDevice(g, &device, NULL));
    check_shard_group_shares(g, device / 4, 2, "package domain: GPUs of one socket");
  }
  TEST_OK(ShardGroupDestroy(&g));

  /* 2 GPUs, unbound: round-robin, every GPU shared by half the ranks. */
  g = group_with("-fsdp_topology %s/2socket-2gpu.xml");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_device(g, lr % 2, ls / 2, NULL, "2 GPUs, unbound");
  TEST_OK(ShardGroupDestroy(&g));

  /* 2 GPUs, bound to cores: each rank shares the GPU of its own socket. */
  g = group_with("-fsdp_topology %s/2socket-2gpu.xml -fsdp_bind core");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_device(g, spread(lr, ls, 8) >= 4, ls / 2, NULL, "2 GPUs, bound to cores");
  TEST_OK(ShardGroupDestroy(&g));

  /* 4 NUMA domains of 4 cores: bound to cores, a shard group per NUMA domain. */
  g = group_with("-fsdp_topology %s/1socket-4numa.xml -fsdp_bind core -fsdp_shard_domain numa");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_device(g, -1, 0, NULL, "no GPUs");
  check_shard_group_shares(g, spread(lr, ls, 16) / 4, ls / 4, "NUMA domain, bound to cores");
  TEST_OK(ShardGroupDestroy(&g));

  /* Bound to whole NUMA domains: the same groups. */
  g = group_with("-fsdp_topology %s/1socket-4numa.xml -fsdp_bind numa -fsdp_shard_domain numa");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_shard_group_shares(g, spread(lr, ls, 4), ls / 4, "NUMA domain, bound to NUMA nodes");
  TEST_OK(ShardGroupDestroy(&g));

  /* A synthetic description works like a file. */
  g = group_with("-fsdp_topology 'pack:2 numa:2 core:2 pu:1' -fsdp_bind core -fsdp_shard_domain package");
  TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
  check_shard_group_shares(g, spread(lr, ls, 8) / 4, ls / 2, "synthetic, package domain");
  {
    const char *busid = "not set";
    TEST_OK(ShardGroupGetDevicePCIBusId(g, &busid));
    TEST_ASSERT(busid == NULL, "a node without GPUs gives a NULL bus id, got %s", busid);
  }
  TEST_OK(ShardGroupDestroy(&g));

  /* This machine, sharded by package with ranks bound by package; on a node
     with one package even unbound ranks are on it. */
  {
    hwloc_topology_t topo;
    int npackages, factor;
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    npackages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    hwloc_topology_destroy(topo);
    g = group_with("-fsdp_bind package -fsdp_shard_domain package");
    TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
    TEST_OK(ShardGroupGetShardComm(g, NULL, NULL, &factor));
    TEST_ASSERT(ls % npackages || factor == ls / npackages, "%d ranks on %d packages bound by package: F = %d", ls,
                npackages, factor);
    TEST_OK(ShardGroupDestroy(&g));
    if (npackages == 1) {
      g = group_with("-fsdp_shard_domain package");
      TEST_OK(ShardGroupGetShardComm(g, NULL, NULL, &factor));
      TEST_ASSERT(factor == ls, "one package, unbound ranks: F = %d, expected %d", factor, ls);
      TEST_OK(ShardGroupDestroy(&g));
    }
  }

  /* The topology is discovered once per node, not once per rank. */
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm);
  MPI_Comm_rank(node_comm, &leader);
  leader = leader == 0;
  MPI_Allreduce(&leader, &nnodes_real, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_free(&node_comm);
  {
    FSDPLogEvent event;
    FSDPLogEventInfo before, after;
    int discoveries, total;
    TEST_OK(FSDPLogEventRegister("TopologyDiscover", &event));
    TEST_OK(FSDPLogSetActive(true));
    TEST_OK(FSDPLogEventGetInfo(event, &before));
    g = group_with("");
    TEST_OK(FSDPLogEventGetInfo(event, &after));
    TEST_OK(FSDPLogSetActive(false));
    discoveries = (int)(after.count - before.count);
    MPI_Allreduce(&discoveries, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    TEST_ASSERT(total == nnodes_real, "%d topology discoveries for %d nodes", total, nnodes_real);
    TEST_OK(ShardGroupDestroy(&g));
  }

  /* Binding on this machine, checked against hwloc's own view of it. */
  {
    static const char *const binds[] = {"package", "numa", "core"};
    static const hwloc_obj_type_t types[] = {HWLOC_OBJ_PACKAGE, HWLOC_OBJ_NUMANODE, HWLOC_OBJ_CORE};
    hwloc_topology_t topo;
    hwloc_bitmap_t now = hwloc_bitmap_alloc();
    char options[64], got[128], want[128];
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    for (int b = 0; b < 3; b++) {
      int n = hwloc_get_nbobjs_by_type(topo, types[b]);
      hwloc_obj_t obj;
      snprintf(options, sizeof options, "-fsdp_bind %s", binds[b]);
      g = group_with(options);
      TEST_OK(ShardGroupGetLocalRank(g, &lr, &ls));
      obj = hwloc_get_obj_by_type(topo, types[b], (unsigned)spread(lr, ls, n));
      TEST_ASSERT(hwloc_get_cpubind(topo, now, HWLOC_CPUBIND_PROCESS) == 0, "hwloc_get_cpubind failed");
      hwloc_bitmap_list_snprintf(got, sizeof got, now);
      hwloc_bitmap_list_snprintf(want, sizeof want, obj->cpuset);
      TEST_ASSERT(hwloc_bitmap_isequal(now, obj->cpuset),
                  "-fsdp_bind %s: local rank %d of %d is bound to PUs %s, expected %s", binds[b], lr, ls, got, want);
      TEST_OK(ShardGroupDestroy(&g));
    }
    hwloc_bitmap_free(now);
    hwloc_topology_destroy(topo);
  }
  for (int i = 0; used_options[i]; i++) TEST_OK(FSDPOptionsClearValue(used_options[i]));
  TEST_OK(FSDPFinalize());
  return 0;
}

#else

int main(void) { return 77; /* built without hwloc: nothing to test */ }

#endif
