/* fsdp-plan: the layout to run a model with, chosen before the job runs
   (doc/fsdp-plan.md).  Its options are FSDPPlanSetFromOptions's under short
   names (-model SPEC is -fsdp_plan_model SPEC, and so on), so that the tool
   and a program calling FSDPPlan read them alike.
     fsdp-plan -model gpt:vocab=256,ctx=64,dim=128,heads=4,layers=4 -nodes 4 -ranks_per_node 8 -batch 256 -memory 2G
     mpiexec -n 8 fsdp-plan -model ... -probe */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_nn.h"

typedef struct {
  const char *name;   /* fsdp-plan's */
  const char *option; /* the library's; NULL: the tool's own */
  const char *help;
} Option;

static const Option options[] = {
    {"-model", "-fsdp_plan_model",
     "the model, as fsdp-train's -model (mlp:..., cnn:..., unet:..., fno:..., gpt:..., file:NAME)"},
    {"-nodes", "-fsdp_plan_nodes", "nodes of the job (default: this job's, or the Slurm allocation's when run alone)"},
    {"-ranks_per_node", "-fsdp_plan_ranks_per_node", "ranks per node (default: likewise)"},
    {"-topology", "-fsdp_plan_topology",
     "a node's hwloc XML (lstopo node.xml) or synthetic topology: a rank per core (per GPU with -fsdp_device cuda), "
     "its memory (a GPU's) for -memory auto"},
    {"-batch", "-fsdp_plan_batch", "rows per optimizer step, all ranks and micro-batches together (default 64)"},
    {"-memory", "-fsdp_plan_memory",
     "memory budget per rank: auto (this node's memory shared by its ranks; on GPUs a GPU's from -topology; the "
     "default), none, or bytes (12G)"},
    {"-optimizer", "-fsdp_plan_optimizer", "adamw (the default) or sgd"},
    {"-momentum", "-fsdp_plan_momentum", "sgd's momentum (0: no state)"},
    {"-flops", "-fsdp_plan_flops", "fp32 FLOP/s of one rank"},
    {"-intra_bw", "-fsdp_plan_intra_bw", "bytes/s a rank sends to another rank of its node"},
    {"-inter_bw", "-fsdp_plan_inter_bw", "bytes/s a rank sends to another node"},
    {"-latency", "-fsdp_plan_latency", "seconds of one small message"},
    {"-probe", NULL,
     "measure the rates on this job first (GEMMs, ping-pongs, the model itself, the collectives; a few seconds)"},
    {"-options_out", NULL, "write the chosen layout to this file, an -options_file for fsdp-train"},
};
#define NOPTIONS ((int)(sizeof options / sizeof options[0]))

typedef struct {
  bool probe, help;
  char options_out[4096];
} Args;

/* A word that starts an option, not a negative number. */
static bool is_key(const char *s)
{
  char *end;
  if (s[0] != '-') return false;
  (void)strtod(s, &end);
  return *end != '\0';
}

static void print_help(void)
{
  printf("fsdp-plan: the sharding layout for a model and a job, chosen before the job runs (man fsdp-plan)\n"
         "usage: fsdp-plan -model SPEC [-nodes N] [-ranks_per_node R | -topology XML] [-batch B] [-memory SIZE] [rates "
         "| -probe]\n");
  for (int i = 0; i < NOPTIONS; i++) printf("  %-16s %s\n", options[i].name, options[i].help);
  printf("and libfsdp's -fsdp_* options that change the memory plan (-fsdp_param_dtype, -fsdp_limit_all_gathers, "
         "...); they follow:\n");
  fflush(stdout);
}

/* The tool's options become the library's (FSDPPlanSetFromOptions reads them); -fsdp_* and -help are the library's. */
static FSDPErrorCode parse_args(int argc, char **argv, Args *a)
{
  for (int i = 1; i < argc; i++) {
    const char *t = argv[i];
    const Option *o = NULL;
    if (!strcmp(t, "-help") || !strncmp(t, "-fsdp_", 6) || !strncmp(t, "-options_file", 13)) {
      if (!strcmp(t, "-help")) a->help = true;
      if (!strchr(t, '=') && i + 1 < argc && !is_key(argv[i + 1])) i++;
      continue;
    }
    for (int k = 0; k < NOPTIONS && !o; k++)
      if (!strcmp(options[k].name, t)) o = &options[k];
    FSDPCheck(o, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-plan: unknown option '%s' (fsdp-plan -help lists them)", t);
    if (!strcmp(t, "-probe")) {
      a->probe = true;
      if (i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false")))
        a->probe = !strcmp(argv[++i], "true");
      continue;
    }
    FSDPCheck(i + 1 < argc, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-plan: option %s needs a value", t);
    if (!o->option) {
      FSDPCheck(strlen(argv[i + 1]) < sizeof a->options_out, MPI_COMM_SELF, FSDP_ERR_OPTION,
                "fsdp-plan: %s: the file name is too long", t);
      strcpy(a->options_out, argv[++i]);
      continue;
    }
    FSDPCall(FSDPOptionsSetValue(o->option, argv[++i]));
  }
  return FSDP_SUCCESS;
}

/* Rank 0 writes the chosen options as an options file (every rank learns whether it could). */
static FSDPErrorCode write_options(const char *path, const char *line)
{
  int rank, ok = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    FILE *f = fopen(path, "w");
    ok = f && fprintf(f, "# chosen by fsdp-plan (doc/fsdp-plan.md)\n%s\n", line) > 0;
    if (f && fclose(f)) ok = 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  FSDPCheck(ok, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-plan: -options_out %s cannot be written", path);
  return FSDP_SUCCESS;
}

static FSDPErrorCode plan_job(const Args *a, bool *fits)
{
  FSDPPlan plan;
  char line[1024], spec[4096];
  bool have_model;
  FSDPErrorCode ierr;
  const char *msg;
  int rank;

  *fits = false;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  FSDPCall(FSDPOptionsGetString("-fsdp_plan_model", "FSDPPlan: the model, as -model spec", "", spec, sizeof spec,
                                &have_model));
  FSDPCheck(have_model && spec[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-plan: -model SPEC is required (fsdp-plan -help lists the options)");
  FSDPCall(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  FSDPCall(FSDPPlanSetBatch(plan, 64));
  FSDPCall(FSDPPlanSetFromOptions(plan));
  if (a->probe) FSDPCall(FSDPPlanProbe(plan));
  FSDPCall(FSDPPlanSetUp(plan));
  FSDPCall(FSDPPlanView(plan, NULL));
  /* Fitting nowhere is an answer, not a failure of the tool: said once, without a traceback. */
  FSDPCall(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  ierr = FSDPPlanGetChoice(plan, NULL, line, sizeof line);
  FSDPCall(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  if (ierr == FSDP_ERR_MEM) {
    FSDPGetLastError(NULL, &msg, NULL);
    if (rank == 0) fprintf(stderr, "fsdp-plan: %s\n", msg);
  } else if (ierr) return FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, ierr, "fsdp-plan: no choice");
  else {
    *fits = true;
    if (a->options_out[0]) FSDPCall(write_options(a->options_out, line));
  }
  FSDPCall(FSDPPlanDestroy(&plan));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  Args a = {0};
  bool fits = false;
  FSDPErrorCode ierr;
  int rank;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ierr = parse_args(argc, argv, &a);
  if (!ierr && a.help) {
    FSDPPlan plan;
    if (rank == 0) print_help();
    /* The library's options, each printed as it is read. */
    ierr = FSDPPlanCreate(MPI_COMM_WORLD, &plan);
    if (!ierr) ierr = FSDPPlanSetFromOptions(plan);
    if (!ierr) ierr = FSDPPlanDestroy(&plan);
  } else if (!ierr) ierr = plan_job(&a, &fits);
  if (ierr) FSDPErrorAbort(MPI_COMM_WORLD, ierr);
  if (FSDPFinalize()) return 1;
  return a.help || fits ? 0 : 1;
}
