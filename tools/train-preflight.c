/* fsdp-train's pre-flight: what the command line asks that no library call
   checks; every output found writable, where it leads and apart from the
   others; and, once the model and data are known, -generate's prompt and a
   resume's seed, batch and data: all before the first step. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* What a file that is not a regular one is, for a message. */
static const char *file_kind(mode_t mode)
{
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

/* The directory part of path ("." when it has none). */
static void dir_of(const char *path, char *dir, size_t len)
{
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, len, ".");
  else if (slash == path) snprintf(dir, len, "/");
  else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Whether `path` can be written without changing anything now: an existing
   file must be a regular one and is opened for writing (not truncated), a
   new one is created and removed.  Otherwise `why` says what is wrong. */
static bool can_write(const char *path, char *why, size_t len)
{
  struct stat st;
  int fd;
  if (stat(path, &st) == 0) {
    if (!S_ISREG(st.st_mode)) return snprintf(why, len, "is %s, not a regular file", file_kind(st.st_mode)), false;
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

/* Where an output given as `path` is written: path itself or, when it is a
   symbolic link, the file at the end of its links (a relative target is
   taken from the link's directory), which need not exist yet.  The library
   renames a checkpoint's temporary over the name it is given, and neither
   fopen's rename nor an exclusive create goes through a link, so the
   outputs are written at their targets.  False, with `why`, for a loop or a
   link into a directory that does not exist. */
static bool follow_links(const char *path, char *target, size_t len, char *why, size_t wlen)
{
  char cur[PATH_MAX], next[PATH_MAX], dir[PATH_MAX];
  struct stat st;
  bool linked = false;
  if ((size_t)snprintf(cur, sizeof cur, "%s", path) >= sizeof cur)
    return snprintf(why, wlen, "the path is too long"), false;
  for (int hops = 0; lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
    ssize_t n;
    if (hops == 40) return snprintf(why, wlen, "more than 40 symbolic links lead on from it (a loop?)"), false;
    n = readlink(cur, next, sizeof next - 1);
    if (n < 0) return snprintf(why, wlen, "cannot read the symbolic link '%s': %s", cur, strerror(errno)), false;
    next[n] = '\0';
    dir_of(cur, dir, sizeof dir);
    if (next[0] == '/' || !strchr(cur, '/')) snprintf(cur, sizeof cur, "%s", next); /* absolute, or beside cur in . */
    else if ((size_t)snprintf(cur, sizeof cur, "%s/%s", dir, next) >= sizeof cur)
      return snprintf(why, wlen, "its symbolic links lead to a path that is too long"), false;
    linked = true;
  }
  if (linked) { /* a dangling link: a file there can be created only in a directory that exists */
    dir_of(cur, dir, sizeof dir);
    if (stat(dir, &st) != 0)
      return snprintf(why, wlen, "is a symbolic link to '%s', whose directory '%s' %s", cur, dir,
                      errno == ENOENT ? "does not exist" : strerror(errno)),
             false;
    if (!S_ISDIR(st.st_mode))
      return snprintf(why, wlen, "is a symbolic link to '%s', but '%s' is not a directory", cur, dir), false;
  }
  snprintf(target, len, "%s", cur);
  return true;
}

/* A file the job writes or reads, and how to tell it from the others under
   any spelling: its device and inode when it exists, else the real path of
   its directory and its name. */
typedef struct {
  const char *option, *given;   /* the option and its value */
  int role;                     /* 0: the output itself; 1: its temporary; 2: an older checkpoint kept */
  char path[PATH_MAX + 32];     /* where it is written (or read) */
  char real[2 * PATH_MAX + 64]; /* its resolved path */
  bool exists;
  dev_t dev;
  ino_t ino;
} JobFile;

enum { ROLE_ITSELF, ROLE_TEMPORARY, ROLE_KEPT };

static void identify(JobFile *f)
{
  struct stat st;
  char dir[PATH_MAX], real[PATH_MAX];
  const char *slash = strrchr(f->path, '/'), *name = slash ? slash + 1 : f->path;
  if (stat(f->path, &st) == 0) {
    f->exists = true;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    if (realpath(f->path, real)) snprintf(f->real, sizeof f->real, "%s", real);
    else snprintf(f->real, sizeof f->real, "%s", f->path);
    return;
  }
  dir_of(f->path, dir, sizeof dir);
  if (*name && realpath(dir, real)) snprintf(f->real, sizeof f->real, "%s/%s", strcmp(real, "/") ? real : "", name);
  else snprintf(f->real, sizeof f->real, "%s", f->path);
}

static bool same_file(const JobFile *a, const JobFile *b)
{
  if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
  return !strcmp(a->real, b->real);
}

/* "-checkpoint 'x'", "the temporary 'x.partial' of -checkpoint 'x'", ... */
static void describe(const JobFile *f, int keep, char *buf, size_t len)
{
  if (f->role == ROLE_ITSELF) snprintf(buf, len, "%s '%s'", f->option, f->given);
  else if (f->role == ROLE_TEMPORARY) snprintf(buf, len, "the temporary '%s' of %s '%s'", f->path, f->option, f->given);
  else
    snprintf(buf, len, "'%s', where -fsdp_checkpoint_keep %d keeps an older %s of '%s',", f->path, keep, f->option,
             f->given);
}

/* Rank 0's verdict on every file the job will write, and the targets of its
   outputs (a->*_file); msg "" when every one can be written. */
static void check_outputs(Args *a, int keep, char *msg, size_t len)
{
  struct {
    const char *option, *given;
    char *target;
  } outs[3] = {{"-checkpoint", a->checkpoint, a->checkpoint_file},
               {"-export", a->export_path, a->export_file},
               {"-loss_log", a->loss_log, a->loss_log_file}};
  /* The data file itself, without a text: or tokens: in front of it. */
  const char *data = !strncmp(a->data, "text:", 5)                                          ? a->data + 5
                     : !strncmp(a->data, "tokens:", 7)                                      ? a->data + 7
                     : !strcmp(a->data, "synthetic") || !strncmp(a->data, "synthetic:", 10) ? ""
                                                                                            : a->data;
  JobFile ins[3] = {{.option = "-data", .given = data},
                    {.option = "-init", .given = a->init},
                    {.option = "-resume", .given = a->resume}};
  JobFile *files = NULL;
  int nfiles = 0, kept = keep > 1 ? keep - 1 : 0;
  char why[3 * PATH_MAX], d1[2 * PATH_MAX + 1200], d2[2 * PATH_MAX + 1200];

  /* Inputs: a directory, a FIFO or a device is named now, before a rank opens it (a FIFO would block). */
  for (int j = 0; j < 3; j++) {
    struct stat st;
    if (!ins[j].given[0]) continue;
    snprintf(ins[j].path, sizeof ins[j].path, "%s", ins[j].given);
    identify(&ins[j]);
    if (stat(ins[j].path, &st) == 0 && !S_ISREG(st.st_mode)) {
      if (j == 0) /* the file of -data text:FILE, say */
        snprintf(msg, len, "fsdp-train: -data %s: '%s' is %s, not a regular file", a->data, ins[j].given,
                 file_kind(st.st_mode));
      else
        snprintf(msg, len, "fsdp-train: %s '%s': is %s, not a regular file", ins[j].option, ins[j].given,
                 file_kind(st.st_mode));
      return;
    }
  }
  /* Outputs: where each goes, and the temporaries and older copies beside it. */
  files = calloc((size_t)(3 * 2 + 2 * kept), sizeof *files);
  if (!files) {
    snprintf(msg, len, "fsdp-train: out of memory checking the outputs");
    return;
  }
  for (int i = 0; i < 3; i++) {
    if (!outs[i].given[0]) continue;
    if (!follow_links(outs[i].given, outs[i].target, PATH_MAX, why, sizeof why)) {
      snprintf(msg, len, "fsdp-train: %s '%s': %s", outs[i].option, outs[i].given, why);
      goto done;
    }
    files[nfiles] = (JobFile){.option = outs[i].option, .given = outs[i].given, .role = ROLE_ITSELF};
    snprintf(files[nfiles++].path, sizeof files->path, "%s", outs[i].target);
    if (i < 2) { /* a save writes path.partial and renames it; with -fsdp_checkpoint_keep K it shifts path.1 ... */
      files[nfiles] = (JobFile){.option = outs[i].option, .given = outs[i].given, .role = ROLE_TEMPORARY};
      snprintf(files[nfiles++].path, sizeof files->path, "%s.partial", outs[i].target);
      for (int k = 1; k <= kept; k++) {
        files[nfiles] = (JobFile){.option = outs[i].option, .given = outs[i].given, .role = ROLE_KEPT};
        snprintf(files[nfiles++].path, sizeof files->path, "%s.%d", outs[i].target, k);
      }
    } else if (a->resume[0]) { /* resuming rewrites the log through a temporary */
      files[nfiles] = (JobFile){.option = outs[i].option, .given = outs[i].given, .role = ROLE_TEMPORARY};
      snprintf(files[nfiles++].path, sizeof files->path, "%s.resume", outs[i].target);
    }
  }
  for (int i = 0; i < nfiles; i++) identify(&files[i]);
  for (int i = 0; i < nfiles; i++) {
    JobFile *f = &files[i];
    struct stat st;
    describe(f, keep, d1, sizeof d1);
    /* (An option's own names may share a file: a save that died between its link and its rename leaves path.1 = path.) */
    for (int j = i + 1; j < nfiles; j++)
      if (files[j].option != f->option && same_file(f, &files[j])) {
        describe(&files[j], keep, d2, sizeof d2);
        snprintf(msg, len, "fsdp-train: %s and %s are the same file '%s': each output needs its own", d1, d2, f->real);
        goto done;
      }
    /* A checkpoint may replace the one it resumed from (or its older copies); nothing may replace the data. */
    for (int j = 0; j < 3; j++)
      if (ins[j].given[0] && same_file(f, &ins[j]) &&
          (j == 0 || strcmp(f->option, "-checkpoint") || f->role == ROLE_TEMPORARY)) {
        snprintf(msg, len, "fsdp-train: %s would overwrite the %s file '%s'", d1, ins[j].option, ins[j].given);
        goto done;
      }
    if (f->role == ROLE_ITSELF) {
      if (!can_write(f->path, why, sizeof why)) {
        if (strcmp(f->path, f->given))
          snprintf(msg, len, "fsdp-train: %s '%s' (a symbolic link to '%s'): %s", f->option, f->given, f->path, why);
        else snprintf(msg, len, "fsdp-train: %s '%s': %s", f->option, f->given, why);
        goto done;
      }
    } else if (lstat(f->path, &st) == 0 && !S_ISREG(st.st_mode)) {
      /* The library removes, renames or links these names: only a regular file may be there. */
      snprintf(msg, len, "fsdp-train: %s is %s, not a regular file", d1, file_kind(st.st_mode));
      goto done;
    } else if (f->role == ROLE_TEMPORARY && !can_write(f->path, why, sizeof why)) {
      snprintf(msg, len, "fsdp-train: %s %s", d1, why);
      goto done;
    }
  }
done:
  free(files);
}

/* Pre-flight: every output is found writable before the first step, not
   after the last; the error names the path and the reason, on every rank. */
FSDPErrorCode preflight(FSDPContext ctx, Args *a)
{
  char msg[8 * PATH_MAX] = "";
  int rank, keep;
  FSDPCall(FSDPContextGetCheckpointKeep(ctx, &keep));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) check_outputs(a, keep, msg, sizeof msg);
  FSDPCallMPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD));
  FSDPCheck(!msg[0], MPI_COMM_WORLD, FSDP_ERR_IO, "%s", msg);
  /* Every rank writes where rank 0 found the outputs lead. */
  FSDPCallMPI(MPI_Bcast(a->checkpoint_file, sizeof a->checkpoint_file, MPI_CHAR, 0, MPI_COMM_WORLD));
  FSDPCallMPI(MPI_Bcast(a->export_file, sizeof a->export_file, MPI_CHAR, 0, MPI_COMM_WORLD));
  FSDPCallMPI(MPI_Bcast(a->loss_log_file, sizeof a->loss_log_file, MPI_CHAR, 0, MPI_COMM_WORLD));
  return FSDP_SUCCESS;
}

/* -generate's checks, once the model and the data are known: before the
   first step, not after the last. */
FSDPErrorCode check_generate(const Args *a, FSDPModel model, const Dataset *d)
{
  int64_t ctx, vocab, n = 0;
  float *tokens;
  FSDPErrorCode ierr;
  if (!a->generate) return FSDP_SUCCESS;
  FSDPCall(FSDPModelGetTokens(model, &ctx, &vocab));
  FSDPCheck(ctx > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -generate %lld needs a gpt: model, not %s",
            (long long)a->generate, a->model);
  FSDPCall(FSDPMalloc((strlen(a->prompt) + 1) * sizeof *tokens, FSDP_MEM_OTHER, &tokens));
  ierr = prompt_tokens(a->prompt, d->text, vocab, tokens, &n);
  FSDPCall(FSDPFree(&tokens));
  FSDPCall(ierr);
  FSDPCheck(n > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -prompt '%s' holds no token", a->prompt);
  return FSDP_SUCCESS;
}

/* A resume that trains continues the run that wrote the checkpoint: its next
   batches follow from that run's data, -batch and -grad_accum, and for token
   data its -seed, which draws the windows.  fsdp-train records them in the
   training state (rng[0] the seed, rng[1] a hash of the data, rng[2] the
   batch, rng[3] the micro-batches per step) and refuses a run that differs.
   A resume that trains no step (to -generate, say) may differ. */
FSDPErrorCode check_resume(const Args *a, const FSDPTrainingState *ts, const Dataset *d)
{
  const char *why = "the run would not continue the sequence of batches the checkpoint's run was training on";
  int rank;
  if (ts->step >= a->steps) return FSDP_SUCCESS;
  FSDPCheck(!d->tokens || ts->rng[0] == (uint64_t)a->seed, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -resume %s was written with -seed %lld; this run has -seed %lld: the seed draws the token "
            "windows, so %s (resume with -seed %lld)",
            a->resume, (long long)ts->rng[0], (long long)a->seed, why, (long long)ts->rng[0]);
  if (!ts->rng[2]) { /* a batch is never 0: written before fsdp-train recorded these */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      fprintf(stderr,
              "fsdp-train: -resume %s does not record the -batch, -grad_accum and data it was written with (an "
              "older fsdp-train wrote it): this run's are taken as they are\n",
              a->resume);
    return FSDP_SUCCESS;
  }
  FSDPCheck(ts->rng[2] == (uint64_t)a->batch, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -resume %s was written with -batch %lld; this run has -batch %lld: %s (resume with -batch "
            "%lld)",
            a->resume, (long long)ts->rng[2], (long long)a->batch, why, (long long)ts->rng[2]);
  FSDPCheck(ts->rng[3] == (uint64_t)a->grad_accum, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -resume %s was written with -grad_accum %lld; this run has -grad_accum %lld: %s (resume with "
            "-grad_accum %lld)",
            a->resume, (long long)ts->rng[3], (long long)a->grad_accum, why, (long long)ts->rng[3]);
  FSDPCheck(ts->rng[1] == d->hash, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -resume %s was written with other training data than this run's -data %s (%s): %s (resume "
            "with the data it was written with, or start a new run from its parameters with -init %s)",
            a->resume, a->data, d->description, why, a->resume);
  return FSDP_SUCCESS;
}
