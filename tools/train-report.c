/* fsdp-train's output: the banner before the first step, the progress
   lines, and the summary of time, throughput and memory against the FSDP
   formula. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

/* Time in, and bytes moved by, the all-gathers, reduce-scatters and all-reduces so far. */
FSDPErrorCode comm_totals(const FSDPLogEvent events[3], double *time, int64_t *bytes)
{
  *time = 0;
  *bytes = 0;
  for (int i = 0; i < 3; i++) {
    FSDPLogEventInfo info;
    FSDPCall(FSDPLogEventGetInfo(events[i], &info));
    *time += info.time;
    *bytes += info.bytes;
  }
  return FSDP_SUCCESS;
}

/* The memory that holds the context's buffers: the GPU's on a CUDA context. */
static FSDPErrorCode memory_stats(FSDPContext ctx, FSDPMemoryStats *st, bool *gpu)
{
  FSDPDeviceType device;
  FSDPCall(FSDPContextGetDevice(ctx, &device));
  *gpu = device == FSDP_DEVICE_CUDA;
  return *gpu ? FSDPGetDeviceMemoryStats(st) : FSDPGetMemoryStats(st);
}

static double max_over_ranks(double v)
{
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

/* The rest on the host: the data set every rank holds, one micro-batch's
   rows (inputs, and targets or labels), the model's activations for them
   (FSDPModelGetActivationBytes, as -fsdp_view prints them), and the objects
   (contexts, groups, the model's and optimizer's tables: what the rest of
   FSDP_MEM_OTHER held before the first step).  Each term, largest over
   ranks, their sum, and term[4] the most the category held before the first
   step (loading a token file holds it twice for a while), in *bytes the
   larger of the two. */
static FSDPErrorCode other_bytes(const Run *r, double term[5], double *bytes)
{
  size_t act, xbytes, lbytes, tbytes;
  bool checkpointing;
  batch_bytes(&r->data, r->per, r->in, r->out, &xbytes, &lbytes, &tbytes);
  FSDPCall(FSDPModelGetActivationCheckpointing(r->model, &checkpointing));
  FSDPCall(FSDPModelGetActivationBytes(r->model, r->per, checkpointing, &act));
  term[0] = dataset_bytes(&r->data);
  term[1] = (double)(xbytes + lbytes + tbytes);
  term[2] = (double)act;
  term[3] = r->other_before - term[0] - term[1];
  term[4] = r->other_peak_before;
  *bytes = term[0] + term[1] + term[2] + term[3];
  if (term[4] > *bytes) *bytes = term[4];
  MPI_Allreduce(MPI_IN_PLACE, bytes, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, term, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return FSDP_SUCCESS;
}

/* Peak bytes per category, the largest over ranks, next to what the FSDP
   formula says a rank needs. */
FSDPErrorCode print_summary(const Run *r, int loaded, int nstates, double seconds, int64_t steps, int64_t samples,
                            double comm_time, int64_t comm_bytes)
{
  FSDPContext ctx = r->ctx;
  FSDPOptimizer opt = r->opt;
  int rank = r->rank, factor = r->factor;
  double last_loss = r->loss, other = 0, term[5];
  char other_formula[256], t[5][32];
  FSDPShardingStrategy strategy;
  FSDPMemoryStats st;
  double peak[FSDP_MEM_NUM_CATEGORIES + 1];
  int64_t numel, shard, maxunit, state;
  char b1[32], b2[32];
  const char *formula[FSDP_MEM_NUM_CATEGORIES];
  double expect[FSDP_MEM_NUM_CATEGORIES];
  char unsharded[64];
  int G;
  FSDPMemoryPlan plan;
  FSDPCommStats cs;
  FSDPDataType pdt;
  bool low, gpu, views;

  FSDPCall(memory_stats(ctx, &st, &gpu));
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) peak[c] = (double)st.peak[c];
  peak[FSDP_MEM_NUM_CATEGORIES] = (double)st.total_peak;
  MPI_Allreduce(MPI_IN_PLACE, peak, FSDP_MEM_NUM_CATEGORIES + 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  FSDPCall(FSDPContextGetSizes(ctx, &numel, &shard, &maxunit));
  FSDPCall(FSDPOptimizerGetStateSize(opt, &state));
  MPI_Allreduce(MPI_IN_PLACE, &state, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  FSDPCall(FSDPContextGetCommStats(ctx, &cs));
  if (!gpu) FSDPCall(other_bytes(r, term, &other));
  if (rank) return FSDP_SUCCESS;
  formula[FSDP_MEM_PARAMS] = "sum(psi_i)/F";
  expect[FSDP_MEM_PARAMS] = 4.0 * (double)shard;
  formula[FSDP_MEM_GRADS] = "sum(psi_i)/F";
  expect[FSDP_MEM_GRADS] = 4.0 * (double)shard;
  formula[FSDP_MEM_OPTIM_STATE] = "k * trainable/F";
  expect[FSDP_MEM_OPTIM_STATE] = 4.0 * (double)state;
  /* L units' parameters (the limiter's L) and two units' gradients (the one
     computing, the one reducing); grad_op keeps every unit's parameters from
     forward to backward; with F = 1 the parameters are the shard itself. */
  FSDPCall(FSDPContextGetShardingStrategy(ctx, &strategy));
  FSDPCall(FSDPContextGetMemoryPlan(ctx, &plan));
  /* Mixed precision: parameters in 2 bytes (the paper's K_low), gradients in 4. */
  FSDPCall(FSDPContextGetMixedPrecision(ctx, &pdt, NULL));
  low = pdt != FSDP_FLOAT32;
  FSDPCall(FSDPContextGetShmViews(ctx, &views));
  /* G gradient buffers: two (the unit computing, the one reducing), one with a single unit. */
  G = plan.gradient_buffers;
  if (views) { /* each rank's share of the node's views, and the gradient buffers */
    snprintf(unsharded, sizeof unsharded, "sum(psi_i)/F + %d max(psi_i), views", G);
    expect[FSDP_MEM_UNSHARDED] = 4.0 * (double)shard + 4.0 * G * (double)maxunit;
  } else if (factor > 1 && (strategy == FSDP_SHARD_GRAD_OP || strategy == FSDP_HYBRID_SHARD_ZERO2)) {
    snprintf(unsharded, sizeof unsharded, "sum(psi_i)%s + %d max(psi_i)", low ? "/2" : "", G);
    expect[FSDP_MEM_UNSHARDED] = (low ? 2.0 : 4.0) * (double)shard * factor + 4.0 * G * (double)maxunit;
  } else if (plan.unsharded_buffers) {
    snprintf(unsharded, sizeof unsharded, "(L%s + %d) max(psi_i), L = %d%s%s", low ? "/2" : "", G,
             plan.unsharded_buffers, low ? ", " : "", low ? FSDPDataTypeName(pdt) : "");
    expect[FSDP_MEM_UNSHARDED] = ((low ? 2.0 : 4.0) * plan.unsharded_buffers + 4.0 * G) * (double)maxunit;
  } else {
    snprintf(unsharded, sizeof unsharded, "%d max(psi_i)", G);
    expect[FSDP_MEM_UNSHARDED] = 4.0 * G * (double)maxunit;
  }
  formula[FSDP_MEM_UNSHARDED] = unsharded;
  formula[FSDP_MEM_COMM_STAGING] = "max(psi_i)/F";
  expect[FSDP_MEM_COMM_STAGING] = 4.0 * (double)maxunit / factor; /* padded units divide by F */
  if (loaded) { /* and, while loading, one unit's shard and (-resume) its k state tensors */
    formula[FSDP_MEM_COMM_STAGING] = loaded == 2 ? "(2 + k) max(psi_i)/F, -resume" : "2 max(psi_i)/F, -init";
    expect[FSDP_MEM_COMM_STAGING] *= loaded == 2 ? 2.0 + (double)nstates : 2.0;
  }
  if (gpu) { /* the batch's and activations' device copies; the host's data is not here */
    formula[FSDP_MEM_OTHER] = "(activations, data)";
    expect[FSDP_MEM_OTHER] = -1;
  } else {
    bool loading = term[4] > term[0] + term[1] + term[2] + term[3]; /* loading the data held more */
    for (int i = 0; i < 5; i++) FSDPFormatBytes(t[i], sizeof t[i], term[i]);
    snprintf(other_formula, sizeof other_formula, "%sdata %s + rows %s + activations %s + objects %s%s%s%s",
             loading ? "max(" : "", t[0], t[1], t[2], t[3], loading ? ", loading's peak " : "", loading ? t[4] : "",
             loading ? ")" : "");
    formula[FSDP_MEM_OTHER] = other_formula;
    expect[FSDP_MEM_OTHER] = other;
  }
  printf("fsdp-train: %lld steps in %.3f s: %.2f ms/step, %.1f samples/s, final loss %.6g\n", (long long)steps, seconds,
         steps ? 1e3 * seconds / (double)steps : 0.0, seconds > 0 ? (double)samples / seconds : 0.0, last_loss);
  printf("fsdp-train: communication %.3f s on rank 0, %.3f GB/s\n", comm_time,
         comm_time > 0 ? (double)comm_bytes / comm_time / 1e9 : 0.0);
  if (cs.comm_time > 0)
    printf("fsdp-train: rank 0 waited %.3f s of %.3f s in collectives: overlap %.1f%%, %lld prefetches\n",
           cs.exposed_time, cs.comm_time, 100.0 * (1.0 - cs.exposed_time / cs.comm_time), (long long)cs.prefetches);
  if (cs.shm_collectives) {
    printf("fsdp-train: rank 0 ran %lld of %lld collectives in node shared memory",
           (long long)(cs.shm_collectives - cs.shm_fallbacks), (long long)cs.collectives);
    if (cs.shm_fallbacks)
      printf(", and %lld through MPI instead (a gradient buffer beyond the plan)", (long long)cs.shm_fallbacks);
    printf("\n");
  }
  printf("fsdp-train: peak %smemory per rank (largest over ranks)   FSDP formula\n", gpu ? "GPU " : "");
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) {
    FSDPFormatBytes(b1, sizeof b1, peak[c]);
    if (expect[c] >= 0) FSDPFormatBytes(b2, sizeof b2, expect[c]);
    else b2[0] = '\0';
    printf("  %-22s %12s   %12s %s\n", FSDPMemCategoryName((FSDPMemCategory)c), b1, b2, formula[c]);
  }
  FSDPFormatBytes(b1, sizeof b1, peak[FSDP_MEM_NUM_CATEGORIES]);
  printf("  %-22s %12s\n", "total", b1);
  fflush(stdout);
  return FSDP_SUCCESS;
}

/* Rank 0's lines about the job before its first step. */
FSDPErrorCode print_banner(const Run *r, const Args *a)
{
  FSDPShardingStrategy strategy;
  FSDPDataType pdt, rdt;
  bool scaler;
  int nunits;
  if (r->rank != 0 || a->log_every <= 0) return FSDP_SUCCESS;
  FSDPCall(FSDPContextGetShardingStrategy(r->ctx, &strategy));
  FSDPCall(FSDPContextGetNumUnits(r->ctx, &nunits));
  printf("fsdp-train: %s, %lld parameters in %d units\n", a->model, (long long)r->numel, nunits);
  FSDPCall(FSDPContextGetMixedPrecision(r->ctx, &pdt, &rdt));
  FSDPCall(FSDPOptimizerGetGradScaler(r->opt, &scaler));
  printf("fsdp-train: %d ranks, %s sharding, F = %d, %d replicas; %s\n", r->size, FSDPShardingStrategyName(strategy),
         r->factor, r->nreplicas, r->data.description);
  if (pdt != FSDP_FLOAT32 || rdt != FSDP_FLOAT32)
    printf("fsdp-train: mixed precision: parameters %s, reductions %s, fp32 master shards%s\n", FSDPDataTypeName(pdt),
           FSDPDataTypeName(rdt), scaler ? ", gradient scaler on" : "");
  printf("fsdp-train: %lld steps of %lld rows (%lld per rank) x %lld micro-batches, %s lr %g (%s)\n",
         (long long)a->steps, (long long)a->batch, (long long)r->per, (long long)r->K, a->optimizer, a->lr,
         a->lr_schedule);
  if (a->resume[0])
    printf("fsdp-train: resuming from %s at step %lld, batch %lld\n", a->resume, (long long)r->first,
           (long long)r->cursor);
  fflush(stdout);
  return FSDP_SUCCESS;
}

/* "  scale S  skipped N" for a progress line with the gradient scaler on, "" without. */
static const char *scale_text(FSDPOptimizer opt, char *buf, size_t size)
{
  double scale;
  int64_t skipped;
  bool on;
  if (FSDPOptimizerGetGradScaler(opt, &on) || !on || FSDPOptimizerGetGradScale(opt, &scale, &skipped)) return "";
  snprintf(buf, size, "  scale %g  skipped %lld", scale, (long long)skipped);
  return buf;
}

/* Collective: the progress line after step s + 1 (rank 0 prints it). */
FSDPErrorCode print_progress(Run *r, const Args *a, int64_t s)
{
  FSDPMemoryStats st;
  double now = MPI_Wtime(), dt = now - r->t_last, peak, comm_time;
  int64_t nsteps = s + 1 - r->last_logged, comm_bytes; /* since the last line, or the start of this run */
  char b1[32];
  bool gpu;
  FSDPCall(comm_totals(r->comm_events, &comm_time, &comm_bytes));
  FSDPCall(memory_stats(r->ctx, &st, &gpu));
  peak = max_over_ranks((double)st.total_peak);
  FSDPFormatBytes(b1, sizeof b1, peak);
  if (r->rank == 0) {
    char sc[64];
    printf("step %6lld/%lld  loss %.6e  %9.1f samples/s  %8.2f ms/step  peak %s%s/rank  comm %.3f GB/s%s\n",
           (long long)(s + 1), (long long)a->steps, r->loss, (double)(nsteps * a->batch * r->K) / dt,
           1e3 * dt / (double)nsteps, b1, gpu ? " GPU" : "",
           comm_time > r->comm_last ? (double)(comm_bytes - r->bytes_last) / (comm_time - r->comm_last) / 1e9 : 0.0,
           scale_text(r->opt, sc, sizeof sc));
    fflush(stdout);
  }
  r->comm_last = comm_time;
  r->bytes_last = comm_bytes;
  r->t_last = MPI_Wtime();
  r->last_logged = s + 1;
  return FSDP_SUCCESS;
}
