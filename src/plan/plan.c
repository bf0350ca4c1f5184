/* FSDPPlan: the layout chosen before the job runs (doc/fsdp-plan.md).  For
   each candidate (strategy, F, wrapping, micro-batches, activation
   checkpointing) it builds the model's units on MPI_COMM_SELF, as
   FSDPModelSetUp would, without setting anything up, and asks the memory
   plan's own formula (FSDPMemorySizes_Private) what SetUp would allocate;
   the optimizer's state and the activations come from the optimizer's and
   the model's own rules.  Step times are a model on top: the GEMMs' flops
   at the measured rate, plus the bytes of the paper's collectives at the
   link rates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../nn/nnimpl.h"
#include "../optim/optimimpl.h"
#include "../topo/topoimpl.h"

#define MAX_ACCUM 8

/* The collectives of shard groups of F consecutive ranks in node order (as
   ShardGroup lays them out) and of their W/F replicas, timed with every group
   at once, each at PROBE_SIZES sizes: seconds[kind][i] when each rank puts
   bytes[i] in (seconds[kind][0] < 0: that kind does not run at this F). */
#define PROBE_SIZES 3
typedef struct {
  int factor;
  double bytes[PROBE_SIZES];
  double seconds[COMM_NUM_KINDS][PROBE_SIZES];
  bool shm; /* the all-gathers and reduce-scatters timed in the node's shared memory, as the job runs them */
} GroupTiming;

/* What a context whose shard group lies within a node runs in the node's
   shared memory (start_shm, the stream's submit): reduce-scatters with
   -fsdp_shm_reduce and fp32 reductions, all-gathers too with fp32
   parameters, into views with -fsdp_shm_views; nothing on a GPU. */
typedef struct {
  bool kind[COMM_NUM_KINDS];
  bool views;
} ShmPaths;

struct FSDPPlan_s {
  MPI_Comm comm;
  char *spec;
  int nodes, ranks_per_node;
  const char *shape_from; /* where nodes and ranks_per_node came from */
  char topology[400];     /* "" or the topology whose cores set ranks_per_node: "XML file 'x' (... 16 cores ...)" */
  char shape_text[480];
  int64_t batch;
  size_t budget;
  bool budget_auto;                  /* the node's memory shared by its ranks, or on GPUs a GPU's */
  size_t node_memory;                /* the node's memory, bytes; 0: unknown */
  int topology_cores, topology_gpus; /* of the last topology set; 0: none */
  size_t gpu_memory;                 /* bytes of its smallest GPU; 0: unknown */
  bool on_gpu;                       /* -fsdp_device is a GPU's, as of the last SetUp */
  bool mpich;                        /* the MPI is MPICH: its default algorithms place the bytes (count_bytes) */
  const char *node_from;             /* "this node's" or "the topology's" */
  char budget_from[160];
  FSDPOptimizerType opt_type;
  double momentum;
  double flops, intra, inter, latency; /* 0: unknown */
  const char *rates_from;
  bool setup;
  int64_t numel;    /* the model's parameters */
  double row_flops; /* one row's forward */
  /* The model's own step, timed by FSDPPlanProbe on every rank at once
     (model_rows[1] == 0: not timed): forward, loss and backward of
     model_rows[i] rows took model_seconds[i]; the optimizer's step over all
     its parameters, opt_seconds. */
  int64_t model_rows[2];
  double model_seconds[2], opt_seconds;
  enum {
    MODEL_NOT_PROBED, /* no probe of this model yet */
    MODEL_TIMED,      /* on the host */
    MODEL_TIMED_GPU,  /* on the ranks' GPUs (-fsdp_device) */
    MODEL_TOO_LARGE,  /* not timed: its state passes the probe's room */
    MODEL_NO_GPU      /* not timed: -fsdp_device is a GPU's, but some rank saw none */
  } model_timing;
  /* The collectives of each shard group size, timed by FSDPPlanProbe on a
     job of timed_nodes x timed_rpn ranks (ngroups == 0: none timed); they
     stand for the candidates' communication on a job of that shape. */
  GroupTiming *groups;
  int ngroups, timed_nodes, timed_rpn;
  FSDPPlanCandidate *cand;
  int ncand;
};

#define CHECK_PLAN(p) FSDPCheck(p, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: plan must not be NULL", __func__)
#define CHECK_PLAN_SETUP(p)                                                                                            \
  do {                                                                                                                 \
    CHECK_PLAN(p);                                                                                                     \
    FSDPCheck((p)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the planner is not set up: call FSDPPlanSetUp first",    \
              __func__);                                                                                               \
  } while (0)

static const char *const strategy_option[] = {"full", "grad_op", "none", "hybrid", "hybrid_zero2"};

/* The first whole number of a Slurm variable ("4(x2)" and "4,2" give 4); 0 when unset or not a number. */
static int slurm_int(const char *name)
{
  const char *v = getenv(name);
  char *end;
  long n;
  if (!v || !*v) return 0;
  n = strtol(v, &end, 10);
  return end != v && n > 0 && n < 1 << 24 ? (int)n : 0;
}

/* W = nodes x ranks_per_node must be an int, and one MPI can number. */
static FSDPErrorCode check_shape(const char *from, int64_t nodes, int64_t ranks_per_node)
{
  FSDPCheck(nodes > 0 && ranks_per_node > 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "%s: %lld nodes of %lld ranks: both must be positive", from, (long long)nodes, (long long)ranks_per_node);
  FSDPCheck(nodes * ranks_per_node <= 1 << 24, MPI_COMM_SELF, FSDP_ERR_ARG,
            "%s: %lld nodes of %lld ranks is more ranks than MPI numbers", from, (long long)nodes,
            (long long)ranks_per_node);
  return FSDP_SUCCESS;
}

/* The job's shape: Slurm's allocation when the planner runs alone inside one, else comm's. */
static FSDPErrorCode find_shape(FSDPPlan plan)
{
  MPI_Comm node;
  int size, node_rank, node_size, counts[2];
  int slurm_nodes = slurm_int("SLURM_JOB_NUM_NODES");
  int slurm_ranks = slurm_int("SLURM_NTASKS_PER_NODE");
  if (!slurm_ranks) slurm_ranks = slurm_int("SLURM_TASKS_PER_NODE");

  FSDPCallMPI(MPI_Comm_size(plan->comm, &size));
  FSDPCallMPI(MPI_Comm_split_type(plan->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  FSDPCallMPI(MPI_Comm_rank(node, &node_rank));
  FSDPCallMPI(MPI_Comm_size(node, &node_size));
  FSDPCallMPI(MPI_Comm_free(&node));
  counts[0] = node_rank == 0;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, counts, 1, MPI_INT, MPI_SUM, plan->comm));
  counts[1] = node_size;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, &counts[1], 1, MPI_INT, MPI_MAX, plan->comm));
  if (size == 1 && slurm_nodes && slurm_ranks) {
    FSDPCall(check_shape("FSDPPlanCreate: the Slurm allocation (SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE)",
                         slurm_nodes, slurm_ranks));
    plan->nodes = slurm_nodes;
    plan->ranks_per_node = slurm_ranks;
    plan->shape_from = "the Slurm allocation (SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE)";
  } else {
    plan->nodes = counts[0];
    plan->ranks_per_node = counts[1];
    plan->shape_from = "the planner's communicator";
  }
  return FSDP_SUCCESS;
}

/* The budget of -fsdp_plan_memory auto: the node's memory shared by its
   ranks; on GPUs, a GPU's memory shared by the ranks on it (a rank each,
   unless the node has more ranks than GPUs). */
static void default_budget(FSDPPlan plan)
{
  char a[32];
  plan->budget_auto = true;
  plan->budget = 0;
  if (plan->on_gpu) {
    int gpus = plan->topology_gpus, share = gpus > 0 ? (plan->ranks_per_node + gpus - 1) / gpus : 1;
    if (!plan->gpu_memory) {
      snprintf(plan->budget_from, sizeof plan->budget_from, "a GPU's memory is unknown: %s",
               gpus > 0 ? "the topology does not give it; lstopo writes it where hwloc has its CUDA backend"
               : plan->topology_cores ? "the topology has no GPUs"
                                      : "a topology (FSDPPlanSetTopology, an lstopo XML file of a GPU node) gives it");
      return;
    }
    plan->budget = plan->gpu_memory / (size_t)share;
    FSDPFormatBytes(a, sizeof a, (double)plan->gpu_memory);
    snprintf(plan->budget_from, sizeof plan->budget_from, "the topology's GPUs: %s each, %d rank%s on each", a, share,
             share == 1 ? "" : "s");
    return;
  }
  snprintf(plan->budget_from, sizeof plan->budget_from, "%s memory is unknown", plan->node_from);
  if (!plan->node_memory) return;
  plan->budget = plan->node_memory / (size_t)plan->ranks_per_node;
  FSDPFormatBytes(a, sizeof a, (double)plan->node_memory);
  snprintf(plan->budget_from, sizeof plan->budget_from, "%s %s of physical memory shared by %d rank%s", plan->node_from,
           a, plan->ranks_per_node, plan->ranks_per_node == 1 ? "" : "s");
}

static void this_node_memory(FSDPPlan plan)
{
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  plan->node_memory = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
  plan->node_from = "this node's";
}

FSDPErrorCode FSDPPlanCreate(MPI_Comm comm, FSDPPlan *plan)
{
  FSDPPlan p = NULL;
  FSDPErrorCode ierr;
  FSDPCheck(plan, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanCreate: plan must not be NULL");
  *plan = NULL;
  FSDPCall(FSDPCheckCreateComm_Private(comm, __func__));
  FSDPCollective(comm);
  /* Agreed: a rank that cannot allocate must not leave the others in find_shape's collectives. */
  if ((ierr = FSDPErrorAgree_Private(comm, FSDPCalloc(1, sizeof *p, FSDP_MEM_OTHER, &p)))) {
    (void)FSDPFree(&p);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  p->comm = comm;
  p->opt_type = FSDP_OPTIMIZER_ADAMW;
  p->rates_from = "none";
  {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    p->mpich = !MPI_Get_library_version(lib, &len) && !strncmp(lib, "MPICH", 5);
  }
  if ((ierr = find_shape(p))) {
    (void)FSDPFree(&p);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  this_node_memory(p);
  default_budget(p);
  *plan = p;
  return FSDP_SUCCESS;
}

/* A model on a context of one rank that is never set up: its units, its sizes, its activations. */
static FSDPErrorCode open_model(const char *spec, FSDPContext *ctx, FSDPModel *model)
{
  FSDPErrorCode ierr;
  *model = NULL;
  FSDPCall(FSDPContextCreate(MPI_COMM_SELF, ctx));
  ierr = FSDPModelCreate(*ctx, spec, model);
  if (ierr) {
    (void)FSDPContextDestroy(ctx);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode close_model(FSDPContext *ctx, FSDPModel *model)
{
  FSDPErrorCode ierr = FSDPModelDestroy(model), e = FSDPContextDestroy(ctx);
  return ierr ? ierr : e;
}

FSDPErrorCode FSDPPlanSetModel(FSDPPlan plan, const char *spec)
{
  FSDPContext ctx;
  FSDPModel model;
  CHECK_PLAN(plan);
  FSDPCheck(spec, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanSetModel: spec must not be NULL");
  FSDPCall(open_model(spec, &ctx, &model)); /* parsed now: a bad spec is this call's error */
  FSDPCall(close_model(&ctx, &model));
  FSDPCall(FSDPFree(&plan->spec));
  FSDPCall(FSDPMalloc(strlen(spec) + 1, FSDP_MEM_OTHER, &plan->spec));
  memcpy(plan->spec, spec, strlen(spec) + 1);
  plan->model_rows[0] = plan->model_rows[1] = 0; /* a timing was of the model before */
  plan->model_timing = MODEL_NOT_PROBED;
  plan->setup = false;
  return FSDP_SUCCESS;
}

/* The ranks per node are the job's own from now on: not the topology's cores (or GPUs). */
static void forget_topology(FSDPPlan plan)
{
  plan->topology[0] = '\0';
  plan->shape_from = "FSDPPlanSetJob";
}

FSDPErrorCode FSDPPlanSetJob(FSDPPlan plan, int nodes, int ranks_per_node)
{
  CHECK_PLAN(plan);
  FSDPCall(check_shape("FSDPPlanSetJob", nodes, ranks_per_node));
  if (plan->topology[0] && ranks_per_node == plan->ranks_per_node) {
    snprintf(plan->shape_text, sizeof plan->shape_text, "FSDPPlanSetJob, a rank per core of the topology of %s",
             plan->topology);
    plan->shape_from = plan->shape_text;
  } else forget_topology(plan);
  plan->nodes = nodes;
  plan->ranks_per_node = ranks_per_node;
  if (plan->budget_auto) default_budget(plan); /* the node's memory, shared by the new number of ranks */
  plan->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetTopology(FSDPPlan plan, const char *source)
{
  FSDPTopology *topo;
  char summary[160], text[sizeof((FSDPPlan)0)->topology];
  int cores, gpus;
  uint64_t memory, gpu_memory = 0;
  CHECK_PLAN(plan);
  FSDPCheck(source && source[0], MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPPlanSetTopology: source must name an hwloc XML file or a synthetic description");
  FSDPCall(FSDPTopologyLoad_Private(MPI_COMM_SELF, "FSDPPlanSetTopology", source, &topo));
  cores = FSDPTopologyNumCores_Private(topo);
  memory = FSDPTopologyMemory_Private(topo);
  gpus = FSDPTopologyNumGPUs_Private(topo);
  for (int i = 0; i < gpus; i++) { /* the smallest, or unknown if any is */
    uint64_t m = FSDPTopologyGPUMemory_Private(topo, i);
    if (i == 0 || m < gpu_memory) gpu_memory = m;
  }
  FSDPTopologySummary_Private(topo, summary, sizeof summary);
  snprintf(text, sizeof text, "%s (%s)", FSDPTopologySource_Private(topo), summary);
  FSDPCall(FSDPTopologyDestroy_Private(&topo));
  FSDPCheck(cores > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanSetTopology: the topology of %s has no cores", text);
  FSDPCall(check_shape("FSDPPlanSetTopology", plan->nodes, cores));
  memcpy(plan->topology, text, sizeof text); /* only once it is taken */
  snprintf(plan->shape_text, sizeof plan->shape_text, "a rank per core of the topology of %s", plan->topology);
  plan->shape_from = plan->shape_text;
  plan->ranks_per_node = cores;
  plan->node_memory = (size_t)memory;
  plan->node_from = "the topology's";
  plan->topology_cores = cores;
  plan->topology_gpus = gpus;
  plan->gpu_memory = (size_t)gpu_memory;
  if (plan->budget_auto) default_budget(plan);
  plan->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetBatch(FSDPPlan plan, int64_t batch)
{
  CHECK_PLAN(plan);
  FSDPCheck(batch > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanSetBatch: the batch is %lld rows; it must be positive",
            (long long)batch);
  plan->batch = batch;
  plan->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetMemoryBudget(FSDPPlan plan, size_t bytes)
{
  CHECK_PLAN(plan);
  plan->budget = bytes;
  plan->budget_auto = false;
  snprintf(plan->budget_from, sizeof plan->budget_from, "given");
  plan->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetOptimizer(FSDPPlan plan, FSDPOptimizerType type, double momentum)
{
  CHECK_PLAN(plan);
  FSDPCheck(type == FSDP_OPTIMIZER_SGD || type == FSDP_OPTIMIZER_ADAMW, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPPlanSetOptimizer: %d is not an FSDPOptimizerType", (int)type);
  FSDPCheck(momentum >= 0 && isfinite(momentum), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPPlanSetOptimizer: momentum %g must be a finite number >= 0", momentum);
  if (type != plan->opt_type || momentum != plan->momentum)
    plan->model_rows[0] = plan->model_rows[1] = 0; /* the probe timed the other optimizer */
  plan->opt_type = type;
  plan->momentum = momentum;
  plan->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetRates(FSDPPlan plan, double flops, double intra, double inter, double latency)
{
  const double r[4] = {flops, intra, inter, latency};
  static const char *const names[4] = {"flops", "intra", "inter", "latency"};
  CHECK_PLAN(plan);
  for (int i = 0; i < 4; i++)
    FSDPCheck(r[i] >= 0 && isfinite(r[i]), MPI_COMM_SELF, FSDP_ERR_ARG,
              "FSDPPlanSetRates: %s is %g; a rate is a finite number >= 0 (0 leaves it as it was)", names[i], r[i]);
  if (flops > 0) plan->flops = flops;
  if (intra > 0) plan->intra = intra;
  if (inter > 0) plan->inter = inter;
  if (latency > 0) plan->latency = latency;
  if (flops > 0 || intra > 0 || inter > 0 || latency > 0) plan->rates_from = "given";
  plan->setup = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanGetRates(FSDPPlan plan, double *flops, double *intra, double *inter, double *latency)
{
  CHECK_PLAN(plan);
  if (flops) *flops = plan->flops;
  if (intra) *intra = plan->intra;
  if (inter) *inter = plan->inter;
  if (latency) *latency = plan->latency;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetFromOptions(FSDPPlan plan)
{
  static const char *const optimizers[] = {"sgd", "adamw", NULL};
  char text[4096];
  int64_t nodes, ranks, batch;
  double momentum, r[4];
  int type;
  bool set, any;

  CHECK_PLAN(plan);
  FSDPCall(
      FSDPOptionsGetString("-fsdp_plan_model", "FSDPPlan: the model, as -model spec", "", text, sizeof text, &set));
  if (set) FSDPCall(FSDPPlanSetModel(plan, text));
  FSDPCall(
      FSDPOptionsGetString("-fsdp_plan_topology",
                           "FSDPPlan: an hwloc XML file or synthetic description of a node: a rank per core (per GPU "
                           "with -fsdp_device cuda), the auto budget from its memory (a GPU's)",
                           "", text, sizeof text, &set));
  if (set) FSDPCall(FSDPPlanSetTopology(plan, text));
  FSDPCall(FSDPOptionsGetInt("-fsdp_plan_nodes", "FSDPPlan: nodes of the job", plan->nodes, 1, 1 << 24, &nodes, &set));
  any = set;
  FSDPCall(FSDPOptionsGetInt("-fsdp_plan_ranks_per_node", "FSDPPlan: ranks per node", plan->ranks_per_node, 1, 1 << 24,
                             &ranks, &set));
  if (any || set) FSDPCall(FSDPPlanSetJob(plan, (int)nodes, (int)ranks));
  if (set) forget_topology(plan); /* given, even as many as the topology's cores */
  FSDPCall(FSDPOptionsGetInt("-fsdp_plan_batch", "FSDPPlan: rows per optimizer step, all ranks together", plan->batch,
                             0, INT64_MAX, &batch, &set));
  FSDPCheck(!set || batch > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "-fsdp_plan_batch 0: the batch must be positive");
  if (set) FSDPCall(FSDPPlanSetBatch(plan, batch));
  FSDPCall(FSDPOptionsGetString("-fsdp_plan_memory",
                                "FSDPPlan: memory budget per rank: auto (this node's memory shared by its ranks; on "
                                "GPUs a GPU's), none, or bytes (12G)",
                                "auto", text, sizeof text, &set));
  if (set && !strcasecmp(text, "none")) FSDPCall(FSDPPlanSetMemoryBudget(plan, 0));
  else if (set && !strcasecmp(text, "auto")) default_budget(plan);
  else if (set) {
    int64_t bytes;
    FSDPCheck(FSDPParseBytes_Private(text, &bytes), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "-fsdp_plan_memory '%s': expected auto, none, or a number of bytes with an optional K, M, G or T "
              "suffix (12G is 12 GiB)",
              text);
    FSDPCall(FSDPPlanSetMemoryBudget(plan, (size_t)bytes));
  }
  FSDPCall(FSDPOptionsGetEnum("-fsdp_plan_optimizer", "FSDPPlan: the optimizer whose state the ranks keep", optimizers,
                              (int)plan->opt_type, &type, &set));
  FSDPCall(FSDPOptionsGetReal("-fsdp_plan_momentum", "FSDPPlan: sgd's momentum (0: no state)", plan->momentum,
                              &momentum, &any));
  if (set || any) FSDPCall(FSDPPlanSetOptimizer(plan, (FSDPOptimizerType)type, momentum));
  FSDPCall(FSDPOptionsGetReal("-fsdp_plan_flops", "FSDPPlan: fp32 FLOP/s of one rank", 0, &r[0], NULL));
  FSDPCall(FSDPOptionsGetReal("-fsdp_plan_intra_bw", "FSDPPlan: bytes/s a rank sends within its node", 0, &r[1], NULL));
  FSDPCall(FSDPOptionsGetReal("-fsdp_plan_inter_bw", "FSDPPlan: bytes/s a rank sends to another node", 0, &r[2], NULL));
  FSDPCall(FSDPOptionsGetReal("-fsdp_plan_latency", "FSDPPlan: seconds of one small message", 0, &r[3], NULL));
  for (int i = 0; i < 4; i++)
    FSDPCheck(r[i] >= 0 && isfinite(r[i]), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "-fsdp_plan_%s %g: a rate is a finite number >= 0",
              (const char *[]){"flops", "intra_bw", "inter_bw", "latency"}[i], r[i]);
  FSDPCall(FSDPPlanSetRates(plan, r[0], r[1], r[2], r[3]));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the probe */

#define PROBE_GEMM 256
#define PROBE_SECONDS 0.1
#define PROBE_BYTES (4 << 20)

/* fp32 GEMMs for about PROBE_SECONDS: flops per second. */
static FSDPErrorCode probe_gemm(double *rate)
{
  const int64_t n = PROBE_GEMM;
  float *a;
  double t0, t, count = 0;
  FSDPCall(FSDPMalloc((size_t)(3 * n * n) * sizeof(float), FSDP_MEM_OTHER, &a));
  for (int64_t i = 0; i < 3 * n * n; i++) a[i] = (float)(i % 7) * 0.125f;
  FSDPGemm_Private(false, false, n, n, n, 1.0f, a, n, a + n * n, n, 0.0f, a + 2 * n * n, n); /* warm */
  t0 = FSDPTime_Private();
  do {
    FSDPGemm_Private(false, false, n, n, n, 1.0f, a, n, a + n * n, n, 0.0f, a + 2 * n * n, n);
    count++;
    t = FSDPTime_Private() - t0;
  } while (t < PROBE_SECONDS && count < 1e6);
  *rate = 2.0 * (double)n * (double)n * (double)n * count / t;
  FSDPCall(FSDPFree(&a));
  return FSDP_SUCCESS;
}

#define PROBE_MAX_REPS 64

static int compare_doubles(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of t[0..n), which it sorts. */
static double median(double *t, int n)
{
  qsort(t, (size_t)n, sizeof t[0], compare_doubles);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Rank 0 and peer exchange `bytes` reps times; every rank calls it, the
   others wait.  Seconds of one way, on rank 0 (0 elsewhere): the median
   round trip's half, because on a node with more ranks than cores one
   round trip that waits for a time slice would otherwise set the mean. */
static FSDPErrorCode ping_pong(MPI_Comm comm, int peer, char *buf, int bytes, int reps, double *one_way)
{
  int rank;
  double trip[PROBE_MAX_REPS];
  *one_way = 0;
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Barrier(comm));
  if (peer <= 0 || (rank != 0 && rank != peer)) return FSDP_SUCCESS;
  if (reps > PROBE_MAX_REPS) reps = PROBE_MAX_REPS;
  for (int r = 0; r < reps; r++) {
    const double t0 = FSDPTime_Private();
    if (rank == 0) {
      FSDPCallMPI(MPI_Send(buf, bytes, MPI_BYTE, peer, 0, comm));
      FSDPCallMPI(MPI_Recv(buf, bytes, MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE));
    } else {
      FSDPCallMPI(MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE));
      FSDPCallMPI(MPI_Send(buf, bytes, MPI_BYTE, 0, 0, comm));
    }
    trip[r] = FSDPTime_Private() - t0;
  }
  if (rank != 0) return FSDP_SUCCESS;
  *one_way = median(trip, reps) / 2.0;
  return FSDP_SUCCESS;
}

#define PROBE_MODEL_BYTES ((size_t)1 << 30) /* state, and activations, a timing may hold (budget/2 on GPUs) */
#define PROBE_MODEL_SECONDS 0.05            /* a pass's estimated time at the GEMM rate, at most */

/* One forward, loss and backward of n rows, in seconds. */
static FSDPErrorCode time_pass(FSDPModel model, FSDPContext ctx, int64_t n, const float *x, const void *target,
                               bool tokens, double *seconds)
{
  float *y, *dy;
  double loss, t0 = FSDPTime_Private();
  FSDPCall(FSDPModelForward(model, n, x, &y));
  FSDPCall(FSDPModelLoss(model, tokens ? FSDP_LOSS_CROSS_ENTROPY : FSDP_LOSS_MSE, target, 1.0, &loss, &dy));
  FSDPCall(FSDPModelBackward(model, dy));
  FSDPCall(FSDPContextFinishBackward(ctx));
  FSDPCall(FSDPContextSynchronize(ctx)); /* a GPU's kernels, queued */
  *seconds = FSDPTime_Private() - t0;
  return FSDP_SUCCESS;
}

#define PROBE_MODEL_REPS 3 /* timed passes of each size, and optimizer steps */

/* Whether every rank of comm is ready for the next timed pass (*go): the
   ranks start each together (as a step's do, on cores they may share) and
   stop together when any cannot go on (an error, a model too large to
   time).  The early ones wait as the job's collectives would (sleep). */
static FSDPErrorCode all_ready(MPI_Comm comm, bool sleep, bool ready, bool *go)
{
  int all = ready;
  MPI_Request req;
  *go = false;
  if (MPI_Iallreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm, &req) != MPI_SUCCESS ||
      FSDPWaitRequests_Private(1, &req, sleep) != MPI_SUCCESS)
    return FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI,
                     "FSDPPlanProbe: the ranks' agreement before a timed pass failed");
  *go = all != 0;
  return FSDP_SUCCESS;
}

/* The model itself on this rank, unsharded on MPI_COMM_SELF with the job's
   -fsdp_* options (opts): the median of PROBE_MODEL_REPS passes of rows[0] and of
   rows[1] rows, and of as many optimizer steps, every rank of comm starting
   each together.  The minimum would be a pass that found its core free
   while other ranks were between passes, which a step's ranks never are.
   Nothing is timed (seconds[1] stays 0) when its parameters, gradients and
   optimizer state would pass PROBE_MODEL_BYTES or the budget on any rank. */
static FSDPErrorCode time_model(FSDPPlan plan, FSDPContext opts, MPI_Comm comm, int node_rank, bool sleep, double gemm,
                                int blas_share, int64_t rows[2], double seconds[2], double *opt_seconds)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt = NULL;
  int64_t in, out, numel = 0, ctxlen = 0, vocab = 0, n = 0;
  int nstates = FSDPOptimizerStateCount_Private(plan->opt_type, plan->momentum);
  float *x = NULL, *target = NULL;
  int64_t *labels = NULL;
  double times[2][PROBE_MODEL_REPS], steps[PROBE_MODEL_REPS], state = 0;
  size_t room;
  bool skip = false, go;
  FSDPErrorCode ierr, e;

  seconds[0] = seconds[1] = *opt_seconds = 0;
  rows[0] = rows[1] = 0;
  ierr = open_model(plan->spec, &ctx, &model);
  if (ierr) (void)all_ready(comm, sleep, false, &go); /* the others wait for it at the first pass's agreement */
  FSDPCall(ierr);
  ierr = FSDPModelGetSizes(model, &in, &out, &numel);
  /* Parameters, gradients and optimizer state within room; on a GPU, whose memory is the budget there, half
     the budget (a large model is what the job runs there), and the activations within what is left. */
  if (opts->device == FSDP_DEVICE_HOST)
    room = plan->budget && plan->budget / 2 < PROBE_MODEL_BYTES ? plan->budget / 2 : PROBE_MODEL_BYTES;
  else room = plan->budget ? plan->budget / 2 : PROBE_MODEL_BYTES;
  state = (double)numel * (double)(2 + nstates) * sizeof(float);
  skip = !ierr && state > (double)room;
  if (!ierr && !skip) ierr = FSDPContextSetMixedPrecision(ctx, opts->param_dtype, opts->reduce_dtype);
  if (!ierr && !skip) ierr = FSDPContextSetDevice(ctx, opts->device);
  /* On a GPU, the node-local rank's modulo the GPUs visible (a context of one rank would take its node's first):
     the job's where hwloc does not place its ranks by affinity. */
  if (!ierr && !skip) ctx->device_local_rank = node_rank;
  if (!ierr && !skip) ierr = FSDPContextSetShardingStrategy(ctx, FSDP_NO_SHARD);
  if (!ierr && !skip) ierr = FSDPModelSetFromOptions(model);
  if (!ierr && !skip) ierr = FSDPModelSetActivationCheckpointing(model, false); /* the candidates scale for it */
  if (!ierr && !skip) {
    model->blas_share = blas_share; /* the job's OpenBLAS threads, not a lone rank's */
    ierr = FSDPModelSetUp(model);
  }
  if (!ierr && !skip) ierr = FSDPOptimizerCreate(ctx, &opt);
  if (!ierr && !skip) ierr = FSDPOptimizerSetType(opt, plan->opt_type);
  if (!ierr && !skip && plan->opt_type == FSDP_OPTIMIZER_SGD)
    ierr = FSDPOptimizerSetMomentum(opt, plan->momentum, false);
  if (!ierr && !skip) ierr = FSDPOptimizerSetUp(opt);
  if (!ierr && !skip) ierr = FSDPModelGetTokens(model, &ctxlen, &vocab); /* 0 and 0 unless a GPT */
  if (!ierr && !skip) {
    /* A rank's rows of one step, and of 8 micro-batches; on the host no more than a pass of PROBE_MODEL_SECONDS
       at the GEMMs' rate, on a GPU (whose rate the host's GEMMs do not tell) no more activations than the room
       the state leaves. */
    int64_t w = (int64_t)plan->nodes * plan->ranks_per_node, most = plan->batch >= w ? plan->batch / w : 1;
    double row = FSDPModelForwardFlops_Private(model);
    if (opts->device == FSDP_DEVICE_HOST) {
      if (row > 0 && gemm > 0 && PROBE_MODEL_SECONDS * gemm / (3 * row) < (double)most)
        most = (int64_t)(PROBE_MODEL_SECONDS * gemm / (3 * row));
    } else {
      size_t act = 0;
      while (most > 1 && !(ierr = FSDPModelGetActivationBytes(model, most, false, &act)) &&
             (double)act > (double)room - state)
        most /= 2;
    }
    rows[1] = n = most > 1 ? most : 1;
    rows[0] = n / 8 > 1 ? n / 8 : 1;
  }
  if (!ierr && !skip) ierr = FSDPMalloc((size_t)(n * in) * sizeof *x, FSDP_MEM_OTHER, &x);
  if (!ierr && !skip && vocab) ierr = FSDPMalloc((size_t)(n * in) * sizeof *labels, FSDP_MEM_OTHER, &labels);
  if (!ierr && !skip && !vocab) ierr = FSDPMalloc((size_t)(n * out) * sizeof *target, FSDP_MEM_OTHER, &target);
  if (!ierr && !skip) {
    for (int64_t i = 0; i < n * in; i++) x[i] = vocab ? (float)(i * 5 % vocab) : (float)(i % 13) * 0.01f;
    for (int64_t i = 0; vocab && i < n * in; i++) labels[i] = i * 7 % vocab;
    for (int64_t i = 0; !vocab && i < n * out; i++) target[i] = (float)(i % 7) * 0.1f;
  }
  /* The first pass allocates what the others use; then both sizes in turn. */
  for (int pass = 0; pass < 1 + 2 * PROBE_MODEL_REPS; pass++) {
    const int size = pass % 2 ? 0 : 1;
    double t = 0;
    if ((e = all_ready(comm, sleep, !ierr && !skip, &go)) && !ierr) ierr = e;
    if (!go) goto done;
    ierr = time_pass(model, ctx, rows[size], x, vocab ? (const void *)labels : (const void *)target, vocab > 0, &t);
    if (pass > 0) times[size][(pass - 1) / 2] = t;
  }
  for (int step = 0; step < 1 + PROBE_MODEL_REPS; step++) { /* on the last pass's gradients; the first allocates */
    double t0;
    if ((e = all_ready(comm, sleep, !ierr, &go)) && !ierr) ierr = e;
    if (!go) goto done;
    t0 = FSDPTime_Private();
    ierr = FSDPOptimizerStep(opt);
    if (!ierr) ierr = FSDPContextSynchronize(ctx); /* a GPU's kernels, queued */
    if (step > 0) steps[step - 1] = FSDPTime_Private() - t0;
  }
  if ((e = all_ready(comm, sleep, !ierr, &go)) && !ierr) ierr = e;
  if (go) {
    seconds[0] = median(times[0], PROBE_MODEL_REPS);
    seconds[1] = median(times[1], PROBE_MODEL_REPS);
    *opt_seconds = median(steps, PROBE_MODEL_REPS);
  }
done:
  if ((e = FSDPFree(&x)) && !ierr) ierr = e;
  if ((e = FSDPFree(&labels)) && !ierr) ierr = e;
  if ((e = FSDPFree(&target)) && !ierr) ierr = e;
  if ((e = FSDPOptimizerDestroy(&opt)) && !ierr) ierr = e;
  if ((e = close_model(&ctx, &model)) && !ierr) ierr = e;
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the collectives, timed */

#define PROBE_STREAM 2 /* all-gathers in flight at once: as -fsdp_limit_all_gathers' default lets a step have */
#define PROBE_COLL_BUFFER ((size_t)32 << 20) /* a rank's buffer for them: PROBE_STREAM x (F + 1) x the largest size */
#define PROBE_COLL_LARGE ((size_t)4 << 20)   /* bytes of a rank's shard at the largest size, at most */
#define PROBE_COLL_MAX_W 16383               /* larger jobs: the largest size would be under 1 KiB */

/* Seconds one collective of a `bytes` shard on c (of `group` ranks) costs on
   this rank with as many of its kind in flight as a step has: PROBE_STREAM
   all-gathers (-fsdp_limit_all_gathers' default), one reduction (a unit's
   reduce-scatter and all-reduce follow one another, and the next unit's
   wait for them).  That many started at once, each on its own (group + 1) x
   bytes of buf (zeros, which sum to zeros), their time over their number;
   the median of reps, after one untimed round if warm (a first call may set
   up connections). */
static FSDPErrorCode time_collective(CommKind kind, MPI_Comm c, int group, size_t bytes, float *buf, int reps,
                                     bool warm, bool sleep, double *seconds)
{
  double t[PROBE_MAX_REPS];
  const size_t n = bytes / sizeof(float);
  const int stream = kind == COMM_ALLGATHER ? PROBE_STREAM : 1;
  for (int r = warm ? -1 : 0; r < reps; r++) {
    const double t0 = FSDPTime_Private();
    MPI_Request req[PROBE_STREAM];
    int started = 0, err = MPI_SUCCESS;
    for (; started < stream && err == MPI_SUCCESS; started++) {
      float *b = buf + (size_t)started * (size_t)(group + 1) * n;
      if (kind == COMM_ALLGATHER)
        err = MPI_Iallgather(b, (int)n, MPI_FLOAT, b + n, (int)n, MPI_FLOAT, c, &req[started]);
      else if (kind == COMM_REDUCE_SCATTER)
        err = MPI_Ireduce_scatter_block(b, b + (size_t)group * n, (int)n, MPI_FLOAT, MPI_SUM, c, &req[started]);
      else err = MPI_Iallreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, c, &req[started]);
    }
    if (err != MPI_SUCCESS) started--; /* the failed one started nothing */
    /* Every started one is waited for, even after an error: the caller frees buf and c. */
    if (started > 0) {
      int e = FSDPWaitRequests_Private(started, req, sleep);
      if (err == MPI_SUCCESS) err = e;
    }
    FSDPCallMPI(err);
    if (r >= 0) t[r] = (FSDPTime_Private() - t0) / stream;
  }
  *seconds = median(t, reps);
  return FSDP_SUCCESS;
}

/* Seconds one all-gather or reduce-scatter of a `bytes` shard costs in the
   node's shared memory, where a context whose shard group lies within a node
   runs its fp32 ones (-fsdp_shm_reduce): a reduce-scatter posts each rank's
   whole gradient in its segment of the window and sums its block of every
   rank's; an all-gather copies each rank's block into a view that every
   rank reads (-fsdp_shm_views; its epoch released after each), or every
   block into each rank's buffer.  On a stream of the nonblocking engine with
   the job's waits and watchdog (timeout, seconds); the median of reps after
   one untimed.  Collective on c (group ranks); *seconds stays negative where
   they do not share a node (CommShmCreate makes no window). */
static FSDPErrorCode time_shm(CommKind kind, MPI_Comm c, int group, size_t bytes, bool views, int reps, bool sleep,
                              double timeout, double *seconds)
{
  const size_t grads = (size_t)group * bytes;
  int rank;
  CommShm shm = NULL;
  CommStream stream = NULL;
  float *mine = NULL, *out = NULL;
  double t[PROBE_MAX_REPS];
  FSDPErrorCode ierr, e;
  *seconds = -1;
  FSDPCallMPI(MPI_Comm_rank(c, &rank));
  ierr = FSDPCalloc(bytes, 1, FSDP_MEM_COMM_STAGING, &mine);
  if (!ierr) ierr = FSDPCalloc(grads, 1, FSDP_MEM_COMM_STAGING, &out);
  /* Rank 0's segment holds the view too, after the gradients' room. */
  e = CommShmCreate(c, !ierr, grads + (views && rank == 0 ? grads : 0), views ? 1 : 0, &shm);
  if (!ierr) ierr = e;
  if (!ierr && shm) ierr = CommStreamCreate("nonblocking", timeout, c, NULL, NULL, &stream);
  if (!ierr && stream) CommStreamSetSleep(stream, sleep);
  ierr = FSDPErrorAgree_Private(c, ierr);
  for (int r = -1; !ierr && shm && r < reps; r++) {
    CommOp op = {.kind = kind,
                 .send = mine,
                 .recv = out,
                 .count = (int)(bytes / sizeof(float)),
                 .type = MPI_FLOAT,
                 .op = MPI_SUM,
                 .comm = c,
                 .shm = shm,
                 .unit = "FSDPPlanProbe",
                 .event = -1,
                 .unit_event = -1,
                 .dtype = FSDP_FLOAT32};
    uint64_t ticket;
    double t0;
    if (kind == COMM_REDUCE_SCATTER || !views) op.send = CommShmSegment(shm, rank); /* the peers read it there */
    else {
      op.recv = (char *)CommShmSegment(shm, 0) + grads;
      op.epoch = (uint64_t)(r + 2); /* from 1 */
    }
    t0 = FSDPTime_Private();
    ierr = CommStreamSubmit(stream, &op, &ticket);
    if (!ierr) ierr = CommStreamWait(stream, ticket);
    if (!ierr && op.epoch) CommShmRelease(shm, 0, op.epoch);
    if (r >= 0) t[r] = FSDPTime_Private() - t0;
  }
  if (!ierr && shm) *seconds = median(t, reps);
  if (stream && (e = CommStreamDestroy(&stream)) && !ierr) ierr = e;
  if (shm && (e = CommShmDestroy(&shm)) && !ierr) ierr = e;
  if ((e = FSDPFree(&mine)) && !ierr) ierr = e;
  if ((e = FSDPFree(&out)) && !ierr) ierr = e;
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

/* How many times a collective is timed: least, or as many more as fit
   PROBE_REP_SECONDS at `estimate` seconds each (up to PROBE_MOST_REPS).  As
   the median of 3, a size's time moved by a third from one probe to the next
   on a shaped link (a 4 MiB all-reduce across 2 nodes at 1 Gbit/s: 114 to
   149 ms in four sweeps' probes); where they are quick, more reps cost
   little.  The estimate is the previous size's slowest median
   scaled by the bytes (an upper bound where latency counts), alike on
   every rank. */
#define PROBE_REP_SECONDS 1.0
#define PROBE_MOST_REPS 9
_Static_assert(PROBE_MOST_REPS <= PROBE_MAX_REPS, "time_collective's and time_shm's arrays hold PROBE_MAX_REPS");
static int probe_reps(int least, double estimate)
{
  if (!(estimate > 0)) return least;
  const double fit = PROBE_REP_SECONDS / estimate;
  return fit >= PROBE_MOST_REPS ? PROBE_MOST_REPS : fit > least ? (int)fit : least;
}

/* The shard group sizes a candidate can take at W = size, rpn ranks per node:
   1 (none), the hybrid F (2 to rpn, dividing it, below W) and W (full).
   f holds rpn + 2. */
static int group_sizes(int size, int rpn, int *f)
{
  int n = 0;
  f[n++] = 1;
  for (int g = 2; g <= rpn && g < size; g++)
    if (rpn % g == 0) f[n++] = g;
  if (size > 1) f[n++] = size;
  return n;
}

/* The shard sizes a collective in groups of `factor` is timed at (a rank's
   part of an all-gather, its result of a reduce-scatter, the vector of an
   all-reduce): the largest that fits the buffer (4 MiB at most, a large
   unit's shard), 1/16 of it and 1/1024 of it (where a collective's cost is
   its latency), never under 16 bytes (factor <= PROBE_COLL_MAX_W). */
static void probe_sizes(int factor, double bytes[PROBE_SIZES])
{
  size_t large = PROBE_COLL_BUFFER / PROBE_STREAM / (size_t)(factor + 1);
  if (large > PROBE_COLL_LARGE) large = PROBE_COLL_LARGE;
  large = large / 1024 * 1024;
  bytes[0] = (double)(large / 1024 < 16 ? 16 : large / 1024 / 4 * 4);
  bytes[1] = (double)(large / 16 / 4 * 4);
  bytes[2] = (double)large;
}

/* Every shard group size's collectives, on `ordered` (the job's ranks in node
   order, rpn on each node), all groups at once as in a step: the all-gather
   and reduce-scatter within groups of F consecutive ranks, the all-reduce
   across their W/F replicas, each at PROBE_SIZES sizes; the slowest rank's
   median sets each time.  Groups within a node time in the node's shared
   memory what the job's contexts run there (shm[kind], views: ShmPaths).
   Collective on ordered; g holds rpn + 2 entries. */
static FSDPErrorCode time_groups(MPI_Comm ordered, int rpn, bool sleep, const ShmPaths *shm, double timeout, float *buf,
                                 GroupTiming *g, int *ngroups)
{
  static const int least_reps[PROBE_SIZES] = {7, 3, 3};
  int size, rank, *f = NULL, n = 0;
  FSDPErrorCode ierr;
  FSDPCallMPI(MPI_Comm_size(ordered, &size));
  FSDPCallMPI(MPI_Comm_rank(ordered, &rank));
  *ngroups = 0;
  ierr = FSDPMalloc((size_t)(rpn + 2) * sizeof *f, FSDP_MEM_OTHER, &f);
  if (!ierr) n = group_sizes(size, rpn, f);
  ierr = FSDPErrorAgree_Private(ordered, ierr);
  for (int i = 0; !ierr && i < n; i++) {
    const int factor = f[i], replicas = size / factor;
    MPI_Comm shard = MPI_COMM_NULL, replica = MPI_COMM_NULL;
    g[i].factor = factor;
    probe_sizes(factor, g[i].bytes);
    if (MPI_Comm_split(ordered, rank / factor, rank, &shard) || MPI_Comm_split(ordered, rank % factor, rank, &replica))
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Comm_split failed");
    ierr = FSDPErrorAgree_Private(ordered, ierr);
    /* A group's error stops every group at the next start: the groups' collectives differ, and one
       group leaving early would meet the others' next start with another collective. */
    for (int k = 0, stop = ierr != FSDP_SUCCESS; !stop && k < COMM_NUM_KINDS; k++) {
      const bool runs = k == COMM_ALLREDUCE ? replicas > 1 : factor > 1;
      const bool in_shm = shm->kind[k] && factor > 1 && rpn % factor == 0; /* a group within a node */
      for (int b = 0; !stop && b < PROBE_SIZES; b++) {
        MPI_Request req;
        /* The start: any group's error, and the previous size's slowest time, which sets how many reps fit. */
        double start[2] = {ierr != FSDP_SUCCESS, b > 0 ? g[i].seconds[k][b - 1] : 0};
        g[i].seconds[k][b] = -1;
        if (!runs) continue;
        if (MPI_Iallreduce(MPI_IN_PLACE, start, 2, MPI_DOUBLE, MPI_MAX, ordered, &req) ||
            FSDPWaitRequests_Private(1, &req, sleep)) { /* every group starts at once */
          if (!ierr)
            ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Iallreduce failed");
          start[0] = 1;
        }
        if ((stop = start[0] != 0)) break;
        /* The estimate is per collective: a round of PROBE_STREAM all-gathers may take that many times it. */
        const int reps = probe_reps(least_reps[b], start[1] * g[i].bytes[b] / (b > 0 ? g[i].bytes[b - 1] : 1));
        if (in_shm)
          ierr = time_shm((CommKind)k, shard, factor, (size_t)g[i].bytes[b], shm->views, reps, sleep, timeout,
                          &g[i].seconds[k][b]);
        /* Through MPI, and where the group got no window (its seconds stay negative, alike on its ranks). */
        if (!ierr && g[i].seconds[k][b] < 0)
          ierr = time_collective((CommKind)k, k == COMM_ALLREDUCE ? replica : shard, factor, (size_t)g[i].bytes[b], buf,
                                 reps, b == 0, sleep, &g[i].seconds[k][b]);
        else if (!ierr) g[i].shm = true;
      }
    }
    if (shard != MPI_COMM_NULL) MPI_Comm_free(&shard);
    if (replica != MPI_COMM_NULL) MPI_Comm_free(&replica);
    ierr = FSDPErrorAgree_Private(ordered, ierr);
    if (!ierr && MPI_Allreduce(MPI_IN_PLACE, g[i].seconds, COMM_NUM_KINDS * PROBE_SIZES, MPI_DOUBLE, MPI_MAX, ordered))
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Allreduce failed");
    if (!ierr) { /* in shared memory only if every group's were */
      int all = g[i].shm;
      if (MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, ordered))
        ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Allreduce failed");
      g[i].shm = all;
    }
  }
  if (!ierr) *ngroups = n;
  {
    FSDPErrorCode e = FSDPFree(&f);
    if (!ierr) ierr = e;
  }
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanProbe(FSDPPlan plan)
{
  MPI_Comm comm, node, machine;
  int rank, size, node_rank, node_size, machine_size, cpus, share, timed;
  int *leader = NULL, mine[2], intra_peer = -1, inter_peer = -1;
  double gemm, rates[4] = {0, 0, 0, 0}, t;
  char *buf = NULL;
  bool sleep = false, host = false;
  ShmPaths paths = {{false}, false};
  FSDPContext opts = NULL; /* the job's -fsdp_* options */
  FSDPErrorCode ierr;

  CHECK_PLAN(plan);
  FSDPCollective(plan->comm);
  FSDPCallMPI(MPI_Comm_dup(plan->comm, &comm)); /* its messages never match the program's */
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  /* Every rank's node, as the rank of its node's first rank in comm. */
  FSDPCallMPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  FSDPCallMPI(MPI_Comm_rank(node, &node_rank));
  FSDPCallMPI(MPI_Comm_size(node, &node_size));
  mine[0] = rank;
  FSDPCallMPI(MPI_Bcast(mine, 1, MPI_INT, 0, node));
  /* The CPUs are the machine's, which containers of one host share though each is a node to MPI. */
  FSDPCall(FSDPMachineComm_Private(comm, node, &machine, NULL));
  FSDPCallMPI(MPI_Comm_size(machine, &machine_size));
  FSDPCall(FSDPNodeCPUs_Private(machine, &cpus));
  if (machine != node) FSDPCallMPI(MPI_Comm_free(&machine));
  FSDPCallMPI(MPI_Comm_free(&node));
  share = cpus / machine_size > 1 ? cpus / machine_size : 1;
  int span[4] = {-node_size, node_size, machine_size > cpus, 2 * machine_size > cpus};
  /* Every rank times the model, or none does (FSDPPlanSetModel is each rank's own). */
  timed = plan->spec != NULL;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, &timed, 1, MPI_INT, MPI_MIN, comm));
  ierr = FSDPMalloc((size_t)size * sizeof *leader, FSDP_MEM_OTHER, &leader);
  if (!ierr) ierr = FSDPMalloc(PROBE_BYTES, FSDP_MEM_COMM_STAGING, &buf);
  ierr = FSDPErrorAgree_Private(comm, ierr);
  if (!ierr) {
    memset(buf, 1, PROBE_BYTES);
    ierr = MPI_Allgather(mine, 1, MPI_INT, leader, 1, MPI_INT, comm) == MPI_SUCCESS
               ? FSDP_SUCCESS
               : FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_MPI, "MPI_Allgather failed");
  }
  for (int r = 1; !ierr && r < size; r++) {
    if (leader[r] == leader[0] && intra_peer < 0) intra_peer = r;
    if (leader[r] != leader[0] && inter_peer < 0) inter_peer = r;
  }
  /* The job's -fsdp_* options, read on a context of their own: those that change its compute (its parameters'
     type, its device) and how its collectives wait, none of those that lay out, bind or print it (a sharding
     factor, -fsdp_bind, -fsdp_view).  Whether nodes differ in ranks, any is oversubscribed, any has under 2 CPUs
     a rank. */
  if (!ierr) {
    ierr = MPI_Allreduce(MPI_IN_PLACE, span, 4, MPI_INT, MPI_MAX, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
    if (!ierr) ierr = FSDPContextCreate(MPI_COMM_SELF, &opts);
    if (!ierr) ierr = FSDPContextSetFromOptions(opts);
    if (!ierr) {
      /* As FSDPContextSetUp decides auto on the host with the default engine: the nonblocking engine (some node
         with under 2 CPUs a rank) sleeps where its own node is oversubscribed, the thread engine everywhere if
         any node is. */
      bool over = machine_size > cpus;
      host = opts->device == FSDP_DEVICE_HOST; /* NCCL's collectives are not MPI's on the host */
      paths.kind[COMM_REDUCE_SCATTER] = host && opts->shm_reduce && opts->reduce_dtype == FSDP_FLOAT32;
      paths.kind[COMM_ALLGATHER] = paths.kind[COMM_REDUCE_SCATTER] && opts->param_dtype == FSDP_FLOAT32;
      paths.views = paths.kind[COMM_ALLGATHER] && opts->shm_views;
      sleep = opts->wait_requested == FSDP_WAIT_SLEEP ||
              (opts->wait_requested == FSDP_WAIT_AUTO && (span[3] ? over : span[2] != 0));
    }
  }
  /* Every rank multiplies at once, as in a step, with the BLAS threads the job's model would take: the slowest
     sets the pace. */
  if (!ierr) {
    int64_t asked;
    const char *why;
    ierr = FSDPOptionsGetInt("-fsdp_blas_threads", "OpenBLAS threads per rank (0: the node's CPUs per rank)", 0, 0,
                             1024, &asked, NULL);
    if (!ierr) (void)FSDPFitBlasThreads_Private((int)asked, share, &why);
  }
  ierr = FSDPErrorAgree_Private(comm, ierr); /* before the barrier every rank must reach */
  if (!ierr) {                               /* one path for every group, as a job's SetUp agrees on these options */
    int p[3] = {paths.kind[COMM_REDUCE_SCATTER], paths.kind[COMM_ALLGATHER], paths.views};
    ierr = MPI_Allreduce(MPI_IN_PLACE, p, 3, MPI_INT, MPI_MIN, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
    paths.kind[COMM_REDUCE_SCATTER] = p[0];
    paths.kind[COMM_ALLGATHER] = p[1];
    paths.views = p[2];
  }
  if (!ierr) ierr = MPI_Barrier(comm) == MPI_SUCCESS ? probe_gemm(&gemm) : FSDP_ERR_MPI;
  ierr = FSDPErrorAgree_Private(comm, ierr);
  if (!ierr) ierr = MPI_Allreduce(MPI_IN_PLACE, &gemm, 1, MPI_DOUBLE, MPI_MIN, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
  if (!ierr && host) rates[0] = gemm; /* on a GPU the host's GEMMs are not the job's: the model's timing is */
  /* A GPU job planned where no GPU is (a login node): the model is not timed. */
  if (!ierr && timed && !host) {
    int missing = DeviceCount_Private() == 0;
    ierr = MPI_Allreduce(MPI_IN_PLACE, &missing, 1, MPI_INT, MPI_MAX, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
    if (!ierr && missing) {
      timed = 0;
      plan->model_rows[1] = 0;
      plan->model_timing = MODEL_NO_GPU;
    }
  }
  /* The model itself, every rank at once: what the GEMMs' rate leaves out (small products, the
     element-wise layers, attention, the optimizer). */
  if (!ierr && timed) {
    int64_t rows[2];
    double timing[3];
    ierr = time_model(plan, opts, comm, node_rank, sleep, gemm, share, rows, timing, &timing[2]);
    int all = timing[1] > 0;
    ierr = FSDPErrorAgree_Private(comm, ierr);
    /* One timing for every rank, or none: ranks that differ would rank the candidates differently. */
    if (!ierr) ierr = MPI_Allreduce(MPI_IN_PLACE, timing, 3, MPI_DOUBLE, MPI_MAX, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
    if (!ierr) ierr = MPI_Allreduce(MPI_IN_PLACE, rows, 2, MPI_INT64_T, MPI_MAX, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
    if (!ierr) ierr = MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
    if (!ierr) {
      memcpy(plan->model_rows, rows, sizeof rows);
      memcpy(plan->model_seconds, timing, sizeof plan->model_seconds);
      plan->opt_seconds = timing[2];
      plan->model_timing = !all ? MODEL_TOO_LARGE : host ? MODEL_TIMED : MODEL_TIMED_GPU;
      if (!all) plan->model_rows[1] = 0;
    }
  }
  if (!ierr) ierr = ping_pong(comm, intra_peer > 0 ? intra_peer : inter_peer, buf, 8, 50, &rates[3]);
  if (!ierr) ierr = ping_pong(comm, intra_peer, buf, PROBE_BYTES, 5, &t);
  if (!ierr && t > 0) rates[1] = PROBE_BYTES / t;
  if (!ierr) ierr = ping_pong(comm, inter_peer, buf, PROBE_BYTES, 5, &t);
  if (!ierr && t > 0) rates[2] = PROBE_BYTES / t;
  if (!ierr) ierr = MPI_Bcast(&rates[1], 3, MPI_DOUBLE, 0, comm) ? FSDP_ERR_MPI : FSDP_SUCCESS;
  /* The collectives themselves, where every node has as many ranks: their algorithms, the links shared by
     a node's ranks and the waiting for a core, which one pair's ping-pong leaves out. */
  if (!ierr) ierr = FSDPFree(&plan->groups);
  if (!ierr) {
    plan->ngroups = 0;
    if (-span[0] == span[1] && size > 1 && size <= PROBE_COLL_MAX_W && host) {
      MPI_Comm ordered;
      int key = 0; /* this rank's place in node order */
      for (int r = 0; r < size; r++) key += leader[r] < leader[rank] || (leader[r] == leader[rank] && r < rank);
      ierr = MPI_Comm_split(comm, 0, key, &ordered) ? FSDP_ERR_MPI : FSDP_SUCCESS;
      if (!ierr) {
        float *zeros = NULL;
        GroupTiming *g = NULL;
        int n = 0;
        ierr = FSDPCalloc((size_t)node_size + 2, sizeof *g, FSDP_MEM_OTHER, &g);
        if (!ierr) ierr = FSDPCalloc(PROBE_COLL_BUFFER, 1, FSDP_MEM_COMM_STAGING, &zeros);
        ierr = FSDPErrorAgree_Private(ordered, ierr);
        if (!ierr) ierr = time_groups(ordered, node_size, sleep, &paths, opts->timeout, zeros, g, &n);
        ierr = FSDPErrorAgree_Private(ordered, ierr); /* every rank keeps the timings, or none */
        if (!ierr) {
          plan->groups = g;
          plan->ngroups = n;
          plan->timed_nodes = size / node_size;
          plan->timed_rpn = node_size;
        } else (void)FSDPFree(&g);
        (void)FSDPFree(&zeros);
        MPI_Comm_free(&ordered);
      }
    }
  }
  {
    FSDPErrorCode e = FSDPFree(&buf);
    if (!ierr) ierr = e;
    e = FSDPFree(&leader);
    if (!ierr) ierr = e;
    e = FSDPContextDestroy(&opts);
    if (!ierr) ierr = e;
  }
  MPI_Comm_free(&comm);
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  FSDPCall(FSDPPlanSetRates(plan, rates[0], rates[1], rates[2], rates[3]));
  plan->rates_from = "measured by FSDPPlanProbe";
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the candidates */

/* Seconds of one timed collective of a `bytes` shard: between two timed
   sizes the line through them; past the largest, its time and the last
   segment's slope if that grows (timings of 3 pairs are noisy); below the
   smallest, the smallest's time (its latency); never under that. */
static double timed_cost(const GroupTiming *g, CommKind kind, double bytes)
{
  const double *t = g->seconds[kind], *x = g->bytes;
  double v;
  if (t[0] < 0) return 0;
  if (bytes <= x[0]) return t[0];
  if (bytes > x[2]) {
    double slope = x[2] > x[1] ? (t[2] - t[1]) / (x[2] - x[1]) : 0;
    v = t[2] + (slope > 0 ? slope : 0) * (bytes - x[2]);
  } else {
    int i = bytes <= x[1] ? 0 : 1;
    v = x[i + 1] > x[i] ? t[i] + (t[i + 1] - t[i]) / (x[i + 1] - x[i]) * (bytes - x[i]) : t[i + 1];
  }
  return v > t[0] ? v : t[0];
}

/* The timing of shard groups of `factor`, if the probe timed them on a job of this shape; else NULL. */
static const GroupTiming *find_group(const FSDPPlan plan, int factor)
{
  if (plan->timed_nodes != plan->nodes || plan->timed_rpn != plan->ranks_per_node) return NULL;
  for (int i = 0; i < plan->ngroups; i++)
    if (plan->groups[i].factor == factor) return &plan->groups[i];
  return NULL;
}

/* Bruck's all-gather over f ranks, g on each node in node order: at step
   k = 1, 2, 4, ... < f each rank sends min(k, f-k) shards to rank - k.  The
   shards that leave a node (as many as enter it; every node alike). */
static double bruck_shards(int64_t f, int64_t g)
{
  double shards = 0;
  for (int64_t k = 1; k < f; k *= 2)
    for (int64_t r = 0; r < g; r++) /* node 0's ranks */
      if ((r - k + f) % f >= g) shards += (double)(k < f - k ? k : f - k);
  return shards;
}

/* MPICH's recursive-halving reduce-scatter over f ranks, g on each node in
   node order: the shards that cross between nodes, each message counted
   once.  With p the largest power of two up to f and rem = f - p, the even
   ranks below 2 rem first send everything (f shards) to the next rank and
   drop out; the p left (new rank i: rank 2i+1 below rem, else i + rem;
   holding 2 blocks' shards below rem, else 1) halve their window at each
   step, sending the partner's half; then the odd ranks below 2 rem send
   their neighbours' shard back.  With f a power of two each of a node's g
   ranks sends f - g shards across. */
static double halving_shards(int64_t f, int64_t g)
{
  int64_t p = 1, rem;
  double shards = 0;
  while (p * 2 <= f) p *= 2;
  rem = f - p;
#define REAL(i) ((i) < rem ? 2 * (i) + 1 : (i) + rem)
  for (int64_t r = 0; r + 1 < 2 * rem; r += 2)
    if (r / g != (r + 1) / g) shards += (double)f + 1.0; /* all of it out, its result back */
  for (int64_t mask = p / 2; mask > 0; mask /= 2)
    for (int64_t i = 0; i < p; i++) {
      int64_t d = i ^ mask, lo = d & ~(mask - 1), n = 0;
      for (int64_t b = lo; b < lo + mask; b++) n += b < rem ? 2 : 1;
      if (REAL(i) / g != REAL(d) / g) shards += (double)n;
    }
#undef REAL
  return shards;
}

/* Bytes that a node's link carries each way for one all-gather or
   reduce-scatter of a unit of `unit` bytes (elements of `size` bytes) over
   a shard group of f ranks, g on each node (f > g, ranks in node order), on
   average over the nodes.  A ring crosses between nodes at one hop per
   node: (f-1)/f of the unit.  MPICH's defaults (4.0; measured on the
   namespace cluster at f = 4, 6 and 8 with g = 2, doc/fsdp-plan.md):
   - reduce-scatter by recursive halving (halving_shards), from 512 KiB by
     a pairwise exchange, where each of a node's g ranks sends the f - g
     shards of the other nodes' ranks across, g (f-g)/f of the unit, as the
     halving does with f a power of two.  The nonblocking call
     (MPI_Ireduce_scatter_block: the nonblocking engine's) compares
     elements with 512 Ki, not bytes; the blocking one (the thread and sync
     engines') bytes.  An engine left to the context counts as the thread,
     the default where nodes have 2 CPUs a rank.
   - all-gather, with f a power of two, by recursive doubling below 512 KiB,
     which crosses as the halving does, g (f-g)/f; otherwise by Bruck's
     algorithm below 80 KiB (bruck_shards); else a ring.
   NCCL (on GPUs) and other MPIs: the ring. */
static double crossing_bytes(const FSDPPlan plan, FSDPContext ctx, CommKind kind, int64_t f, int64_t g, double unit,
                             size_t size)
{
  const double long_message = 524288, short_message = 81920; /* MPIR_CVAR_ALLGATHER_{LONG,SHORT}_MSG_SIZE */
  double shard = unit / (double)f, nodes = (double)(f / g);
  bool pof2 = (f & (f - 1)) == 0, mpich = plan->mpich && !plan->on_gpu;
  bool nonblocking = ctx->engine_set && ctx->engine == FSDP_COMM_ENGINE_NONBLOCKING;
  if (mpich && kind == COMM_REDUCE_SCATTER)
    return (unit / (nonblocking ? (double)size : 1) < long_message ? halving_shards(f, g) / nodes
                                                                   : (double)g * (double)(f - g)) *
           shard;
  if (mpich && pof2 && unit < long_message) return (double)g * (double)(f - g) * shard;
  if (mpich && !pof2 && unit < short_message) return bruck_shards(f, g) * shard;
  return (double)(f - 1) * shard;
}

/* How many times a micro-batch all-gathers each unit of the model's context
   (by its index) where units keep nothing from forward for backward, as
   core/flatparam.c runs them with `cached` parameter buffers.  Forward
   unshards the units in the order its layers use them (a unit used again
   later, as a tied head uses its embedding's, again); a unit it leaves
   stays cached in its buffer until a unit that needs a buffer evicts it,
   the lowest-numbered first (evict_cached, take_params), but not the one
   just left where forward prefetches (-fsdp_forward_prefetch: the next
   unit's gather starts while that one runs).
   Backward takes the units in the reverse order and releases each as it
   leaves it.  work: room for the context's units and the model's layers. */
static void simulate_gathers(const FSDPModel model, int cached, bool prefetch, int *gathers, int *work)
{
  int nunits = model->ctx->nunits, *held = work, *seq = work + nunits, n = 0, in_use = 0;
  for (int i = 0; i < nunits; i++) gathers[i] = held[i] = 0;
  for (int i = 0; i < model->nlayers; i++) {
    int u = model->layers[i].unit >= 0 ? model->units[model->layers[i].unit]->index : -1;
    if (u >= 0 && (n == 0 || seq[n - 1] != u)) seq[n++] = u;
  }
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < n; k++) {
      int u = seq[pass ? n - 1 - k : k], prev = k ? seq[pass ? n - k : k - 1] : -1;
      if (pass && prev >= 0 && held[prev]) { /* backward released the unit it left */
        held[prev] = 0;
        in_use--;
      }
      if (held[u]) continue;
      gathers[u]++;
      if (in_use >= cached) {
        int victim = -1;
        for (int v = 0; v < nunits && victim < 0; v++)
          if (held[v] && v != u && (v != prev || !prefetch)) victim = v;
        if (victim < 0) victim = prev;
        if (victim >= 0) {
          held[victim] = 0;
          in_use--;
        }
      }
      held[u] = 1;
      in_use++;
    }
}

/* What the collectives of one step send, on each rank (the paper's volumes),
   and where.  Ranks are placed in node order, as ShardGroup places them.
   - A shard group wider than a node runs its all-gathers and
     reduce-scatters between nodes as crossing_bytes says.
   - gathers[i]: how many times a micro-batch all-gathers unit i; once,
     where units keep their parameters from forward for backward
     (SHARD_GRAD_OP, views of the shards), else simulate_gathers'.
   - Replicas all-reduce by recursive halving and doubling (MPICH's
     Rabenseifner), first between the replicas of a node: of the 2 (R-1)/R
     of the shard each rank sends, 2 (1/r - 1/R) cross nodes, with r the
     replicas of a node (hierarchy's least; measured, doc/fsdp-plan.md).
   t[0]: the bytes a rank sends within its node; t[1]: those its node's link
   carries each way; they pace the step at the intra- and inter-node rates. */
static void count_bytes(FSDPContext ctx, const FSDPPlan plan, const int *gathers, const GroupTiming *g,
                        FSDPPlanCandidate *c, double *collectives, double t[2], double *timed)
{
  int64_t f = c->factor, r = c->replicas, rpn = plan->ranks_per_node;
  int64_t local = f <= rpn && rpn % f == 0 ? rpn / f : 1; /* replicas of a rank on its node */
  bool wide = f > rpn, apart = plan->nodes > 1 && local < r;
  size_t rs = FSDPDataTypeSize(ctx->reduce_dtype);
  double k = c->grad_accum, shard = 0, replicate = 0, across = 0, n = 0, link = 0;
  *timed = g ? 0 : -1;
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t es = FSDPDataTypeSize(u->dtype);
    size_t ps = ctx->param_dtype == FSDP_FLOAT32 ? es : FSDPDataTypeSize(ctx->param_dtype);
    double padded = (double)((u->numel + f - 1) / f * f), ag = gathers[i];
    if (f > 1) {
      /* Gathers for each micro-batch; one reduce-scatter a step: the micro-batches before the last keep their
         unsharded sums (fsdp-train's no_sync, FSDPContextSetGradSync). */
      shard += k * ag * (double)(f - 1) / (double)f * padded * (double)ps +
               (double)(f - 1) / (double)f * padded * (double)rs;
      if (wide)
        link += k * ag * crossing_bytes(plan, ctx, COMM_ALLGATHER, f, rpn, padded * (double)ps, ps) +
                crossing_bytes(plan, ctx, COMM_REDUCE_SCATTER, f, rpn, padded * (double)rs, rs);
      n += k * ag + 1;
      if (g)
        *timed += k * ag * timed_cost(g, COMM_ALLGATHER, padded / (double)f * (double)ps) +
                  timed_cost(g, COMM_REDUCE_SCATTER, padded / (double)f * (double)rs);
    }
    /* Across replicas once per step: the micro-batches before the last keep their sums (fsdp-train's no_sync). */
    if (r > 1) {
      double v = padded / (double)f * (double)rs;
      replicate += 2.0 * (double)(r - 1) / (double)r * v;
      if (apart) across += 2.0 * (1.0 / (double)local - 1.0 / (double)r) * v;
      n += 1;
      if (g) *timed += timed_cost(g, COMM_ALLREDUCE, v);
    }
  }
  c->shard_bytes = shard;
  c->replicate_bytes = replicate;
  /* On average over a node's ranks: they share the wide group's crossings. */
  c->inter_node_bytes = link / (double)rpn + across;
  t[0] = (wide ? 0 : shard) + replicate - across;
  /* A node's ranks share its link: it carries all their bytes across, one way and the other. */
  t[1] = (double)rpn * c->inter_node_bytes;
  *collectives = n;
}

/* timed >= 0: the step's collectives as the probe timed them, which then stand for the rates. */
static void predict_time(const FSDPPlan plan, FSDPPlanCandidate *c, double collectives, const double t[2], double timed)
{
  double rows = (double)c->batch / (double)(c->factor * c->replicas) * c->grad_accum;
  bool compute = plan->model_rows[1] > 0 || plan->flops > 0; /* the model timed, or a GEMM rate */
  bool known = compute && (timed >= 0 || ((t[0] <= 0 || plan->intra > 0) && (t[1] <= 0 || plan->inter > 0)));
  c->compute_seconds = c->comm_seconds = c->seconds = -1;
  if (!known) return;
  if (plan->model_rows[1] > 0) {
    /* The model's timed passes as a line, seconds = fixed + per_row x rows, for each micro-batch; forward
       is a third of a pass, run again under checkpointing; the optimizer steps the rank's 1/F. */
    const int64_t *n = plan->model_rows;
    const double *s = plan->model_seconds;
    double per_row = n[1] > n[0] ? (s[1] - s[0]) / (double)(n[1] - n[0]) : s[1] / (double)n[1], fixed;
    if (per_row <= 0) per_row = s[1] / (double)n[1];
    fixed = s[1] - per_row * (double)n[1];
    if (fixed < 0) fixed = 0;
    c->compute_seconds = (c->grad_accum * fixed + rows * per_row) * (c->activation_checkpointing ? 4.0 / 3.0 : 1.0) +
                         plan->opt_seconds / (double)c->factor;
  } else /* Forward, and backward's two GEMMs per forward one; checkpointing runs forward again. */
    c->compute_seconds = rows * plan->row_flops * (c->activation_checkpointing ? 4 : 3) / plan->flops;
  if (timed >= 0) c->comm_seconds = timed;
  else
    c->comm_seconds =
        (t[0] > 0 ? t[0] / plan->intra : 0) + (t[1] > 0 ? t[1] / plan->inter : 0) + collectives * plan->latency;
  c->seconds = c->compute_seconds + c->comm_seconds;
}

static FSDPErrorCode grow(FSDPPlan plan, int *capacity)
{
  if (plan->ncand < *capacity) return FSDP_SUCCESS;
  FSDPCall(FSDPGrowArray_Private(&plan->cand, sizeof *plan->cand, plan->ncand + 1, capacity, FSDP_MEM_OTHER));
  return FSDP_SUCCESS;
}

/* Every candidate of one wrapping. */
static FSDPErrorCode add_wrapping(FSDPPlan plan, FSDPWrapPolicy wrap, int *capacity)
{
  FSDPContext ctx = NULL;
  FSDPModel model = NULL;
  FSDPErrorCode ierr;
  int w = plan->nodes * plan->ranks_per_node;
  int nstates = FSDPOptimizerStateCount_Private(plan->opt_type, plan->momentum), *gathers = NULL;
  size_t scratch = 0;

  FSDPCall(open_model(plan->spec, &ctx, &model));
  ierr = FSDPContextSetFromOptions(ctx);
  if (!ierr) ierr = FSDPModelSetFromOptions(model);
  if (!ierr) ierr = FSDPModelSetWrapPolicy(model, wrap, 0);
  if (!ierr) ierr = FSDPModelLayOut_Private(model, ctx->device != FSDP_DEVICE_HOST);
  if (!ierr) ierr = FSDPModelGetSizes(model, NULL, NULL, &plan->numel);
  if (!ierr) plan->row_flops = FSDPModelForwardFlops_Private(model);
  if (!ierr) scratch = FSDPModelScratchBytes_Private(model, ctx->device != FSDP_DEVICE_HOST, ctx->param_dtype);
  /* gathers[i] per unit, then simulate_gathers' room */
  if (!ierr)
    ierr = FSDPMalloc((size_t)(2 * ctx->nunits + model->nlayers + 1) * sizeof *gathers, FSDP_MEM_OTHER, &gathers);
  for (int s = 0; !ierr && s <= FSDP_HYBRID_SHARD_ZERO2; s++) {
    bool hybrid = s == FSDP_HYBRID_SHARD || s == FSDP_HYBRID_SHARD_ZERO2;
    for (int f = hybrid ? 2 : 1; !ierr && f <= (hybrid ? plan->ranks_per_node : 1); f++) {
      int factor = s == FSDP_NO_SHARD ? 1 : hybrid ? f : w;
      MemoryLayout lay = {
          .factor = factor, .strategy = (FSDPShardingStrategy)s, .param_dtype = ctx->param_dtype, .limit = ctx->limit};
      MemorySizes ms;
      size_t state = 0;
      if (hybrid && (plan->ranks_per_node % f || f >= w)) continue;
      /* Views need the shard group within one node (CommShmCreate): groups of consecutive ranks that divide it. */
      lay.views = FSDPMemoryViewsWanted_Private(ctx, ctx->device, factor, ctx->param_dtype) &&
                  plan->ranks_per_node % factor == 0;
      FSDPMemorySizes_Private(ctx, &lay, &ms);
      if (lay.views || s == FSDP_SHARD_GRAD_OP || s == FSDP_HYBRID_SHARD_ZERO2) /* kept from forward */
        for (int i = 0; i < ctx->nunits; i++) gathers[i] = 1;
      else
        simulate_gathers(model, ms.nparams > 0 ? ms.nparams : 1, ctx->forward_prefetch, gathers, gathers + ctx->nunits);
      /* Rank 0's optimizer state: every trainable element of its shards (its shards hold no padding). */
      for (int i = 0; i < ctx->nunits; i++) {
        FlatParam u = ctx->units[i];
        int64_t shard = (u->numel + factor - 1) / factor;
        state += (size_t)(shard < u->numel ? shard : u->numel) * FSDPDataTypeSize(u->dtype);
      }
      for (int k = 1; !ierr && k <= MAX_ACCUM; k *= 2) {
        if (plan->batch % ((int64_t)k * w)) continue;
        for (int ckpt = 0; !ierr && ckpt < 2; ckpt++) {
          FSDPPlanCandidate *c;
          double collectives, t[2], timed;
          size_t act;
          if ((ierr = FSDPModelGetActivationBytes(model, plan->batch / ((int64_t)k * w), ckpt, &act))) break;
          if ((ierr = grow(plan, capacity))) break;
          c = &plan->cand[plan->ncand++];
          memset(c, 0, sizeof *c);
          c->strategy = (FSDPShardingStrategy)s;
          c->factor = factor;
          c->replicas = w / factor;
          c->wrap = wrap;
          c->nunits = ctx->nunits;
          c->batch = plan->batch / k;
          c->grad_accum = k;
          c->activation_checkpointing = ckpt;
          for (int m = 0; m < FSDP_MEM_NUM_CATEGORIES; m++) c->bytes[m] = ms.bytes[m];
          c->bytes[FSDP_MEM_OPTIM_STATE] = (size_t)nstates * state;
          c->bytes[FSDP_MEM_OTHER] = act + scratch;
          for (int m = 0; m < FSDP_MEM_NUM_CATEGORIES; m++) c->total += c->bytes[m];
          c->fits = !plan->budget || c->total <= plan->budget;
          count_bytes(ctx, plan, gathers, find_group(plan, factor), c, &collectives, t, &timed);
          predict_time(plan, c, collectives, t, timed);
        }
      }
    }
  }
  {
    FSDPErrorCode e = FSDPFree(&gathers), e2 = close_model(&ctx, &model);
    if (!ierr) ierr = e ? e : e2;
  }
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

/* A candidate as the ranking sees it: by its time when every candidate has
   one, else by its bytes (a time and a byte count do not compare), and
   where it was made, so that ties keep that order (qsort is not stable). */
typedef struct {
  FSDPPlanCandidate c;
  double cost;
  int made;
} Ranked;

/* Those that fit first, fastest first (no rates: fewest bytes), then smallest; ties keep the order made. */
static int rank_order(const void *pa, const void *pb)
{
  const Ranked *ra = pa, *rb = pb;
  const FSDPPlanCandidate *a = &ra->c, *b = &rb->c;
  double ta = ra->cost, tb = rb->cost;
  if (a->fits != b->fits) return a->fits ? -1 : 1;
  if (a->fits) {
    if (ta != tb) return ta < tb ? -1 : 1;
    /* Without rates, what costs no bytes may still cost compute: forward again. */
    if (a->activation_checkpointing != b->activation_checkpointing) return a->activation_checkpointing ? 1 : -1;
    /* Alike: fewer micro-batches, whose larger GEMMs run faster than this model counts. */
    if (a->grad_accum != b->grad_accum) return a->grad_accum < b->grad_accum ? -1 : 1;
  }
  if (a->total != b->total) return a->total < b->total ? -1 : 1;
  return (ra->made > rb->made) - (ra->made < rb->made);
}

static FSDPErrorCode rank_candidates(FSDPPlan plan)
{
  Ranked *r;
  bool timed = true;
  for (int i = 0; i < plan->ncand; i++) timed = timed && plan->cand[i].seconds >= 0;
  FSDPCall(FSDPMalloc((size_t)plan->ncand * sizeof *r + 1, FSDP_MEM_OTHER, &r));
  for (int i = 0; i < plan->ncand; i++) {
    const FSDPPlanCandidate *c = &plan->cand[i];
    r[i] = (Ranked){*c, timed ? c->seconds : c->shard_bytes + c->replicate_bytes, i};
  }
  qsort(r, (size_t)plan->ncand, sizeof *r, rank_order);
  for (int i = 0; i < plan->ncand; i++) plan->cand[i] = r[i].c;
  FSDPCall(FSDPFree(&r));
  return FSDP_SUCCESS;
}

/* On GPUs (-fsdp_device), a node of the topology runs a rank per GPU, and
   the auto budget is a GPU's memory. */
static FSDPErrorCode shape_for_device(FSDPPlan plan)
{
  FSDPContext opts = NULL;
  FSDPErrorCode ierr;
  FSDPCall(FSDPContextCreate(MPI_COMM_SELF, &opts));
  ierr = FSDPContextSetFromOptions(opts);
  if (!ierr) plan->on_gpu = opts->device != FSDP_DEVICE_HOST;
  (void)FSDPContextDestroy(&opts);
  FSDPCall(ierr);
  if (plan->topology[0]) { /* the ranks per node are the topology's */
    const bool gpus = plan->on_gpu && plan->topology_gpus > 0;
    const bool job = !strncmp(plan->shape_text, "FSDPPlanSetJob", strlen("FSDPPlanSetJob"));
    const int rpn = gpus ? plan->topology_gpus : plan->topology_cores;
    FSDPCall(check_shape("FSDPPlanSetUp", plan->nodes, rpn));
    plan->ranks_per_node = rpn;
    snprintf(plan->shape_text, sizeof plan->shape_text, "%sa rank per %s of the topology of %s",
             job ? "FSDPPlanSetJob, " : "", gpus ? "GPU" : "core", plan->topology);
    plan->shape_from = plan->shape_text;
  }
  if (plan->budget_auto) default_budget(plan);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanSetUp(FSDPPlan plan)
{
  int capacity = 0, w;
  CHECK_PLAN(plan);
  plan->setup = false; /* the shape may change below: no candidates of another */
  FSDPCall(shape_for_device(plan));
  w = plan->nodes * plan->ranks_per_node;
  FSDPCheck(plan->spec, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanSetUp: no model: call FSDPPlanSetModel first");
  FSDPCheck(plan->batch > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanSetUp: no batch: call FSDPPlanSetBatch first");
  FSDPCheck(plan->batch % w == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPPlanSetUp: the batch of %lld rows does not divide evenly over W = %d ranks (%d nodes x %d)",
            (long long)plan->batch, w, plan->nodes, plan->ranks_per_node);
  FSDPCall(FSDPFree(&plan->cand));
  plan->ncand = 0;
  plan->setup = false;
  FSDPCall(add_wrapping(plan, FSDP_WRAP_BLOCK, &capacity));
  FSDPCall(add_wrapping(plan, FSDP_WRAP_MODEL, &capacity));
  FSDPCall(rank_candidates(plan));
  plan->setup = true;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanGetNumCandidates(FSDPPlan plan, int *n)
{
  CHECK_PLAN_SETUP(plan);
  FSDPCheck(n, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanGetNumCandidates: n must not be NULL");
  *n = plan->ncand;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanGetCandidate(FSDPPlan plan, int i, FSDPPlanCandidate *candidate)
{
  CHECK_PLAN_SETUP(plan);
  FSDPCheck(candidate, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanGetCandidate: candidate must not be NULL");
  FSDPCheck(i >= 0 && i < plan->ncand, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPPlanGetCandidate: candidate %d does not exist: there are %d (0 to %d)", i, plan->ncand,
            plan->ncand - 1);
  *candidate = plan->cand[i];
  return FSDP_SUCCESS;
}

static const char *category_name(int m) { return m == FSDP_MEM_OTHER ? "activations" : FSDPMemCategoryName(m); }

static int dominant(const FSDPPlanCandidate *c)
{
  int most = 0;
  for (int m = 1; m < FSDP_MEM_NUM_CATEGORIES; m++)
    if (c->bytes[m] > c->bytes[most]) most = m;
  return most;
}

static void describe(const FSDPPlanCandidate *c, char *text, size_t len)
{
  static const char *const wraps[] = {"block", "model", "size"};
  snprintf(text, len,
           "strategy %s, F = %d, %s wrapping, %d micro-batch%s of %lld rows (%lld per rank), checkpointing %s",
           strategy_option[c->strategy], c->factor, wraps[c->wrap], c->grad_accum, c->grad_accum == 1 ? "" : "es",
           (long long)c->batch, (long long)(c->batch / (c->factor * c->replicas)),
           c->activation_checkpointing ? "on" : "off");
}

static void options_line(const FSDPPlanCandidate *c, char *text, size_t len)
{
  char f[48] = "";
  if (c->strategy == FSDP_HYBRID_SHARD || c->strategy == FSDP_HYBRID_SHARD_ZERO2)
    snprintf(f, sizeof f, " -fsdp_sharding_factor %d", c->factor);
  snprintf(text, len,
           "-fsdp_sharding_strategy %s%s -fsdp_wrap %s -fsdp_activation_checkpointing %s -batch %lld -grad_accum %d",
           strategy_option[c->strategy], f, c->wrap == FSDP_WRAP_MODEL ? "model" : "block",
           c->activation_checkpointing ? "true" : "false", (long long)c->batch, c->grad_accum);
}

FSDPErrorCode FSDPPlanGetChoice(FSDPPlan plan, int *index, char *options, size_t len)
{
  const FSDPPlanCandidate *c;
  if (index) *index = -1; /* on every error, too */
  CHECK_PLAN_SETUP(plan);
  FSDPCheck(!options || len > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanGetChoice: options has no room (len 0)");
  if (options) options[0] = '\0';
  FSDPCheck(plan->ncand > 0, MPI_COMM_SELF, FSDP_ERR_STATE, "FSDPPlanGetChoice: the planner found no candidate");
  c = &plan->cand[0];
  if (!c->fits) {
    char a[32], b[32], d[32], what[256];
    int m = dominant(c);
    FSDPFormatBytes(a, sizeof a, (double)plan->budget);
    FSDPFormatBytes(b, sizeof b, (double)c->total);
    FSDPFormatBytes(d, sizeof d, (double)c->bytes[m]);
    describe(c, what, sizeof what);
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_MEM,
              "FSDPPlanGetChoice: model '%s' fits no layout within the budget of %s per rank at W = %d (%d node%s "
              "x %d): the least any layout needs is %s per rank (%s), of which %s %s %s; use more ranks, a smaller "
              "batch or model, or a larger budget",
              plan->spec, a, plan->nodes * plan->ranks_per_node, plan->nodes, plan->nodes == 1 ? "" : "s",
              plan->ranks_per_node, b, what, d, m == FSDP_MEM_OTHER ? "are" : "is", category_name(m));
  }
  if (index) *index = 0;
  if (options) options_line(c, options, len);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ view */

/* v in units of 1000 (prefixes[0] is v's own unit), as "%.3g" prints it
   without an exponent: 12.5 ms, never 1.25e+04 us. */
static void format_scaled(char *text, size_t len, double v, const char *const prefixes[], int n, const char *unit)
{
  int i = 0;
  if (v <= 0) {
    snprintf(text, len, "unknown");
    return;
  }
  while (v >= 999.5 && i + 1 < n) v /= 1e3, i++;
  snprintf(text, len, "%.3g %s%s", v, prefixes[i], unit);
}

static void format_rate(char *text, size_t len, double v, const char *unit)
{
  static const char *const prefixes[] = {"", "k", "M", "G", "T", "P"};
  format_scaled(text, len, v, prefixes, 6, unit);
}

static void format_seconds(char *text, size_t len, double s)
{
  if (s < 0) snprintf(text, len, "-");
  else snprintf(text, len, "%.4g", s * 1e3);
}

/* The timed collectives, and whether they stand for this job's. */
static FSDPErrorCode view_groups(FSDPViewer v, const FSDPPlan plan)
{
  static const char *const kinds[COMM_NUM_KINDS] = {"all-gather", "reduce-scatter", "all-reduce"};
  FSDPCall(FSDPViewerASCIIPrintf(
      v,
      "collectives (timed by FSDPPlanProbe on %d node%s x %d rank%s, every group at once; ms for a rank's shard of "
      "the sizes shown)%s\n",
      plan->timed_nodes, plan->timed_nodes == 1 ? "" : "s", plan->timed_rpn, plan->timed_rpn == 1 ? "" : "s",
      find_group(plan, 1) ? ": the comm column sums them over each candidate's collectives"
                          : ": not this job's shape, so the comm column counts bytes at the rates"));
  FSDPCall(FSDPViewerASCIIPushTab(v));
  for (int i = 0; i < plan->ngroups; i++) {
    const GroupTiming *g = &plan->groups[i];
    char line[400], b[PROBE_SIZES][32];
    int len;
    bool first = true;
    for (int j = 0; j < PROBE_SIZES; j++) FSDPFormatBytes(b[j], sizeof b[j], g->bytes[j]);
    len = snprintf(line, sizeof line, "F = %d (%s, %s, %s):", g->factor, b[0], b[1], b[2]);
    for (int k = 0; k < COMM_NUM_KINDS; k++) {
      const double *t = g->seconds[k];
      char across[48] = "";
      if (t[0] < 0 || len <= 0 || (size_t)len >= sizeof line) continue;
      if (k == COMM_ALLREDUCE)
        snprintf(across, sizeof across, " across %d replicas", plan->timed_nodes * plan->timed_rpn / g->factor);
      else if (g->shm) snprintf(across, sizeof across, " in node shared memory");
      len += snprintf(line + len, sizeof line - (size_t)len, "%s %s%s %.3g, %.3g, %.3g", first ? "" : ";", kinds[k],
                      across, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3);
      first = false;
    }
    FSDPCall(FSDPViewerASCIIPrintf(v, "%s\n", line));
  }
  FSDPCall(FSDPViewerASCIIPopTab(v));
  return FSDP_SUCCESS;
}

static FSDPErrorCode plan_view(FSDPViewer v, void *arg)
{
  FSDPPlan plan = arg;
  char a[32], b[32], c[32], d[32], line[512];
  static const char *const wraps[] = {"block", "model", "size"};

  FSDPCall(FSDPViewerASCIIPrintf(v, "FSDPPlan: model '%s', %lld parameters, %.4g GFLOP per row forward\n", plan->spec,
                                 (long long)plan->numel, plan->row_flops / 1e9));
  FSDPCall(FSDPViewerASCIIPushTab(v));
  FSDPCall(FSDPViewerASCIIPrintf(v, "job: %d node%s x %d rank%s (W = %d), from %s; %lld rows per step; optimizer %s\n",
                                 plan->nodes, plan->nodes == 1 ? "" : "s", plan->ranks_per_node,
                                 plan->ranks_per_node == 1 ? "" : "s", plan->nodes * plan->ranks_per_node,
                                 plan->shape_from, (long long)plan->batch, FSDPOptimizerTypeName(plan->opt_type)));
  FSDPFormatBytes(a, sizeof a, (double)plan->budget);
  FSDPCall(FSDPViewerASCIIPrintf(v, "memory budget per rank: %s (%s)\n", plan->budget ? a : "none", plan->budget_from));
  format_rate(a, sizeof a, plan->flops, "FLOP/s");
  format_rate(b, sizeof b, plan->intra, "B/s");
  format_rate(c, sizeof c, plan->inter, "B/s");
  format_scaled(d, sizeof d, plan->latency * 1e6, (const char *const[]){"u", "m", ""}, 3, "s");
  FSDPCall(FSDPViewerASCIIPrintf(v, "rates (%s): compute %s per rank, intra-node %s, inter-node %s, latency %s\n",
                                 plan->rates_from, a, b, c, d));
  if (plan->model_rows[1] > 0)
    FSDPCall(FSDPViewerASCIIPrintf(
        v,
        "the model's step (measured by FSDPPlanProbe, unsharded, every rank at once%s): forward and backward %.6g ms "
        "for %lld row%s, %.6g ms for %lld; the optimizer %.6g ms for all %lld parameters; the compute column scales "
        "these\n",
        plan->model_timing == MODEL_TIMED_GPU ? ", each on its GPU" : "", plan->model_seconds[0] * 1e3,
        (long long)plan->model_rows[0], plan->model_rows[0] == 1 ? "" : "s", plan->model_seconds[1] * 1e3,
        (long long)plan->model_rows[1], plan->opt_seconds * 1e3, (long long)plan->numel));
  else if (plan->model_timing == MODEL_TOO_LARGE || plan->model_timing == MODEL_NO_GPU)
    FSDPCall(FSDPViewerASCIIPrintf(v,
                                   "the model's step: not timed (%s); the compute column is its GEMMs at the rate "
                                   "above%s\n",
                                   plan->model_timing == MODEL_NO_GPU
                                       ? "-fsdp_device is a GPU's, but a rank sees no GPU"
                                   : plan->on_gpu ? "its parameters, gradients and optimizer state pass half the "
                                                    "budget, or 1 GiB without one"
                                                  : "its parameters, gradients and optimizer state pass 1 GiB or "
                                                    "half the budget",
                                   plan->on_gpu ? " (a GPU's, given with -flops: the probe measures none)" : ""));
  if (plan->ngroups > 0) FSDPCall(view_groups(v, plan));
  FSDPCall(FSDPViewerASCIIPrintf(v, "candidates, per rank (MiB; times in ms; '-': not predicted without rates):\n"));
  FSDPCall(FSDPViewerASCIIPrintf(v,
                                 "%4s %-12s %4s %4s %5s %4s %8s %4s %9s %9s %9s %9s %9s %9s %9s %10s %10s %10s %9s "
                                 "%9s %9s %4s\n",
                                 "rank", "strategy", "F", "R", "wrap", "K", "rows", "ckpt", "params", "grads", "optim",
                                 "unshard", "staging", "activ", "total", "shard MB", "repl MB", "inter MB", "compute",
                                 "comm", "step", "fits"));
  for (int i = 0; i < plan->ncand; i++) {
    const FSDPPlanCandidate *x = &plan->cand[i];
    char t[3][24];
    const double mib = 1024.0 * 1024.0;
    format_seconds(t[0], sizeof t[0], x->compute_seconds);
    format_seconds(t[1], sizeof t[1], x->comm_seconds);
    format_seconds(t[2], sizeof t[2], x->seconds);
    snprintf(line, sizeof line,
             "%4d %-12s %4d %4d %5s %4d %8lld %4s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.3f %10.3f %10.3f %9s "
             "%9s %9s %4s\n",
             i, strategy_option[x->strategy], x->factor, x->replicas, wraps[x->wrap], x->grad_accum,
             (long long)(x->batch / (x->factor * x->replicas)), x->activation_checkpointing ? "on" : "off",
             (double)x->bytes[FSDP_MEM_PARAMS] / mib, (double)x->bytes[FSDP_MEM_GRADS] / mib,
             (double)x->bytes[FSDP_MEM_OPTIM_STATE] / mib, (double)x->bytes[FSDP_MEM_UNSHARDED] / mib,
             (double)x->bytes[FSDP_MEM_COMM_STAGING] / mib, (double)x->bytes[FSDP_MEM_OTHER] / mib,
             (double)x->total / mib, x->shard_bytes / 1e6, x->replicate_bytes / 1e6, x->inter_node_bytes / 1e6, t[0],
             t[1], t[2], x->fits ? "yes" : "no");
    FSDPCall(FSDPViewerASCIIPrintf(v, "%s", line));
  }
  if (plan->ncand > 0 && plan->cand[0].fits) {
    const FSDPPlanCandidate *x = &plan->cand[0];
    options_line(x, line, sizeof line);
    FSDPCall(FSDPViewerASCIIPrintf(v, "choice: %s\n", line));
    /* As -fsdp_view and -fsdp_log_view name and print them. */
    FSDPCall(FSDPViewerASCIIPrintf(v, "  memory per rank:"));
    for (int m = 0; m < FSDP_MEM_NUM_CATEGORIES; m++) {
      FSDPFormatBytes(a, sizeof a, (double)x->bytes[m]);
      FSDPCall(FSDPViewerASCIIPrintf(v, " %s %s,", category_name(m), a));
    }
    FSDPFormatBytes(a, sizeof a, (double)x->total);
    FSDPCall(FSDPViewerASCIIPrintf(v, " total %s\n", a));
  } else if (plan->ncand > 0) {
    const FSDPPlanCandidate *x = &plan->cand[0];
    int m = dominant(x);
    FSDPFormatBytes(a, sizeof a, (double)x->total);
    FSDPFormatBytes(b, sizeof b, (double)x->bytes[m]);
    describe(x, line, sizeof line);
    FSDPCall(FSDPViewerASCIIPrintf(
        v, "choice: none fits the budget; the least any layout needs is %s per rank (%s), most of it %s (%s)\n", a,
        line, category_name(m), b));
  }
  FSDPCall(FSDPViewerASCIIPopTab(v));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanView(FSDPPlan plan, FSDPViewer viewer)
{
  CHECK_PLAN_SETUP(plan);
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, plan->comm, plan_view, plan));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPlanDestroy(FSDPPlan *plan)
{
  FSDPCheck(plan, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPPlanDestroy: plan must not be NULL");
  if (!*plan) return FSDP_SUCCESS;
  FSDPCall(FSDPFree(&(*plan)->cand));
  FSDPCall(FSDPFree(&(*plan)->groups));
  FSDPCall(FSDPFree(&(*plan)->spec));
  FSDPCall(FSDPFree(plan));
  return FSDP_SUCCESS;
}
