/* topoimpl.h: a node's hardware topology as the ShardGroup needs it. */
#ifndef FSDP_TOPOIMPL_H
#define FSDP_TOPOIMPL_H

#include "fsdpimpl.h"

/* One node's topology: loaded by the node's first rank and handed to the
   others as hwloc XML, so discovery runs once per node. */
typedef struct FSDPTopology_s FSDPTopology;

/* Collective on node_comm (the ranks of one node, the first one loading).
   source: NULL or "" for this machine, else an hwloc XML file or a synthetic
   description; option: what named it, for messages ("-fsdp_topology").  An
   error the first rank meets is raised on every rank of node_comm; the
   others' own errors (importing) are theirs alone. */
FSDPErrorCode FSDPTopologyLoad_Private(MPI_Comm node_comm, const char *option, const char *source, FSDPTopology **topo);
FSDPErrorCode FSDPTopologyDestroy_Private(FSDPTopology **topo);

/* "this machine", "XML file 'x'" or "synthetic 'pack:2 ...'" */
const char *FSDPTopologySource_Private(const FSDPTopology *topo);
/* Whether the topology describes the machine this process runs on: binding needs it. */
bool FSDPTopologyIsThisSystem_Private(const FSDPTopology *topo);
int FSDPTopologyNumGPUs_Private(const FSDPTopology *topo);
int FSDPTopologyNumCores_Private(const FSDPTopology *topo);
/* Bytes of memory in its NUMA nodes; 0 when hwloc does not know. */
uint64_t FSDPTopologyMemory_Private(const FSDPTopology *topo);
/* The i-th GPU, in PCI bus id order. */
const char *FSDPTopologyGPUBusId_Private(const FSDPTopology *topo, int i);
/* Bytes of the i-th GPU's own memory; 0 when the topology does not say (only
   hwloc's CUDA and OpenCL backends do, which the library's own discovery
   leaves out: an XML file from lstopo on a node where hwloc has them carries
   it). */
uint64_t FSDPTopologyGPUMemory_Private(const FSDPTopology *topo, int i);
/* "2 packages, 2 NUMA nodes, 16 cores, 16 PUs, 8 GPUs" */
void FSDPTopologySummary_Private(const FSDPTopology *topo, char *text, size_t len);
/* One synchronized line per GPU: bus id, PCI ids, the CPUs near it. */
FSDPErrorCode FSDPTopologyViewGPUs_Private(const FSDPTopology *topo, FSDPViewer viewer);

/* Collective on host (the ranks of one machine): the CPUs they may run on,
   the union of their affinity masks (a launcher's or Slurm's binding, a
   cgroup's cpuset). */
FSDPErrorCode FSDPNodeCPUs_Private(MPI_Comm host, int *cpus);
/* Collective on comm: the ranks of comm that share this rank's machine, its
   CPUs and memory: those on the same Linux kernel (its boot id), as the
   containers or network namespaces of one host are, though each has its own
   /dev/shm and MPI puts them on nodes of their own.  *machine is host (MPI's
   shared-memory node of this rank) where every rank's machine is its host,
   the usual case, else a new communicator (free it); *hosts (hosts may be
   NULL): the hosts on this machine.  A rank that cannot read a boot id counts as its host. */
FSDPErrorCode FSDPMachineComm_Private(MPI_Comm comm, MPI_Comm host, MPI_Comm *machine, int *hosts);

#define FSDP_PLACEMENT_MAX_GPUS 64

/* Where one rank runs, or will run, on its node. */
typedef struct {
  bool bound;          /* to fewer CPUs than its node has */
  int package, numa;   /* logical index of the package / NUMA node holding its CPUs, or -1 */
  uint64_t close_gpus; /* bound ranks: bit g when GPU g is attached to its CPUs */
  char cpus[128];      /* "PUs 0-7", "PU 3 (planned)" or "unbound" */
} FSDPPlacement;

/* Where this rank runs: with bind FSDP_BIND_NONE, where the launcher bound it;
   otherwise where FSDPTopologyBind_Private will put it: local_rank of
   local_size spread evenly over the objects of the bind type.  Changes nothing. */
FSDPErrorCode FSDPTopologyPlace_Private(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size,
                                        FSDPPlacement *placement);
/* Bind this process there; only for this machine's topology. */
FSDPErrorCode FSDPTopologyBind_Private(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size);

extern const char *const FSDPBindNames[];        /* none core numa package */
extern const char *const FSDPShardDomainNames[]; /* node package numa world */

#endif
