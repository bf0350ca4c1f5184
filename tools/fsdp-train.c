/* fsdp-train: train an MLP with libfsdp on an HDF5 data set (or a synthetic
   one), the way a batch job does: progress lines, a loss log, and a summary
   of time, throughput and memory against the FSDP formula.
     mpiexec -n 4 fsdp-train -model mlp:in=16,hidden=256,depth=4,out=4 \
       -data synthetic -steps 200 -batch 64 -fsdp_sharding_strategy hybrid
   doc/fsdp-train.md describes every option. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

/* ------------------------------------------------------------------ checkpoints and signals */

/* SIGUSR1 and SIGTERM (sbatch --signal, pre-emption), and SIGINT (Ctrl-C,
   which mpiexec forwards), ask for a checkpoint at the next step boundary;
   the handler only records which one came. */
static volatile sig_atomic_t signal_caught;

/* libfsdp is told too: a collective that a dead or stuck peer never joins
   then aborts the job after -fsdp_signal_grace seconds, not at the watchdog. */
static void on_signal(int signo)
{
  signal_caught = signo;
  FSDPNotifySignal(signo);
}

/* Installed first thing in main, before MPI starts: a signal during start-up
   is recorded too, and the job stops cleanly before its first step. */
static int catch_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART; /* a write under way when the signal comes goes on */
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) == 0 && sigaction(SIGTERM, &sa, NULL) == 0 && sigaction(SIGINT, &sa, NULL) == 0)
    return 0;
  fprintf(stderr, "fsdp-train: cannot install the SIGUSR1, SIGTERM and SIGINT handlers: %s\n", strerror(errno));
  return 1;
}

static const char *signal_name(int signo)
{
  return signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT" : "SIGUSR1";
}

/* Test hook: FSDP_TEST_STARTUP_PAUSE=seconds stops every rank in start-up,
   after MPI is up, and rank 0 first creates the file that
   FSDP_TEST_STARTUP_MARKER names, so a test can signal the job there. */
static void pause_for_test(void)
{
  const char *env = getenv("FSDP_TEST_STARTUP_PAUSE"), *marker = getenv("FSDP_TEST_STARTUP_MARKER");
  int rank;
  if (!env || atoi(env) <= 0) return;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && marker) {
    FILE *fp = fopen(marker, "w");
    if (fp) fclose(fp);
  }
  sleep((unsigned)atoi(env)); /* a signal ends it early */
}

/* What every rank learns at a step boundary, in one small all-reduce: the
   signal any rank caught (0: none; a signal may reach only some ranks), and
   the errno of rank 0's failed write to the loss log (0: none).  Waited for
   as the context waits (it sleeps on an oversubscribed node). */
static FSDPErrorCode agree_at_boundary(FSDPContext ctx, int log_errno, int *signo, int *log_failed)
{
  MPI_Request req;
  int v[2] = {signal_caught, log_errno};
  FSDPCallMPI(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
  FSDPCall(FSDPContextWait(ctx, &req));
  *signo = v[0];
  *log_failed = v[1];
  return FSDP_SUCCESS;
}

/* A checkpoint after `step` steps, at the position the last step recorded.
   The loss log already holds every step it has: each row is flushed, and
   the ranks agreed that it was written, at the step's boundary. */
static FSDPErrorCode save_checkpoint(FSDPContext ctx, FSDPOptimizer opt, const Args *a, int64_t step, int rank)
{
  double t0 = MPI_Wtime();
  FSDPCall(FSDPContextSave(ctx, opt, a->checkpoint_file));
  if (rank == 0 && a->log_every > 0) {
    printf("fsdp-train: step %lld: checkpoint %s written in %.3f s\n", (long long)step, a->checkpoint,
           MPI_Wtime() - t0);
    fflush(stdout);
  }
  return FSDP_SUCCESS;
}

/* Rank 0's loss log while the job runs: main closes it when training fails
   (every finished step's row has been flushed to it already). */
static FILE *running_log;

/* The errno of a failed stdio call (EIO where the library set none). */
static int failed_errno(void) { return errno ? errno : EIO; }

/* With -resume: rank 0 keeps the loss log's header and its rows up to the
   checkpoint's step, so that the log reads as if the job never stopped.  The
   rows go to path.resume, which is renamed over the log: a failure leaves
   the log as it was, and msg says what failed. */
static FILE *reopen_loss_log(const Args *a, int64_t step, char *msg, size_t len)
{
  const char *path = a->loss_log_file;
  FILE *in, *out;
  char line[256], tmp[PATH_MAX + 16];
  int rerr = 0, werr = 0;
  errno = 0;
  in = fopen(path, "r");
  if (!in && errno != ENOENT) {
    snprintf(msg, len, "fsdp-train: -loss_log '%s': cannot read it to keep its rows up to step %lld: %s", a->loss_log,
             (long long)step, strerror(failed_errno()));
    return NULL;
  }
  if (!in) { /* no log yet: a new one */
    out = fopen(path, "w");
    if (!out || fputs("step,loss\n", out) < 0 || fflush(out)) {
      snprintf(msg, len, "fsdp-train: -loss_log '%s': cannot write it: %s", a->loss_log, strerror(failed_errno()));
      if (out) fclose(out);
      return NULL;
    }
    return out;
  }
  snprintf(tmp, sizeof tmp, "%s.resume", path);
  errno = 0;
  out = fopen(tmp, "w");
  if (!out || fputs("step,loss\n", out) < 0) werr = failed_errno();
  while (!werr && fgets(line, sizeof line, in)) {
    char *end;
    long long s = strtoll(line, &end, 10);
    if (end != line && *end == ',' && s <= step && fputs(line, out) < 0) werr = failed_errno();
  }
  if (!werr && ferror(in)) rerr = failed_errno();
  fclose(in);
  errno = 0;
  if (out && fclose(out) && !werr) werr = failed_errno();
  if (rerr || werr) {
    if (rerr)
      snprintf(msg, len, "fsdp-train: -loss_log '%s': cannot read it to keep its rows up to step %lld: %s", a->loss_log,
               (long long)step, strerror(rerr));
    else
      snprintf(msg, len, "fsdp-train: -loss_log '%s': cannot write its temporary '%s': %s (the log is as it was)",
               a->loss_log, tmp, strerror(werr));
    unlink(tmp);
    return NULL;
  }
  if (rename(tmp, path)) {
    snprintf(msg, len, "fsdp-train: -loss_log '%s': cannot rename its temporary '%s' over it: %s", a->loss_log, tmp,
             strerror(errno));
    unlink(tmp);
    return NULL;
  }
  out = fopen(path, "a");
  if (!out)
    snprintf(msg, len, "fsdp-train: -loss_log '%s': cannot open it to append: %s", a->loss_log,
             strerror(failed_errno()));
  return out;
}

/* ------------------------------------------------------------------ training */

static FSDPErrorCode configure_optimizer(FSDPContext ctx, FSDPOptimizer opt, const Args *a)
{
  FSDPDataType pdt, rdt;
  if (!strcmp(a->optimizer, "sgd")) FSDPCall(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_SGD));
  else if (!strcmp(a->optimizer, "adamw")) FSDPCall(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_ADAMW));
  else return TRAIN_ERR(FSDP_ERR_OPTION, "fsdp-train: -optimizer %s is not sgd or adamw", a->optimizer);
  FSDPCall(FSDPOptimizerSetLearningRate(opt, a->lr));
  if (arg_set("-weight_decay")) FSDPCall(FSDPOptimizerSetWeightDecay(opt, a->weight_decay));
  if (a->no_decay[0]) { /* one group per pattern, without decay */
    char list[sizeof a->no_decay], *item, *save = NULL;
    snprintf(list, sizeof list, "%s", a->no_decay);
    for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save))
      FSDPCall(FSDPOptimizerAddParamGroup(opt, item, 0.0, 1.0));
  }
  if (arg_set("-momentum") || arg_set("-nesterov")) FSDPCall(FSDPOptimizerSetMomentum(opt, a->momentum, a->nesterov));
  FSDPCall(FSDPOptimizerSetBetas(opt, a->beta1, a->beta2));
  FSDPCall(FSDPOptimizerSetEps(opt, a->eps));
  if (!strcmp(a->lr_schedule, "constant")) FSDPCall(FSDPOptimizerSetSchedule(opt, FSDP_LR_CONSTANT, 0, 0));
  else if (!strcmp(a->lr_schedule, "cosine")) {
    FSDPCheck(a->warmup_steps >= 0 && a->warmup_steps < a->steps, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -warmup_steps %lld must be in [0, -steps %lld) for the cosine schedule",
              (long long)a->warmup_steps, (long long)a->steps);
    FSDPCall(FSDPOptimizerSetSchedule(opt, FSDP_LR_COSINE, a->warmup_steps, a->steps));
  } else return TRAIN_ERR(FSDP_ERR_OPTION, "fsdp-train: -lr_schedule %s is not constant or cosine", a->lr_schedule);
  FSDPCall(FSDPOptimizerSetClipGradNorm(opt, a->clip_grad_norm));
  /* fp16's range needs loss scaling; -fsdp_grad_scaler false still turns it off. */
  FSDPCall(FSDPContextGetMixedPrecision(ctx, &pdt, &rdt));
  if (pdt == FSDP_FLOAT16 || rdt == FSDP_FLOAT16) FSDPCall(FSDPOptimizerSetGradScaler(opt, true));
  FSDPCall(FSDPOptimizerSetFromOptions(opt));
  return FSDP_SUCCESS;
}

/* The context, the model and its data, the optimizer; -init or -resume. */
static FSDPErrorCode set_up(Run *r, Args *a)
{
  bool check_finite, scaler;
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &r->ctx));
  FSDPCall(FSDPContextSetFromOptions(r->ctx));
  FSDPCall(FSDPContextGetCheckFinite(r->ctx, &check_finite));
  FSDPCall(preflight(r->ctx, a));
  FSDPCall(FSDPModelCreate(r->ctx, a->model, &r->model));
  FSDPCall(FSDPModelSetSeed(r->model, (uint64_t)a->seed));
  FSDPCall(FSDPModelSetFromOptions(r->model));
  FSDPCall(FSDPModelGetSizes(r->model, &r->in, &r->out, &r->numel));
  FSDPCall(load_data(a->data, r->model, (uint64_t)a->seed, &r->data));
  if (check_finite) FSDPCall(check_data_finite(&r->data, a->data));
  FSDPCall(check_generate(a, r->model, &r->data));
  FSDPCall(FSDPModelSetUp(r->model));
  if (a->init[0]) FSDPCall(FSDPContextLoad(r->ctx, NULL, a->init));
  FSDPCall(FSDPOptimizerCreate(r->ctx, &r->opt));
  FSDPCall(configure_optimizer(r->ctx, r->opt, a));
  FSDPCall(FSDPOptimizerSetUp(r->opt));
  if (a->resume[0]) {
    FSDPTrainingState ts;
    FSDPCall(FSDPContextLoad(r->ctx, r->opt, a->resume));
    FSDPCall(FSDPContextGetTrainingState(r->ctx, &ts));
    /* The load refused a negative step or cursor as damage. */
    FSDPCheck(ts.step <= a->steps, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -resume %s is at step %lld, beyond -steps %lld", a->resume, (long long)ts.step,
              (long long)a->steps);
    FSDPCall(check_resume(a, &ts, &r->data));
    r->first = ts.step;
    r->cursor = ts.data_cursor;
  } else { /* what a checkpoint before the first step records (-init loaded its file's) */
    FSDPTrainingState ts = {0, 0, {(uint64_t)a->seed, r->data.hash, (uint64_t)a->batch, (uint64_t)a->grad_accum}};
    FSDPCall(FSDPContextSetTrainingState(r->ctx, &ts));
  }
  /* fp16's overflows are the gradient scaler's: it skips those steps. */
  FSDPCall(FSDPOptimizerGetGradScaler(r->opt, &scaler));
  r->guard_loss = check_finite && !scaler;
  return FSDP_SUCCESS;
}

/* Collective: rank 0 opens the loss log and writes its header; every rank
   learns whether it could, and why not. */
static FSDPErrorCode open_loss_log(Run *r, const Args *a)
{
  char msg[2 * PATH_MAX] = "";
  if (!a->loss_log[0]) return FSDP_SUCCESS;
  if (r->rank == 0) {
    /* Only now, with the checkpoint loaded and verified, is the old log rewritten. */
    if (a->resume[0]) r->log = reopen_loss_log(a, r->first, msg, sizeof msg);
    else {
      errno = 0;
      r->log = fopen(a->loss_log_file, "w");
      if (!r->log || fputs("step,loss\n", r->log) < 0 || fflush(r->log))
        snprintf(msg, sizeof msg, "fsdp-train: -loss_log '%s': cannot write it: %s", a->loss_log,
                 strerror(failed_errno()));
    }
    running_log = r->log;
  }
  FSDPCallMPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD));
  FSDPCheck(!msg[0], MPI_COMM_SELF, FSDP_ERR_IO, "%s", msg);
  return FSDP_SUCCESS;
}

/* A failed write to rank 0's loss log ends the job on every rank, at the step
   boundary where they learn of it (err is rank 0's errno). */
static FSDPErrorCode check_loss_log(const Args *a, int err, int64_t step)
{
  FSDPCheck(!err, MPI_COMM_SELF, FSDP_ERR_IO,
            "fsdp-train: -loss_log '%s': writing the row of step %lld failed on rank 0: %s (training stopped)",
            a->loss_log, (long long)step, strerror(err));
  return FSDP_SUCCESS;
}

/* Collective: rank 0 closes the loss log; a failure (a file system that
   reports a lost write only at close) is every rank's error. */
static FSDPErrorCode close_loss_log(Run *r, const Args *a)
{
  int err = 0;
  if (!a->loss_log[0]) return FSDP_SUCCESS;
  if (r->log) {
    errno = 0;
    if (fclose(r->log)) err = failed_errno();
    r->log = running_log = NULL;
  }
  FSDPCallMPI(MPI_Bcast(&err, 1, MPI_INT, 0, MPI_COMM_WORLD));
  FSDPCheck(!err, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: -loss_log '%s': closing it failed on rank 0: %s",
            a->loss_log, strerror(err));
  return FSDP_SUCCESS;
}

/* Step s + 1: K micro-batches forward and backward, the global loss when
   something uses it, the guard, the optimizer step, the log's row. */
static FSDPErrorCode train_step(Run *r, const Args *a, int64_t s, bool progress)
{
  double local = 0, step_loss, scale;
  float *dy, *pred;
  FSDPCall(FSDPOptimizerGetGradScale(r->opt, &scale, NULL));
  FSDPCall(FSDPContextZeroGrad(r->ctx));
  for (int64_t k = 0; k < r->K; k++) {
    double l;
    take_batch(&r->data, r->cursor + k, a->batch, r->rank, r->size, r->x, r->yt, r->labels);
    /* Like no_sync(): only the last micro-batch communicates gradients. */
    FSDPCall(FSDPContextSetGradSync(r->ctx, k == r->K - 1));
    FSDPCall(FSDPModelForward(r->model, r->per, r->x, &pred));
    /* The loss of the step is the mean over micro-batches, scaled for fp16.
       On a GPU the batch is copied up and the loss computed there. */
    if (r->labels) FSDPCall(FSDPModelLoss(r->model, FSDP_LOSS_CROSS_ENTROPY, r->labels, scale / (double)r->K, &l, &dy));
    else FSDPCall(FSDPModelLoss(r->model, FSDP_LOSS_MSE, r->yt, scale / (double)r->K, &l, &dy));
    FSDPCall(FSDPModelBackward(r->model, dy));
    local += l;
  }
  /* The global loss costs an all-reduce: for a step something prints, or the guard.
     Every rank's rows count the same: the global mean is the mean of the ranks' means.
     (Only rank 0 holds the log file; every rank knows whether there is one.) */
  if (a->loss_log[0] || progress || r->guard_loss) {
    MPI_Request req;
    FSDPCallMPI(MPI_Iallreduce(&local, &step_loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
    FSDPCall(FSDPContextWait(r->ctx, &req));
    r->loss = step_loss / (double)r->size / (double)r->K;
  }
  /* Before the step, so that no parameter and no checkpoint takes the value in. */
  FSDPCheck(!r->guard_loss || isfinite(r->loss), MPI_COMM_WORLD, FSDP_ERR_NOT_FINITE,
            "fsdp-train: step %lld: the loss is %g: training stopped before this step's update "
            "(-fsdp_check_finite false trains on)",
            (long long)(s + 1), r->loss);
  FSDPCall(FSDPOptimizerStep(r->opt));
  r->cursor += r->K;
  r->done++;
  {
    /* Where a checkpoint or an export of this point resumes: the step, the next batch, and what
       decides the batches after it (check_resume): the seed, the data, the batch, the micro-batches. */
    FSDPTrainingState ts = {
        s + 1, r->cursor, {(uint64_t)a->seed, r->data.hash, (uint64_t)a->batch, (uint64_t)a->grad_accum}};
    FSDPCall(FSDPContextSetTrainingState(r->ctx, &ts));
  }
  if (r->log && !r->log_errno) { /* flushed: `tail -f`, and a batch system's monitoring, see each step as it ends */
    errno = 0;
    if (fprintf(r->log, "%lld,%.9g\n", (long long)(s + 1), r->loss) < 0 || fflush(r->log))
      r->log_errno = failed_errno(); /* every rank learns of it at this step's boundary */
  }
  return FSDP_SUCCESS;
}

/* The steps, until -steps or a signal; then the final checkpoint and export. */
static FSDPErrorCode run_steps(Run *r, const Args *a)
{
  bool stopped = false; /* by a signal */
  int startup_signal, log_failed;
  /* A signal during start-up (the handlers are installed before MPI is): stop before the first step. */
  FSDPCall(agree_at_boundary(r->ctx, 0, &startup_signal, &log_failed));
  if (startup_signal) {
    if (r->rank == 0) {
      printf("fsdp-train: %s during start-up, before step %lld: exiting; nothing to save\n",
             signal_name(startup_signal), (long long)r->first + 1);
      fflush(stdout);
    }
    stopped = true;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  r->t_start = r->t_last = MPI_Wtime();
  r->last_logged = r->first;
  for (int64_t s = r->first; s < a->steps && !stopped; s++) {
    bool progress = a->log_every > 0 && ((s + 1) % a->log_every == 0 || s + 1 == a->steps);
    int signo;
    FSDPCall(train_step(r, a, s, progress));
    if (progress) FSDPCall(print_progress(r, a, s));
    FSDPCall(agree_at_boundary(r->ctx, r->log_errno, &signo, &log_failed));
    FSDPCall(check_loss_log(a, log_failed, s + 1));
    if (signo) {
      if (a->checkpoint[0]) FSDPCall(save_checkpoint(r->ctx, r->opt, a, s + 1, r->rank));
      if (r->rank == 0) {
        printf("fsdp-train: %s after step %lld: %s; exiting\n", signal_name(signo), (long long)(s + 1),
               a->checkpoint[0] ? "checkpoint written" : "no -checkpoint given, nothing saved");
        fflush(stdout);
      }
      stopped = true;
      break;
    }
    if (a->checkpoint_every && (s + 1) % a->checkpoint_every == 0 && s + 1 < a->steps)
      FSDPCall(save_checkpoint(r->ctx, r->opt, a, s + 1, r->rank));
  }
  if (!stopped) { /* finished: the final checkpoint, the final parameters */
    if (a->checkpoint[0]) FSDPCall(save_checkpoint(r->ctx, r->opt, a, a->steps, r->rank));
    if (a->export_path[0]) FSDPCall(FSDPContextSave(r->ctx, NULL, a->export_file));
  }
  return FSDP_SUCCESS;
}

/* A failed run aborts the job (main): it frees nothing, since destroying a
   context is collective and the other ranks may be elsewhere.  A run that
   finished frees everything here. */
static FSDPErrorCode train(Args *a)
{
  Run r = {.loss = NAN, .K = a->grad_accum};
  int64_t comm_bytes;
  double comm_time;

  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  FSDPCall(check_args(a, r.size));
  r.per = a->batch / r.size;
  FSDPCall(set_up(&r, a));
  {
    ShardGroup group;
    FSDPCall(FSDPContextGetShardGroup(r.ctx, &group));
    FSDPCall(ShardGroupGetShardComm(group, NULL, NULL, &r.factor));
    FSDPCall(ShardGroupGetReplicateComm(group, NULL, NULL, &r.nreplicas));
  }
  FSDPCall(print_banner(&r, a));
  FSDPCall(open_loss_log(&r, a));
  {
    size_t xbytes, lbytes, tbytes;
    batch_bytes(&r.data, r.per, r.in, r.out, &xbytes, &lbytes, &tbytes);
    FSDPCall(FSDPMalloc(xbytes, FSDP_MEM_OTHER, &r.x));
    if (lbytes) FSDPCall(FSDPMalloc(lbytes, FSDP_MEM_OTHER, &r.labels));
    else FSDPCall(FSDPMalloc(tbytes, FSDP_MEM_OTHER, &r.yt));
  }
  /* The context's own events, by name; timed only when a progress line will use them. */
  if (a->log_every > 0) FSDPCall(FSDPLogSetActive(true));
  FSDPCall(FSDPLogEventRegister("AllGather", &r.comm_events[0]));
  FSDPCall(FSDPLogEventRegister("ReduceScatter", &r.comm_events[1]));
  FSDPCall(FSDPLogEventRegister("AllReduce", &r.comm_events[2]));
  FSDPCall(comm_totals(r.comm_events, &r.comm_last, &r.bytes_last));
  {
    FSDPMemoryStats st;
    FSDPCall(FSDPGetMemoryStats(&st));
    r.other_before = (double)st.current[FSDP_MEM_OTHER];
    r.other_peak_before = (double)st.peak[FSDP_MEM_OTHER];
  }

  FSDPCall(run_steps(&r, a));
  FSDPCall(close_loss_log(&r, a));

  FSDPCall(comm_totals(r.comm_events, &comm_time, &comm_bytes));
  if (a->log_every > 0)
    FSDPCall(print_summary(&r,
                           a->resume[0] ? 2
                           : a->init[0] ? 1
                                        : 0,
                           !strcmp(a->optimizer, "adamw") ? 2
                           : a->momentum > 0              ? 1
                                                          : 0,
                           MPI_Wtime() - r.t_start, r.done, r.done * a->batch * r.K, comm_time, comm_bytes));
  if (a->generate) FSDPCall(generate(&r, a));
  FSDPCall(FSDPFree(&r.x));
  FSDPCall(FSDPFree(&r.yt));
  FSDPCall(FSDPFree(&r.labels));
  FSDPCall(dataset_free(&r.data));
  FSDPCall(FSDPOptimizerDestroy(&r.opt));
  FSDPCall(FSDPModelDestroy(&r.model));
  FSDPCall(FSDPContextDestroy(&r.ctx));
  return FSDP_SUCCESS;
}

/* With -help: the program's options, then the library's as each object reads them. */
static FSDPErrorCode help(const Args *defaults)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) print_help(defaults);
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  FSDPCall(FSDPContextSetFromOptions(ctx));
  FSDPCall(FSDPModelCreate(ctx, defaults->model, &model));
  FSDPCall(FSDPModelSetFromOptions(model));
  FSDPCall(FSDPOptimizerCreate(ctx, &opt));
  FSDPCall(FSDPOptimizerSetFromOptions(opt));
  FSDPCall(FSDPOptimizerDestroy(&opt));
  FSDPCall(FSDPModelDestroy(&model));
  FSDPCall(FSDPContextDestroy(&ctx));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  Args a = {.model = "mlp:in=16,hidden=128,depth=4,out=4,act=gelu,norm=layernorm",
            .data = "synthetic",
            .optimizer = "adamw",
            .lr_schedule = "constant",
            .steps = 100,
            .batch = 64,
            .grad_accum = 1,
            .log_every = 10,
            .prompt = "\n",
            .temperature = 1.0,
            .lr = 1e-3,
            .weight_decay = 0.01,
            .beta1 = 0.9,
            .beta2 = 0.999,
            .eps = 1e-8};
  Args defaults = a;
  bool want_help;
  FSDPErrorCode ierr;

  if (catch_signals()) return 1;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  pause_for_test();
  ierr = parse_args(argc, argv, &a, &want_help);
  /* A rank whose command line is wrong aborts the job below; the others wait here for it. */
  if (!ierr) ierr = agree_on_args(&a);
  if (!ierr) ierr = want_help ? help(&defaults) : train(&a);
  /* Every rank that failed has printed why; take the job down, whatever the others are doing. */
  if (ierr) {
    if (running_log) fclose(running_log);
    FSDPErrorAbort(MPI_COMM_WORLD, ierr);
  }
  /* FSDPFinalize finalizes MPI even when it fails (an -fsdp_log_trace file it
     could not write, which every rank reported): no MPI_Abort after it. */
  return FSDPFinalize() ? 1 : 0;
}
