/* Node topology through hwloc: packages, NUMA nodes, cores, PUs and GPUs with
   their CPU locality; CPU binding.  The first rank of a node discovers it and
   broadcasts it as XML; the others import that, which is much cheaper than a
   second discovery (PCI scanning reads sysfs for every device). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topoimpl.h"

#if FSDP_HAVE_HWLOC
#include <hwloc.h>
#endif

const char *const FSDPBindNames[] = {"none", "core", "numa", "package", NULL};
const char *const FSDPShardDomainNames[] = {"node", "package", "numa", "world", NULL};

typedef struct {
  char busid[16]; /* dddd:bb:dd.f */
  unsigned vendor, device;
  char near[160];  /* "package 0, PUs 0-7" */
  uint64_t memory; /* bytes; 0: unknown */
#if FSDP_HAVE_HWLOC
  hwloc_bitmap_t cpuset;
#endif
} GPUInfo;

struct FSDPTopology_s {
  char source[320];
  bool this_system;
  int npackages, nnuma, ncores, npus;
  uint64_t memory;
  int ngpus;
  GPUInfo *gpus; /* in PCI bus id order */
#if FSDP_HAVE_HWLOC
  hwloc_topology_t topology;
#endif
};

const char *FSDPTopologySource_Private(const FSDPTopology *topo) { return topo->source; }
bool FSDPTopologyIsThisSystem_Private(const FSDPTopology *topo) { return topo->this_system; }
int FSDPTopologyNumGPUs_Private(const FSDPTopology *topo) { return topo->ngpus; }
int FSDPTopologyNumCores_Private(const FSDPTopology *topo) { return topo->ncores; }
uint64_t FSDPTopologyMemory_Private(const FSDPTopology *topo) { return topo->memory; }
const char *FSDPTopologyGPUBusId_Private(const FSDPTopology *topo, int i) { return topo->gpus[i].busid; }
uint64_t FSDPTopologyGPUMemory_Private(const FSDPTopology *topo, int i) { return topo->gpus[i].memory; }

void FSDPTopologySummary_Private(const FSDPTopology *topo, char *text, size_t len)
{
#if FSDP_HAVE_HWLOC
#define plural(n) ((n) == 1 ? "" : "s")
  snprintf(text, len, "%d package%s, %d NUMA node%s, %d core%s, %d PU%s, %d GPU%s", topo->npackages,
           plural(topo->npackages), topo->nnuma, plural(topo->nnuma), topo->ncores, plural(topo->ncores), topo->npus,
           plural(topo->npus), topo->ngpus, plural(topo->ngpus));
#undef plural
#else
  (void)topo;
  snprintf(text, len, "topology unknown (libfsdp built without hwloc)");
#endif
}

FSDPErrorCode FSDPTopologyViewGPUs_Private(const FSDPTopology *topo, FSDPViewer viewer)
{
  for (int g = 0; g < topo->ngpus; g++) {
    char memory[48] = "";
    if (topo->gpus[g].memory) {
      char b[32];
      FSDPFormatBytes(b, sizeof b, (double)topo->gpus[g].memory);
      snprintf(memory, sizeof memory, ", %s of memory", b);
    }
    FSDPCall(FSDPViewerASCIISynchronizedPrintf(viewer, "GPU %d: %s [%04x:%04x] near %s%s\n", g, topo->gpus[g].busid,
                                               topo->gpus[g].vendor, topo->gpus[g].device, topo->gpus[g].near, memory));
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPTopologyDestroy_Private(FSDPTopology **topo)
{
  FSDPTopology *t = *topo;
  if (!t) return FSDP_SUCCESS;
#if FSDP_HAVE_HWLOC
  for (int g = 0; g < t->ngpus; g++) hwloc_bitmap_free(t->gpus[g].cpuset);
  if (t->topology) hwloc_topology_destroy(t->topology);
#endif
  FSDPCall(FSDPFree(&t->gpus));
  FSDPCall(FSDPFree(topo));
  return FSDP_SUCCESS;
}

#if !FSDP_HAVE_HWLOC

FSDPErrorCode FSDPTopologyLoad_Private(MPI_Comm node_comm, const char *option, const char *source, FSDPTopology **topo)
{
  (void)node_comm;
  *topo = NULL;
  FSDPCheck(!source || !source[0], MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "%s '%s' needs hwloc, and this libfsdp was built without it", option, source);
  FSDPCall(FSDPCalloc(1, sizeof **topo, FSDP_MEM_OTHER, topo));
  snprintf((*topo)->source, sizeof(*topo)->source, "unknown (no hwloc)");
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPTopologyPlace_Private(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size,
                                        FSDPPlacement *placement)
{
  (void)topo;
  (void)local_rank;
  (void)local_size;
  FSDPCheck(bind == FSDP_BIND_NONE, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "-fsdp_bind %s needs hwloc, and this libfsdp was built without it", FSDPBindNames[bind]);
  memset(placement, 0, sizeof *placement);
  placement->package = placement->numa = -1;
  snprintf(placement->cpus, sizeof placement->cpus, "unknown");
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPTopologyBind_Private(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size)
{
  (void)topo;
  (void)local_rank;
  (void)local_size;
  FSDPCheck(bind == FSDP_BIND_NONE, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "-fsdp_bind %s needs hwloc, and this libfsdp was built without it", FSDPBindNames[bind]);
  return FSDP_SUCCESS;
}

#else

/* A GPU's memory, from an OS device of its own that hwloc's CUDA or OpenCL
   backend made (KiB in both); 0 where there is none. */
static uint64_t gpu_memory(hwloc_obj_t pci)
{
#if HWLOC_API_VERSION >= 0x00020000
  static const char *const names[] = {"CUDAGlobalMemorySize", "OpenCLGlobalMemorySize"};
  for (hwloc_obj_t o = pci->io_first_child; o; o = o->next_sibling) {
    if (o->type != HWLOC_OBJ_OS_DEVICE) continue;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      const char *kib = hwloc_obj_get_info_by_name(o, names[i]);
      unsigned long long v = kib ? strtoull(kib, NULL, 10) : 0;
      if (v > 0) return (uint64_t)v << 10;
    }
  }
#else
  (void)pci;
#endif
  return 0;
}

/* GPUs are PCI display controllers (class 03xx) or processing accelerators
   (12xx, as AMD's MI300 reports itself) from NVIDIA or AMD: servers also
   carry a small VGA chip for the console (ASPEED, Matrox), which is not one. */
static bool is_gpu(hwloc_obj_t pci)
{
  unsigned cls = pci->attr->pcidev.class_id >> 8, vendor = pci->attr->pcidev.vendor_id;
  return (cls == 0x03 || cls == 0x12) && (vendor == 0x10de || vendor == 0x1002);
}

static int compare_busid(const void *a, const void *b)
{
  return strcmp(((const GPUInfo *)a)->busid, ((const GPUInfo *)b)->busid);
}

/* The logical index of the one object of `type` whose CPUs contain `set`, or -1. */
static int covering_index(hwloc_topology_t t, hwloc_obj_type_t type, hwloc_const_bitmap_t set)
{
  int n = hwloc_get_nbobjs_by_type(t, type);
  if (hwloc_bitmap_iszero(set)) return -1;
  for (int i = 0; i < n; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, type, (unsigned)i);
    if (o->cpuset && hwloc_bitmap_isincluded(set, o->cpuset)) return i;
  }
  return -1;
}

static FSDPErrorCode find_gpus(FSDPTopology *topo)
{
  hwloc_obj_t pci = NULL;
  int n = 0;

  while ((pci = hwloc_get_next_pcidev(topo->topology, pci)))
    if (is_gpu(pci)) n++;
  if (!n) return FSDP_SUCCESS;
  FSDPCall(FSDPCalloc((size_t)n, sizeof *topo->gpus, FSDP_MEM_OTHER, &topo->gpus));
  while ((pci = hwloc_get_next_pcidev(topo->topology, pci))) {
    GPUInfo *g;
    hwloc_obj_t near;
    char cpus[96];
    int package;
    if (!is_gpu(pci)) continue;
    g = &topo->gpus[topo->ngpus++];
    snprintf(g->busid, sizeof g->busid, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
    g->vendor = pci->attr->pcidev.vendor_id;
    g->device = pci->attr->pcidev.device_id;
    g->memory = gpu_memory(pci);
    near = hwloc_get_non_io_ancestor_obj(topo->topology, pci);
    g->cpuset =
        hwloc_bitmap_dup(near && near->cpuset ? near->cpuset : hwloc_topology_get_topology_cpuset(topo->topology));
    FSDPCheck(g->cpuset, MPI_COMM_SELF, FSDP_ERR_MEM, "out of memory copying a cpuset");
    hwloc_bitmap_list_snprintf(cpus, sizeof cpus, g->cpuset);
    package = covering_index(topo->topology, HWLOC_OBJ_PACKAGE, g->cpuset);
    if (package >= 0) snprintf(g->near, sizeof g->near, "package %d (PUs %s)", package, cpus);
    else snprintf(g->near, sizeof g->near, "PUs %s", cpus);
  }
  /* Numbered by PCI bus id: the order nvidia-smi, NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID use. */
  qsort(topo->gpus, (size_t)topo->ngpus, sizeof *topo->gpus, compare_busid);
  return FSDP_SUCCESS;
}

static FSDPErrorCode init_hwloc(hwloc_topology_t *t)
{
  if (hwloc_topology_init(t) != 0) {
    *t = NULL;
    FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_HWLOC, "hwloc_topology_init failed: %s", strerror(errno));
  }
  /* PCI devices are how GPUs are found; bridges and unimportant devices are noise. */
  hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
  /* The OpenGL plugin probes X displays and the OpenCL and CUDA plugins create
     device contexts: slow, and a context on GPU 0 costs memory on every node. */
  hwloc_topology_set_components(*t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  hwloc_topology_set_components(*t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
  hwloc_topology_set_components(*t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "cuda");
#endif
  return FSDP_SUCCESS;
}

/* The first rank of a node: discover (or read) the topology and export it as XML. */
static FSDPErrorCode discover(const char *option, const char *source, FSDPTopology *topo, char **xml, int *xmllen)
{
  struct stat st;
  bool loaded = false;

  FSDPCall(init_hwloc(&topo->topology));
  if (!source || !source[0]) {
    snprintf(topo->source, sizeof topo->source, "this machine");
  } else if (stat(source, &st) == 0) {
    FSDPCheck(S_ISREG(st.st_mode), MPI_COMM_SELF, FSDP_ERR_ARG, "%s '%s' is not a regular file", option, source);
    FSDPCheck(access(source, R_OK) == 0, MPI_COMM_SELF, FSDP_ERR_IO, "%s '%s' cannot be read: %s", option, source,
              strerror(errno));
    snprintf(topo->source, sizeof topo->source, "XML file '%s'", source);
    /* hwloc's libxml2 backend rejects a malformed file when it is set, its own
       minimal parser only at the load: one message for both.  Their errno says
       nothing more than EINVAL, or whatever libxml2 left behind. */
    loaded = hwloc_topology_set_xml(topo->topology, source) == 0 && hwloc_topology_load(topo->topology) == 0;
    FSDPCheck(loaded, MPI_COMM_SELF, FSDP_ERR_HWLOC,
              "%s '%s': hwloc cannot read it as an XML topology: not well-formed XML, or not hwloc's "
              "format (HWLOC_XML_VERBOSE=1 prints hwloc's reason)",
              option, source);
  } else {
    int err = errno;
    /* Not a file: maybe a synthetic description like "pack:2 numa:1 core:8 pu:1". */
    FSDPCheck(hwloc_topology_set_synthetic(topo->topology, source) == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
              "%s '%s': no such file (%s), and not an hwloc synthetic description like "
              "'pack:2 numa:1 core:8 pu:1' either",
              option, source, strerror(err));
    snprintf(topo->source, sizeof topo->source, "synthetic '%s'", source);
  }
  FSDPCheck(loaded || hwloc_topology_load(topo->topology) == 0, MPI_COMM_SELF, FSDP_ERR_HWLOC,
            "hwloc could not load the topology of %s: %s%s", topo->source, strerror(errno),
            getenv("HWLOC_XMLFILE") ? " (HWLOC_XMLFILE is set: is it a malformed XML file?)" : "");
  if ((!source || !source[0]) && !hwloc_topology_is_thissystem(topo->topology)) {
    /* hwloc read HWLOC_XMLFILE or HWLOC_SYNTHETIC instead of this machine. */
    const char *xmlfile = getenv("HWLOC_XMLFILE"), *synthetic = getenv("HWLOC_SYNTHETIC");
    if (xmlfile && xmlfile[0]) snprintf(topo->source, sizeof topo->source, "XML file '%s' (HWLOC_XMLFILE)", xmlfile);
    else if (synthetic && synthetic[0])
      snprintf(topo->source, sizeof topo->source, "synthetic '%s' (HWLOC_SYNTHETIC)", synthetic);
    else snprintf(topo->source, sizeof topo->source, "not this machine (HWLOC_THISSYSTEM=0)");
  }
  FSDPCheck(hwloc_topology_export_xmlbuffer(topo->topology, xml, xmllen, 0) == 0, MPI_COMM_SELF, FSDP_ERR_HWLOC,
            "hwloc could not export the topology of %s as XML: %s", topo->source, strerror(errno));
  return FSDP_SUCCESS;
}

/* The other ranks of the node: import what the first one discovered. */
static FSDPErrorCode import(const char *xml, int xmllen, bool this_system, FSDPTopology *topo)
{
  FSDPCall(init_hwloc(&topo->topology));
  FSDPCheck(hwloc_topology_set_xmlbuffer(topo->topology, xml, xmllen) == 0, MPI_COMM_SELF, FSDP_ERR_HWLOC,
            "hwloc rejected the topology broadcast by the node's first rank: %s", strerror(errno));
  /* XML normally means another machine; this one is ours, so binding may use it. */
  if (this_system) hwloc_topology_set_flags(topo->topology, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
  FSDPCheck(hwloc_topology_load(topo->topology) == 0, MPI_COMM_SELF, FSDP_ERR_HWLOC,
            "hwloc could not load the topology broadcast by the node's first rank: %s", strerror(errno));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPTopologyLoad_Private(MPI_Comm node_comm, const char *option, const char *source, FSDPTopology **topo)
{
  FSDPTopology *t;
  FSDPLogEvent event;
  FSDPErrorCode ierr = FSDP_SUCCESS;
  char *xml = NULL;
  int rank;
  /* What the first rank tells the others, in one broadcast. */
  struct {
    int code, xmllen, this_system;
    char source[sizeof t->source];
  } header = {0};

  *topo = NULL;
  FSDPCallMPI(MPI_Comm_rank(node_comm, &rank));
  FSDPCall(FSDPLogEventRegister("TopologyDiscover", &event));
  FSDPCall(FSDPCalloc(1, sizeof *t, FSDP_MEM_OTHER, &t));
  if (rank == 0) {
    fenv_t fpenv;
    FSDPCall(FSDPLogEventBegin(event));
    /* hwloc's XML export starts libxml2, which computes 0/0 and 1/0: none of it reaches the caller. */
    FSDPFPEnter_Private(&fpenv);
    ierr = discover(option, source, t, &xml, &header.xmllen);
    FSDPFPLeave_Private(&fpenv);
    FSDPCall(FSDPLogEventEnd(event, header.xmllen));
    header.code = (int)ierr;
    header.this_system = ierr == FSDP_SUCCESS && hwloc_topology_is_thissystem(t->topology);
    memcpy(header.source, t->source, sizeof header.source);
  }
  FSDPCallMPI(MPI_Bcast(&header, (int)sizeof header, MPI_BYTE, 0, node_comm));
  if (header.code != FSDP_SUCCESS) {
    /* Only the first rank knows why: it tells the others. */
    ierr = FSDPErrorAgree_Private(node_comm, ierr);
    goto failed;
  }
  /* Every rank must take part in the broadcast: a rank that cannot hold a few
     kilobytes of XML takes the job down rather than leave the others waiting. */
  if (rank != 0) FSDPCallAbort(node_comm, FSDPMalloc((size_t)header.xmllen, FSDP_MEM_OTHER, &xml));
  FSDPCallMPI(MPI_Bcast(xml, header.xmllen, MPI_CHAR, 0, node_comm));
  if (rank == 0) hwloc_free_xmlbuffer(t->topology, xml);
  else {
    fenv_t fpenv;
    FSDPFPEnter_Private(&fpenv); /* the import starts libxml2 too */
    ierr = import(xml, header.xmllen, header.this_system, t);
    FSDPFPLeave_Private(&fpenv);
    FSDPCall(FSDPFree(&xml));
    if (ierr) goto failed;
    memcpy(t->source, header.source, sizeof t->source);
  }
  t->this_system = header.this_system;
  t->npackages = hwloc_get_nbobjs_by_type(t->topology, HWLOC_OBJ_PACKAGE);
  t->nnuma = hwloc_get_nbobjs_by_type(t->topology, HWLOC_OBJ_NUMANODE);
  t->ncores = hwloc_get_nbobjs_by_type(t->topology, HWLOC_OBJ_CORE);
  t->npus = hwloc_get_nbobjs_by_type(t->topology, HWLOC_OBJ_PU);
  t->memory = hwloc_get_root_obj(t->topology)->total_memory;
  if ((ierr = find_gpus(t))) goto failed;
  *topo = t;
  return FSDP_SUCCESS;

failed:
  (void)FSDPTopologyDestroy_Private(&t);
  return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
}

static hwloc_obj_type_t bind_type(FSDPBind bind)
{
  switch (bind) {
  case FSDP_BIND_CORE: return HWLOC_OBJ_CORE;
  case FSDP_BIND_NUMA: return HWLOC_OBJ_NUMANODE;
  default: return HWLOC_OBJ_PACKAGE;
  }
}

/* Spread local ranks evenly over n objects, consecutive ranks together. */
static int spread(int local_rank, int local_size, int n) { return (int)((int64_t)local_rank * n / local_size); }

/* The CPUs -fsdp_bind gives local rank `local_rank` of `local_size`. */
static FSDPErrorCode bind_target(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size,
                                 hwloc_bitmap_t set)
{
  hwloc_obj_type_t type = bind_type(bind);
  int n = hwloc_get_nbobjs_by_type(topo->topology, type);
  FSDPCheck(n > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "-fsdp_bind %s: the topology of %s has no %s objects",
            FSDPBindNames[bind], topo->source, hwloc_obj_type_string(type));
  hwloc_bitmap_copy(set,
                    hwloc_get_obj_by_type(topo->topology, type, (unsigned)spread(local_rank, local_size, n))->cpuset);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPTopologyPlace_Private(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size,
                                        FSDPPlacement *p)
{
  hwloc_topology_t t = topo->topology;
  hwloc_const_bitmap_t all = hwloc_topology_get_topology_cpuset(t);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  FSDPErrorCode ierr = FSDP_SUCCESS;
  char list[96];

  FSDPCheck(set, MPI_COMM_SELF, FSDP_ERR_MEM, "out of memory allocating a cpuset");
  memset(p, 0, sizeof *p);
  if (bind != FSDP_BIND_NONE) ierr = bind_target(topo, bind, local_rank, local_size, set);
  else if (!topo->this_system || hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(set, all); /* another machine's topology: nothing is bound on it */
  if (!ierr) {
    p->bound = !hwloc_bitmap_isincluded(all, set);
    /* Unbound ranks still run on a package when the node has only one. */
    p->package = covering_index(t, HWLOC_OBJ_PACKAGE, set);
    p->numa = covering_index(t, HWLOC_OBJ_NUMANODE, set);
    if (p->bound) {
      hwloc_bitmap_list_snprintf(list, sizeof list, set);
      snprintf(p->cpus, sizeof p->cpus, "PU%s %s%s", hwloc_bitmap_weight(set) == 1 ? "" : "s", list,
               bind != FSDP_BIND_NONE && !topo->this_system ? " (planned)" : "");
      for (int g = 0; g < topo->ngpus && g < FSDP_PLACEMENT_MAX_GPUS; g++)
        if (hwloc_bitmap_intersects(set, topo->gpus[g].cpuset)) p->close_gpus |= UINT64_C(1) << g;
    } else {
      snprintf(p->cpus, sizeof p->cpus, "unbound");
    }
  }
  hwloc_bitmap_free(set);
  FSDPCall(ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPTopologyBind_Private(const FSDPTopology *topo, FSDPBind bind, int local_rank, int local_size)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  FSDPErrorCode ierr;
  char list[96];

  FSDPCheck(set, MPI_COMM_SELF, FSDP_ERR_MEM, "out of memory allocating a cpuset");
  if (!(ierr = bind_target(topo, bind, local_rank, local_size, set)) &&
      hwloc_set_cpubind(topo->topology, set, HWLOC_CPUBIND_PROCESS) != 0) {
    hwloc_bitmap_list_snprintf(list, sizeof list, set);
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_HWLOC,
                     "-fsdp_bind %s: binding local rank %d to PUs %s failed: %s", FSDPBindNames[bind], local_rank, list,
                     strerror(errno));
  }
  hwloc_bitmap_free(set);
  FSDPCall(ierr);
  return FSDP_SUCCESS;
}

#endif
