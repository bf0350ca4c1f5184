/* fsdp-train's pre-flight: what the command line asks that no library call
   checks, and every output found writable, before the first step. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train.h"

/* What the command line asks that no library call checks. */
FSDPErrorCode check_args(const Args *a, int size)
{
  FSDPCheck(a->steps >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -steps %lld is negative", (long long)a->steps);
  FSDPCheck(a->batch > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -batch %lld must be positive",
            (long long)a->batch);
  FSDPCheck(a->batch % size == 0, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -batch %lld is not divisible by the %d ranks: each rank takes B/W rows of every batch",
            (long long)a->batch, size);
  FSDPCheck(a->grad_accum > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -grad_accum %lld must be positive",
            (long long)a->grad_accum);
  FSDPCheck(a->log_every >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -log_every %lld is negative",
            (long long)a->log_every);
  FSDPCheck(a->generate >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -generate %lld is negative",
            (long long)a->generate);
  FSDPCheck(a->temperature >= 0 && isfinite(a->temperature), MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -temperature %g must be a finite number >= 0", a->temperature);
  FSDPCheck(!a->generate || a->prompt[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -generate %lld needs a -prompt of at least one character", (long long)a->generate);
  FSDPCheck(a->checkpoint_every >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -checkpoint_every %lld is negative",
            (long long)a->checkpoint_every);
  FSDPCheck(!a->checkpoint_every || a->checkpoint[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -checkpoint_every %lld needs -checkpoint PATH", (long long)a->checkpoint_every);
  FSDPCheck(!a->init[0] || !a->resume[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -init %s and -resume %s both set the parameters: give one", a->init, a->resume);
#if !FSDP_WITH_HDF5
  /* Say so now, not at the first checkpoint hours into the job. */
  {
    const char *what = a->checkpoint[0]    ? "-checkpoint"
                       : a->resume[0]      ? "-resume"
                       : a->export_path[0] ? "-export"
                                           : NULL;
    const char *file = a->checkpoint[0] ? a->checkpoint : a->resume[0] ? a->resume : a->export_path;
    FSDPCheck(
        !what, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
        "fsdp-train: %s %s: this libfsdp was built without HDF5 (configure --with-hdf5), so it has no checkpoints",
        what, file);
  }
#endif
  return FSDP_SUCCESS;
}

/* Whether `path` can be written without changing anything now: an existing
   file is opened for writing (not truncated), a new one is created and
   removed.  Otherwise `why` says what is wrong. */
static bool can_write(const char *path, char *why, size_t len)
{
  struct stat st;
  int fd;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return snprintf(why, len, "is a directory"), false;
    fd = open(path, O_WRONLY | O_NONBLOCK);
    if (fd < 0) return snprintf(why, len, "cannot write it: %s", strerror(errno)), false;
    close(fd);
    return true;
  }
  if (errno != ENOENT) return snprintf(why, len, "cannot reach it: %s", strerror(errno)), false;
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return snprintf(why, len, "cannot create it: %s", strerror(errno)), false;
  close(fd);
  unlink(path);
  return true;
}

static bool same_file(const char *a, const char *b)
{
  struct stat sa, sb;
  if (!strcmp(a, b)) return true;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Rank 0's verdict on every output the job will write; "" when all can be. */
static void check_outputs(const Args *a, int keep, char *msg, size_t len)
{
  const char *outs[3][2] = {{"-checkpoint", a->checkpoint}, {"-export", a->export_path}, {"-loss_log", a->loss_log}};
  /* The data file itself, without a text: or tokens: in front of it. */
  const char *data = !strncmp(a->data, "text:", 5)     ? a->data + 5
                     : !strncmp(a->data, "tokens:", 7) ? a->data + 7
                                                       : a->data;
  const char *ins[3][2] = {{"-data", data}, {"-init", a->init}, {"-resume", a->resume}};
  char why[200], path[1100];

  for (int i = 0; i < 3; i++) {
    if (!outs[i][1][0]) continue;
    for (int j = i + 1; j < 3; j++)
      if (outs[j][1][0] && same_file(outs[i][1], outs[j][1])) {
        snprintf(msg, len, "fsdp-train: %s and %s are the same file '%s': each output needs its own", outs[i][0],
                 outs[j][0], outs[i][1]);
        return;
      }
    /* A checkpoint may replace the one it resumed from; nothing may replace the data. */
    for (int j = 0; j < 3; j++)
      if (ins[j][1][0] && (i > 0 || j == 0) && same_file(outs[i][1], ins[j][1])) {
        snprintf(msg, len, "fsdp-train: %s '%s' would overwrite the %s file", outs[i][0], outs[i][1], ins[j][0]);
        return;
      }
    if (!can_write(outs[i][1], why, sizeof why)) {
      snprintf(msg, len, "fsdp-train: %s '%s': %s", outs[i][0], outs[i][1], why);
      return;
    }
  }
  if (a->checkpoint[0]) { /* the temporary a save writes, and the older checkpoints it shifts */
    struct stat st;
    snprintf(path, sizeof path, "%s.partial", a->checkpoint);
    if (!can_write(path, why, sizeof why)) {
      snprintf(msg, len, "fsdp-train: -checkpoint '%s': its temporary '%s' %s", a->checkpoint, path, why);
      return;
    }
    for (int k = 1; k < keep; k++) {
      snprintf(path, sizeof path, "%s.%d", a->checkpoint, k);
      if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(
            msg, len,
            "fsdp-train: -checkpoint '%s': '%s', where -fsdp_checkpoint_keep %d keeps an older one, is a directory",
            a->checkpoint, path, keep);
        return;
      }
    }
  }
  if (a->loss_log[0] && a->resume[0]) { /* resuming rewrites the log through a temporary */
    snprintf(path, sizeof path, "%s.resume", a->loss_log);
    if (!can_write(path, why, sizeof why))
      snprintf(msg, len, "fsdp-train: -loss_log '%s': its temporary '%s' %s", a->loss_log, path, why);
  }
}

/* Pre-flight: every output is found writable before the first step, not
   after the last; the error names the path and the reason, on every rank. */
FSDPErrorCode preflight(FSDPContext ctx, const Args *a)
{
  char msg[2400] = "";
  int rank, keep;
  FSDPCall(FSDPContextGetCheckpointKeep(ctx, &keep));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) check_outputs(a, keep, msg, sizeof msg);
  FSDPCallMPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD));
  FSDPCheck(!msg[0], MPI_COMM_WORLD, FSDP_ERR_IO, "%s", msg);
  return FSDP_SUCCESS;
}
