/* In-situ surrogate training: a 1-D reaction-diffusion solver (Fisher-KPP,
   u_t = kappa u_xx + rho u (1 - u), periodic), domain-decomposed over the MPI
   ranks with halo exchange, produces training pairs as it runs, and trains
   an MLP through the libfsdp API to jump LEAP solver steps at once: from the
   9-point window u^n[i-4 .. i+4] to u^{n+LEAP}[i] - u^n[i].  Each rank
   trains on the points of its own subdomain; the model's parameters,
   gradients and AdamW state are sharded over all ranks.  At the end it
   reports the surrogate's error against the solver on a fresh initial
   condition, next to the error of doing nothing (persistence).
     mpiexec -n 4 heat-surrogate [-rounds R] [-points P] [-verbose] [-fsdp_* options]
   -verbose prints every round's loss with 17 digits (tests/fortran.sh compares them with Fortran's).
   doc/example-heat-surrogate.md explains it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_nn.h"

enum { LEAP = 4, WINDOW = 2 * LEAP + 1, SNAPSHOTS = 8 };
static const double R_DIFF = 0.25; /* kappa dt / dx^2: explicit Euler is stable up to 0.5 */
static const double RHO_DT = 0.05; /* rho dt */

typedef struct {
  MPI_Comm comm;
  int rank, size, left, right;
  int n;     /* points owned by this rank */
  double *u; /* [n + 2 LEAP]: LEAP halo cells on each side */
} Solver;

/* Periodic halo exchange of `width` cells with both neighbours. */
static void exchange(Solver *s, int width)
{
  double *u = s->u + LEAP; /* owned points are u[0 .. n) */
  MPI_Sendrecv(u, width, MPI_DOUBLE, s->left, 0, u + s->n, width, MPI_DOUBLE, s->right, 0, s->comm, MPI_STATUS_IGNORE);
  MPI_Sendrecv(u + s->n - width, width, MPI_DOUBLE, s->right, 1, u - width, width, MPI_DOUBLE, s->left, 1, s->comm,
               MPI_STATUS_IGNORE);
}

static void step(Solver *s, double *tmp)
{
  double *u = s->u + LEAP;
  exchange(s, 1);
  for (int i = 0; i < s->n; i++) tmp[i] = u[i] + R_DIFF * (u[i + 1] - 2 * u[i] + u[i - 1]) + RHO_DT * u[i] * (1 - u[i]);
  memcpy(u, tmp, (size_t)s->n * sizeof *u);
}

/* A smooth random profile in [0, 1]: a few sine modes of random phase,
   drawn from libfsdp's counter-based generator (the same at any W). */
static void initial_condition(Solver *s, uint64_t seed)
{
  float c[6];
  int global_n = s->n * s->size;
  FSDPCallAbort(s->comm, FSDPRandomUniform(seed, "heat.ic", 0, 6, 0.0, 1.0, c));
  for (int i = 0; i < s->n; i++) {
    double x = (double)(s->rank * s->n + i) / global_n, v = 0.5;
    for (int k = 0; k < 3; k++)
      v += 0.25 * (c[2 * k] - 0.3) *
           sin(2 * 3.14159265358979323846 * (k + 1) * x + 2 * 3.14159265358979323846 * c[2 * k + 1]);
    s->u[LEAP + i] = v < 0 ? 0 : v > 1 ? 1 : v;
  }
}

/* Inputs (windows around every owned point) now, targets LEAP steps later. */
static void sample(Solver *s, double *tmp, float *x, float *y)
{
  double *u = s->u + LEAP;
  exchange(s, LEAP);
  for (int i = 0; i < s->n; i++)
    for (int k = 0; k < WINDOW; k++) x[i * WINDOW + k] = (float)u[i - LEAP + k];
  for (int t = 0; t < LEAP; t++) step(s, tmp);
  for (int i = 0; i < s->n; i++) y[i] = (float)(u[i] - x[i * WINDOW + LEAP]);
}

int main(int argc, char **argv)
{
  Solver s;
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  int rounds = 40, points = 64, verbose = 0;
  double *tmp, err[2] = {0, 0}, loss = 0;
  float *x, *y, *pred, *dy, *y10; /* y10: the targets as trained on, scaled by 10 */

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "-rounds")) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-points")) points = atoi(argv[++i]);
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-verbose")) verbose = 1;
  s.comm = MPI_COMM_WORLD;
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  s.left = (s.rank + s.size - 1) % s.size;
  s.right = (s.rank + 1) % s.size;
  s.n = points;
  if (rounds < 1 || points < LEAP) {
    if (s.rank == 0) fprintf(stderr, "heat-surrogate: -rounds must be >= 1 and -points >= %d\n", LEAP);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  s.u = calloc((size_t)(points + 2 * LEAP), sizeof *s.u);
  tmp = malloc((size_t)points * sizeof *tmp);
  x = malloc((size_t)points * WINDOW * sizeof *x);
  y = malloc((size_t)points * sizeof *y);
  y10 = malloc((size_t)points * sizeof *y10);
  if (!s.u || !tmp || !x || !y || !y10) MPI_Abort(MPI_COMM_WORLD, 1);

  /* The surrogate: parameters, gradients and optimizer state sharded over all ranks. */
  FSDPCallAbort(s.comm, FSDPContextCreate(s.comm, &ctx));
  FSDPCallAbort(s.comm, FSDPContextSetFromOptions(ctx));
  FSDPCallAbort(s.comm, FSDPModelCreate(ctx, "mlp:in=9,hidden=32,depth=2,out=1,act=tanh", &model));
  FSDPCallAbort(s.comm, FSDPModelSetFromOptions(model));
  FSDPCallAbort(s.comm, FSDPModelSetUp(model));
  FSDPCallAbort(s.comm, FSDPOptimizerCreate(ctx, &opt));
  FSDPCallAbort(s.comm, FSDPOptimizerSetLearningRate(opt, 3e-3));
  FSDPCallAbort(s.comm, FSDPOptimizerSetWeightDecay(opt, 0.0));
  FSDPCallAbort(s.comm, FSDPOptimizerSetFromOptions(opt));
  FSDPCallAbort(s.comm, FSDPOptimizerSetUp(opt));

  /* Training: every round a new initial condition; every snapshot one step
     on the pairs it produced.  Targets are scaled to order one. */
  for (int r = 0; r < rounds; r++) {
    initial_condition(&s, (uint64_t)r);
    for (int k = 0; k < SNAPSHOTS; k++) {
      double l;
      sample(&s, tmp, x, y);
      for (int i = 0; i < points; i++) y10[i] = 10.0f * y[i];
      FSDPCallAbort(s.comm, FSDPContextZeroGrad(ctx));
      /* The model's own loss: wherever the model runs (-fsdp_device cuda too), pred and dy are there. */
      FSDPCallAbort(s.comm, FSDPModelForward(model, points, x, &pred));
      FSDPCallAbort(s.comm, FSDPModelLoss(model, FSDP_LOSS_MSE, y10, 1.0, &l, &dy));
      FSDPCallAbort(s.comm, FSDPModelBackward(model, dy));
      FSDPCallAbort(s.comm, FSDPOptimizerStep(opt));
      loss = l;
    }
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, s.comm);
    if (s.rank == 0 && verbose) printf("round %d loss %.17e\n", r + 1, loss / s.size);
    if (s.rank == 0 && (r + 1) % 10 == 0) printf("round %3d/%d  training loss %.4e\n", r + 1, rounds, loss / s.size);
  }

  /* Evaluation on an initial condition never trained on. */
  initial_condition(&s, 1000003);
  for (int k = 0; k < SNAPSHOTS; k++) {
    double l;
    sample(&s, tmp, x, y);
    for (int i = 0; i < points; i++) y10[i] = 10.0f * y[i];
    FSDPCallAbort(s.comm, FSDPModelForward(model, points, x, &pred));
    FSDPCallAbort(s.comm, FSDPModelLoss(model, FSDP_LOSS_MSE, y10, 1.0, &l, &dy));
    err[0] += l * points / 100.0;                                   /* surrogate: the sum of (pred/10 - y)^2 */
    for (int i = 0; i < points; i++) err[1] += (double)y[i] * y[i]; /* persistence: no change */
  }
  MPI_Allreduce(MPI_IN_PLACE, err, 2, MPI_DOUBLE, MPI_SUM, s.comm);
  if (s.rank == 0) {
    printf("surrogate error %.4e, persistence error %.4e (RMS over %d points x %d snapshots, %d ranks)\n",
           sqrt(err[0] / (points * s.size * SNAPSHOTS)), sqrt(err[1] / (points * s.size * SNAPSHOTS)), points * s.size,
           SNAPSHOTS, s.size);
  }
  FSDPCallAbort(s.comm, FSDPOptimizerDestroy(&opt));
  FSDPCallAbort(s.comm, FSDPModelDestroy(&model));
  FSDPCallAbort(s.comm, FSDPContextDestroy(&ctx));
  free(s.u);
  free(tmp);
  free(x);
  free(y);
  free(y10);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
