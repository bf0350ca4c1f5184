/* In-situ training of a convolutional surrogate, as NVIDIA TorchFort's
   distributed example does it: a 2-D periodic advection solver (upwind,
   u_t + a u_x + b u_y = 0) on an N x N grid is domain-decomposed by rows
   over the MPI ranks; every W solver steps (W the ranks), an all-to-all
   turns the W snapshot pairs (u^n, u^{n+1}), each spread over all ranks,
   into one whole field per rank, and the ranks train TorchFort's model, a
   3x3 convolution with circular padding (cnn:grid=NxN,in=1,out=1,
   padding=circular), on that batch: its parameters, gradients and AdamW
   state sharded through libfsdp.  At the end it reports the surrogate's
   error against the solver on an unseen initial condition, next to the
   error of doing nothing (persistence); then the surrogate runs in place of
   the solver for ROLLOUT steps from another one, each prediction the next
   input, and its drift from the solver is printed as it goes.  With
   -samples FILE.h5 it also writes the training pairs as fsdp-train reads a
   grid data set (/x and /y [pairs, 1, N, N]), in parallel HDF5, to train on
   them again offline.
     mpiexec -n 4 advection-surrogate [-rounds R] [-grid N] [-samples FILE.h5] [-fsdp_* options]
   N must be a multiple of the number of ranks.  doc/example-advection-surrogate.md explains it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_nn.h"

#if FSDP_WITH_HDF5 /* libfsdp's own parallel HDF5; without it, -samples is refused */
#include <hdf5.h>
#else
typedef int hid_t;
#endif

static const double COURANT_X = 0.4, COURANT_Y = 0.3; /* a dt / dx and b dt / dy: upwind is stable up to 1 together */
enum { BATCHES = 4, ROLLOUT = 20 };                   /* training steps per initial condition; surrogate steps */

typedef struct {
  MPI_Comm comm;
  int rank, size, up, down;
  int n, rows; /* the grid's side, and the rows this rank owns */
  double *u;   /* [(rows + 1) n]: a halo row (the row above), then the owned rows */
} Solver;

/* One upwind step: each point looks left and up, the row above from the neighbour. */
static void step(Solver *s, double *next)
{
  double *u = s->u + s->n; /* owned rows: u[i * n + j] */
  MPI_Sendrecv(u + (s->rows - 1) * s->n, s->n, MPI_DOUBLE, s->down, 0, s->u, s->n, MPI_DOUBLE, s->up, 0, s->comm,
               MPI_STATUS_IGNORE);
  for (int i = 0; i < s->rows; i++)
    for (int j = 0; j < s->n; j++) {
      double c = u[i * s->n + j], left = u[i * s->n + (j + s->n - 1) % s->n], above = u[(i - 1) * s->n + j];
      next[i * s->n + j] = c - COURANT_X * (c - left) - COURANT_Y * (c - above);
    }
  memcpy(u, next, (size_t)(s->rows * s->n) * sizeof *u);
}

/* A smooth random field: a few Fourier modes of random amplitude and phase,
   from libfsdp's counter-based generator (the same field at any W). */
static void initial_condition(Solver *s, uint64_t seed)
{
  const double pi2 = 2 * 3.14159265358979323846;
  float c[12];
  FSDPCallAbort(s->comm, FSDPRandomUniform(seed, "advection.ic", 0, 12, 0.0, 1.0, c));
  for (int i = 0; i < s->rows; i++)
    for (int j = 0; j < s->n; j++) {
      double y = (double)(s->rank * s->rows + i) / s->n, x = (double)j / s->n, v = 0;
      for (int k = 0; k < 4; k++)
        v += (c[3 * k] - 0.5) * sin(pi2 * ((k % 2 + 1) * x + (k / 2 + 1) * y) + pi2 * c[3 * k + 1]) /
             (1.0 + c[3 * k + 2]);
      s->u[(1 + i) * s->n + j] = v;
    }
}

/* W solver steps; snapshot pair k (its slab of u^k and u^{k+1} on every
   rank) goes to rank k: x[n n] and y[n n] are this rank's whole fields. */
static void batch(Solver *s, double *next, float *send, float *recv, float *x, float *y)
{
  int slab = s->rows * s->n;
  for (int k = 0; k < s->size; k++) {
    float *to = send + 2 * k * slab; /* the block for rank k: this rank's slab of u^k, then of u^{k+1} */
    for (int e = 0; e < slab; e++) to[e] = (float)s->u[s->n + e];
    step(s, next);
    for (int e = 0; e < slab; e++) to[slab + e] = (float)s->u[s->n + e];
  }
  MPI_Alltoall(send, 2 * slab, MPI_FLOAT, recv, 2 * slab, MPI_FLOAT, s->comm);
  for (int r = 0; r < s->size; r++) { /* rank r's slabs are rows [r rows, (r + 1) rows) */
    memcpy(x + r * slab, recv + 2 * r * slab, (size_t)slab * sizeof *x);
    memcpy(y + r * slab, recv + 2 * r * slab + slab, (size_t)slab * sizeof *y);
  }
}

/* Collective: path created for the training pairs before anything starts,
   so that a path that cannot be written stops the run at once; negative on
   every rank when it cannot (H5Fcreate is collective: all fail alike). */
static hid_t create_samples(MPI_Comm comm, const char *path)
{
#if FSDP_WITH_HDF5
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), file;
  H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl); /* on failure HDF5 prints its error stack, and why */
  H5Pclose(fapl);
  return file;
#else
  (void)comm;
  (void)path;
  return -1;
#endif
}

/* Collective: the training pairs, npairs per rank, written to file as
   /x and /y [W npairs, 1, n, n], the layout of fsdp-train's grid data; pair
   k of rank q is row k W + q, the order they were trained in.  Each rank
   writes its rows (a strided hyperslab) in one collective MPI-IO write.
   Closes the file; returns 0, or -1 on every rank. */
static int write_samples(const Solver *s, hid_t file, int npairs, const float *xs, const float *ys)
{
#if FSDP_WITH_HDF5
  hsize_t dims[4] = {(hsize_t)npairs * (hsize_t)s->size, 1, (hsize_t)s->n, (hsize_t)s->n};
  hsize_t mine[4] = {(hsize_t)npairs, 1, (hsize_t)s->n, (hsize_t)s->n};
  hsize_t start[4] = {(hsize_t)s->rank, 0, 0, 0}, stride[4] = {(hsize_t)s->size, 1, 1, 1};
  hsize_t count[4] = {(hsize_t)npairs, 1, 1, 1}, block[4] = {1, 1, (hsize_t)s->n, (hsize_t)s->n};
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER), space, mem;
  int ok = 1;
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  space = H5Screate_simple(4, dims, NULL);
  mem = H5Screate_simple(4, mine, NULL);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, stride, count, block);
  for (int k = 0; k < 2 && ok; k++) {
    hid_t d = H5Dcreate2(file, k ? "y" : "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int made = d >= 0;
    /* The write is collective: every rank makes it, or none. */
    MPI_Allreduce(MPI_IN_PLACE, &made, 1, MPI_INT, MPI_MIN, s->comm);
    ok = made && H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, dxpl, k ? ys : xs) >= 0;
    if (d >= 0) H5Dclose(d);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, s->comm);
  }
  H5Sclose(mem);
  H5Sclose(space);
  H5Pclose(dxpl);
  ok &= H5Fclose(file) >= 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, s->comm);
  return ok ? 0 : -1;
#else
  (void)s, (void)file, (void)npairs, (void)xs, (void)ys;
  return -1;
#endif
}

/* The surrogate in place of the solver: from the solver's field, every rank
   gathers the whole field (the model's forward is collective, so each rank
   runs it, here all on the same field) and steps it with the model while the
   solver steps alongside; at some steps, the RMS difference from the solver,
   and from the starting field (persistence). */
static void rollout(Solver *s, FSDPModel model, double *next, float *field /* [3 n n] */)
{
  int slab = s->rows * s->n, n2 = s->n * s->n;
  float *start = field + n2, *mine = start + n2, *pred;
  MPI_Comm comm = s->comm;
  for (int e = 0; e < slab; e++) mine[e] = (float)s->u[s->n + e];
  MPI_Allgather(mine, slab, MPI_FLOAT, field, slab, MPI_FLOAT, comm);
  memcpy(start, field, (size_t)n2 * sizeof *start);
  for (int t = 1; t <= ROLLOUT; t++) {
    double err[2] = {0, 0};
    FSDPCallAbort(comm, FSDPModelForward(model, 1, field, &pred));
    memcpy(field, pred, (size_t)n2 * sizeof *field);
    step(s, next);
    for (int e = 0; e < slab; e++) { /* this rank's rows of the fields */
      double u = s->u[s->n + e];
      err[0] += (field[s->rank * slab + e] - u) * (field[s->rank * slab + e] - u);
      err[1] += (start[s->rank * slab + e] - u) * (start[s->rank * slab + e] - u);
    }
    MPI_Allreduce(MPI_IN_PLACE, err, 2, MPI_DOUBLE, MPI_SUM, comm);
    if (s->rank == 0 && (t == 1 || t % 5 == 0))
      printf("rollout step %2d: surrogate error %.4e, persistence error %.4e\n", t, sqrt(err[0] / n2),
             sqrt(err[1] / n2));
  }
}

int main(int argc, char **argv)
{
  Solver s;
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  int rounds = 30, n = 32, status = 0;
  const char *samples = NULL;
  hid_t file = -1;
  char spec[96];
  double *next, err[2] = {0, 0}, loss = 0;
  float *send, *recv, *x, *y, *pred, *dy, *field, *xs = NULL, *ys = NULL;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "-rounds")) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-grid")) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-samples")) samples = argv[++i];
  }
  s.comm = MPI_COMM_WORLD;
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  if (rounds < 1 || n < 3 || n % s.size) { /* every rank sees it: all stop, none aborts the others mid-message */
    if (s.rank == 0)
      fprintf(stderr, "advection-surrogate: -rounds %d must be >= 1, and -grid %d >= 3 a multiple of the %d ranks\n",
              rounds, n, s.size);
    FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
    return 2;
  }
  if (samples && (file = create_samples(s.comm, samples)) < 0) {
    if (s.rank == 0)
      fprintf(stderr, "advection-surrogate: -samples %s: %s\n", samples,
              FSDP_WITH_HDF5 ? "HDF5 cannot create the file" : "libfsdp was built without HDF5 (--without-hdf5)");
    FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
    return 2;
  }
  s.n = n;
  s.rows = n / s.size;
  s.up = (s.rank + s.size - 1) % s.size;
  s.down = (s.rank + 1) % s.size;
  s.u = calloc((size_t)((s.rows + 1) * n), sizeof *s.u);
  next = malloc((size_t)(s.rows * n) * sizeof *next);
  send = malloc((size_t)(2 * n * n) * sizeof *send);
  recv = malloc((size_t)(2 * n * n) * sizeof *recv);
  x = malloc((size_t)(n * n) * sizeof *x);
  y = malloc((size_t)(n * n) * sizeof *y);
  field = malloc((size_t)(3 * n * n) * sizeof *field);
  if (samples) { /* every pair this rank trains on, kept for the file */
    xs = malloc((size_t)rounds * BATCHES * (size_t)(n * n) * sizeof *xs);
    ys = malloc((size_t)rounds * BATCHES * (size_t)(n * n) * sizeof *ys);
  }
  if (!s.u || !next || !send || !recv || !x || !y || !field || (samples && (!xs || !ys))) MPI_Abort(MPI_COMM_WORLD, 1);

  /* TorchFort's surrogate: Conv2d(1, 1, 3, padding=1, padding_mode="circular"). */
  snprintf(spec, sizeof spec, "cnn:grid=%dx%d,in=1,out=1,padding=circular", n, n);
  FSDPCallAbort(s.comm, FSDPContextCreate(s.comm, &ctx));
  FSDPCallAbort(s.comm, FSDPContextSetFromOptions(ctx));
  FSDPCallAbort(s.comm, FSDPModelCreate(ctx, spec, &model));
  FSDPCallAbort(s.comm, FSDPModelSetFromOptions(model));
  FSDPCallAbort(s.comm, FSDPModelSetUp(model));
  FSDPCallAbort(s.comm, FSDPOptimizerCreate(ctx, &opt));
  FSDPCallAbort(s.comm, FSDPOptimizerSetLearningRate(opt, 3e-2));
  FSDPCallAbort(s.comm, FSDPOptimizerSetWeightDecay(opt, 0.0));
  FSDPCallAbort(s.comm, FSDPOptimizerSetFromOptions(opt));
  FSDPCallAbort(s.comm, FSDPOptimizerSetUp(opt));

  /* Training: a new initial condition every round, BATCHES steps on the fields it produces. */
  for (int r = 0; r < rounds; r++) {
    initial_condition(&s, (uint64_t)r);
    for (int b = 0; b < BATCHES; b++) {
      double l;
      batch(&s, next, send, recv, x, y);
      if (samples) {
        memcpy(xs + (size_t)(r * BATCHES + b) * (size_t)(n * n), x, (size_t)(n * n) * sizeof *x);
        memcpy(ys + (size_t)(r * BATCHES + b) * (size_t)(n * n), y, (size_t)(n * n) * sizeof *y);
      }
      FSDPCallAbort(s.comm, FSDPContextZeroGrad(ctx));
      FSDPCallAbort(s.comm, FSDPModelForward(model, 1, x, &pred));
      FSDPCallAbort(s.comm, FSDPModelLoss(model, FSDP_LOSS_MSE, y, 1.0, &l, &dy));
      FSDPCallAbort(s.comm, FSDPModelBackward(model, dy));
      FSDPCallAbort(s.comm, FSDPOptimizerStep(opt));
      loss = l;
    }
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, s.comm);
    if (s.rank == 0 && (r + 1) % 10 == 0) printf("round %3d/%d  training loss %.4e\n", r + 1, rounds, loss / s.size);
  }

  /* Evaluation on an initial condition never trained on: the mean squared error of a step. */
  initial_condition(&s, 1000003);
  for (int b = 0; b < BATCHES; b++) {
    double l;
    batch(&s, next, send, recv, x, y);
    FSDPCallAbort(s.comm, FSDPModelForward(model, 1, x, &pred));
    FSDPCallAbort(s.comm, FSDPModelLoss(model, FSDP_LOSS_MSE, y, 1.0, &l, &dy));
    err[0] += l;
    for (int e = 0; e < n * n; e++) err[1] += ((double)y[e] - x[e]) * ((double)y[e] - x[e]) / (n * n);
  }
  MPI_Allreduce(MPI_IN_PLACE, err, 2, MPI_DOUBLE, MPI_SUM, s.comm);
  if (s.rank == 0)
    printf("surrogate error %.4e, persistence error %.4e (RMS over %dx%d fields x %d steps, %d ranks)\n",
           sqrt(err[0] / (BATCHES * s.size)), sqrt(err[1] / (BATCHES * s.size)), n, n, BATCHES * s.size, s.size);
  initial_condition(&s, 1000033);
  rollout(&s, model, next, field);
  if (samples) {
    status = write_samples(&s, file, rounds * BATCHES, xs, ys) ? 1 : 0;
    if (s.rank == 0) {
      if (status) fprintf(stderr, "advection-surrogate: -samples %s: HDF5 could not write the file\n", samples);
      else
        printf("training pairs written to %s: /x and /y [%d, 1, %d, %d]\n", samples, rounds * BATCHES * s.size, n, n);
    }
  }

  FSDPCallAbort(s.comm, FSDPOptimizerDestroy(&opt));
  FSDPCallAbort(s.comm, FSDPModelDestroy(&model));
  FSDPCallAbort(s.comm, FSDPContextDestroy(&ctx));
  free(s.u);
  free(next);
  free(send);
  free(recv);
  free(x);
  free(y);
  free(field);
  free(xs);
  free(ys);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return status;
}
