/* ASCII viewers: where objects print themselves.  Plain printing comes from
   rank 0; synchronized printing is gathered and written in rank order. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "fsdpimpl.h"

struct FSDPViewer_s {
  MPI_Comm comm;
  int rank;
  FILE *fp;     /* rank 0 only */
  bool owns_fp; /* a file this viewer opened */
  int tabs;
  bool line_start;
  char *pending; /* synchronized text not yet flushed */
  size_t npending, cappending;
};

FSDPErrorCode FSDPViewerASCIIOpen(MPI_Comm comm, const char *name, FSDPViewer *viewer)
{
  FSDPViewer v;
  int opened = 1, err = 0;

  FSDPCheck(viewer, comm, FSDP_ERR_ARG, "viewer must not be NULL");
  *viewer = NULL;
  FSDPCheck(name && name[0], comm, FSDP_ERR_ARG, "viewer name must be \"stdout\", \"stderr\" or a file name");
  FSDPCollective(comm);
  FSDPCall(FSDPCalloc(1, sizeof *v, FSDP_MEM_OTHER, &v));
  FSDPCallMPI(MPI_Comm_dup(comm, &v->comm));
  FSDPCallMPI(MPI_Comm_set_errhandler(v->comm, MPI_ERRORS_RETURN));
  FSDPCallMPI(MPI_Comm_rank(v->comm, &v->rank));
  v->line_start = true;
  if (v->rank == 0) {
    if (strcmp(name, "stdout") == 0) v->fp = stdout;
    else if (strcmp(name, "stderr") == 0) v->fp = stderr;
    else {
      v->fp = fopen(name, "w");
      v->owns_fp = v->fp != NULL;
      err = errno;
    }
    opened = v->fp != NULL;
  }
  /* Every rank learns whether rank 0 could open the file, and fails with it. */
  FSDPCallMPI(MPI_Bcast(&opened, 1, MPI_INT, 0, v->comm));
  FSDPCallMPI(MPI_Bcast(&err, 1, MPI_INT, 0, v->comm));
  if (!opened) {
    FSDPCallMPI(MPI_Comm_free(&v->comm));
    FSDPCall(FSDPFree(&v));
  }
  FSDPCheck(opened, comm, FSDP_ERR_IO, "cannot open viewer file '%s' for writing on rank 0: %s", name, strerror(err));
  *viewer = v;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerDestroy(FSDPViewer *viewer)
{
  FSDPViewer v;
  FSDPCheck(viewer, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer must not be NULL");
  v = *viewer;
  if (!v) return FSDP_SUCCESS;
  FSDPCollectiveTeardown(v->comm);
  FSDPCall(FSDPViewerFlush(v));
  FSDPCheck(!v->owns_fp || fclose(v->fp) == 0, MPI_COMM_SELF, FSDP_ERR_IO, "closing viewer file: %s", strerror(errno));
  FSDPCallMPI(MPI_Comm_free(&v->comm));
  FSDPCall(FSDPFree(&v->pending));
  FSDPCall(FSDPFree(viewer));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerGetComm(FSDPViewer viewer, MPI_Comm *comm)
{
  FSDPCheck(viewer && comm, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer and comm must not be NULL");
  *comm = viewer->comm;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerASCIIPushTab(FSDPViewer viewer)
{
  FSDPCheck(viewer, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer must not be NULL");
  viewer->tabs++;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerASCIIPopTab(FSDPViewer viewer)
{
  FSDPCheck(viewer, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer must not be NULL");
  FSDPCheck(viewer->tabs > 0, MPI_COMM_SELF, FSDP_ERR_STATE, "FSDPViewerASCIIPopTab without a matching PushTab");
  viewer->tabs--;
  return FSDP_SUCCESS;
}

/* Append text to the pending buffer, indenting each new line by the tab level. */
static FSDPErrorCode append(FSDPViewer v, const char *text)
{
  for (const char *c = text; *c; c++) {
    size_t need = v->npending + 2 * (size_t)v->tabs + 2;
    if (need > v->cappending) {
      char *grown;
      size_t cap = v->cappending ? 2 * v->cappending : 256;
      while (cap < need) cap *= 2;
      FSDPCall(FSDPMalloc(cap, FSDP_MEM_OTHER, &grown));
      if (v->pending) memcpy(grown, v->pending, v->npending);
      FSDPCall(FSDPFree(&v->pending));
      v->pending = grown;
      v->cappending = cap;
    }
    if (v->line_start && *c != '\n')
      for (int t = 0; t < v->tabs; t++) {
        v->pending[v->npending++] = ' ';
        v->pending[v->npending++] = ' ';
      }
    v->pending[v->npending++] = *c;
    v->line_start = *c == '\n';
  }
  v->pending[v->npending] = '\0';
  return FSDP_SUCCESS;
}

static FSDPErrorCode vappend(FSDPViewer v, const char *fmt, va_list ap)
{
  char small[512], *text = small;
  va_list copy;
  int n;

  va_copy(copy, ap);
  n = vsnprintf(small, sizeof small, fmt, ap);
  FSDPCheck(n >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "cannot format '%s'", fmt);
  if ((size_t)n >= sizeof small) {
    FSDPCall(FSDPMalloc((size_t)n + 1, FSDP_MEM_OTHER, &text));
    vsnprintf(text, (size_t)n + 1, fmt, copy);
  }
  va_end(copy);
  FSDPCall(append(v, text));
  if (text != small) FSDPCall(FSDPFree(&text));
  return FSDP_SUCCESS;
}

static FSDPErrorCode write_out(FSDPViewer v, const char *text, size_t len)
{
  FSDPCheck(fwrite(text, 1, len, v->fp) == len, MPI_COMM_SELF, FSDP_ERR_IO, "viewer write failed: %s", strerror(errno));
  fflush(v->fp);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerASCIIPrintf(FSDPViewer viewer, const char *fmt, ...)
{
  va_list ap;
  size_t keep;
  FSDPErrorCode err;

  FSDPCheck(viewer && fmt, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer and fmt must not be NULL");
  if (viewer->rank != 0) return FSDP_SUCCESS;
  /* Formatted through the pending buffer for the indentation, then written at once. */
  keep = viewer->npending;
  va_start(ap, fmt);
  err = vappend(viewer, fmt, ap);
  va_end(ap);
  FSDPCall(err);
  FSDPCall(write_out(viewer, viewer->pending + keep, viewer->npending - keep));
  viewer->npending = keep;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerASCIISynchronizedPrintf(FSDPViewer viewer, const char *fmt, ...)
{
  va_list ap;
  FSDPErrorCode err;

  FSDPCheck(viewer && fmt, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer and fmt must not be NULL");
  va_start(ap, fmt);
  err = vappend(viewer, fmt, ap);
  va_end(ap);
  FSDPCall(err);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerFlush(FSDPViewer viewer)
{
  int size, mine, *counts = NULL, *displs = NULL, total = 0;
  char *all = NULL;

  FSDPCheck(viewer, MPI_COMM_SELF, FSDP_ERR_ARG, "viewer must not be NULL");
  FSDPCollective(viewer->comm);
  FSDPCheck(viewer->npending < (size_t)(1 << 30), MPI_COMM_SELF, FSDP_ERR_ARG,
            "%zu bytes of synchronized output pending: flush more often", viewer->npending);
  FSDPCallMPI(MPI_Comm_size(viewer->comm, &size));
  mine = (int)viewer->npending;
  if (viewer->rank == 0) FSDPCall(FSDPMalloc(2 * (size_t)size * sizeof(int), FSDP_MEM_OTHER, &counts));
  FSDPCallMPI(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, viewer->comm));
  if (viewer->rank == 0) {
    displs = counts + size;
    for (int r = 0; r < size; r++) {
      displs[r] = total;
      FSDPCheck(counts[r] <= INT32_MAX - total, MPI_COMM_SELF, FSDP_ERR_ARG, "synchronized output over 2 GiB");
      total += counts[r];
    }
    FSDPCall(FSDPMalloc((size_t)total + 1, FSDP_MEM_OTHER, &all));
  }
  FSDPCallMPI(MPI_Gatherv(viewer->pending, mine, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, viewer->comm));
  viewer->npending = 0;
  if (viewer->rank == 0) {
    if (total) FSDPCall(write_out(viewer, all, (size_t)total));
    FSDPCall(FSDPFree(&all));
    FSDPCall(FSDPFree(&counts));
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPViewerApply_Private(const char *caller, FSDPViewer viewer, MPI_Comm comm,
                                      FSDPErrorCode (*view)(FSDPViewer, void *), void *ctx)
{
  MPI_Comm world = FSDPCommWorld_Private();
  FSDPViewer out = viewer;
  FSDPErrorCode err;

  /* A view is collective on its object's communicator, else on the viewer's (the world's for NULL). */
  if (FSDPUnlikely(FSDPCollectiveChecks_Private))
    FSDPCall(FSDPCollectiveEnter_Private(comm != MPI_COMM_NULL ? comm : viewer ? viewer->comm : world, caller, false));

  if (!out && comm != MPI_COMM_NULL) FSDPCall(FSDPViewerASCIIOpen(comm, "stdout", &out));
  if (!out) {
    FSDPCheck(world != MPI_COMM_NULL, MPI_COMM_SELF, FSDP_ERR_STATE,
              "a NULL viewer means stdout on MPI_COMM_WORLD, which needs FSDPInitialize() first");
    FSDPCall(FSDPViewerASCIIOpen(world, "stdout", &out));
  }
  err = view(out, ctx);
  if (out != viewer) FSDPCall(FSDPViewerDestroy(&out));
  FSDPCall(err);
  return FSDP_SUCCESS;
}
