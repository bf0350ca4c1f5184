/* h5data: writes the HDF5 files tests/fsdp-train.sh feeds fsdp-train, with
   the HDF5 C library alone (no libfsdp), as a user's own script would.
     h5data data FILE N IN OUT [nan=ROW,COL]
                                       /x float [N,IN], /y float [N,OUT]
                                       (x[ROW,COL] NaN, computed from first)
     h5data labels FILE N IN CLASSES   /x float [N,IN], /y int64 [N]
     h5data init FILE IN HID DEPTH OUT [omit=NAME] [reshape=NAME]
                                       /params/<name> of mlp:...,norm=none
   and reads one back:
     h5data chain FILE RUN             /x and /y [N, ...] are runs of RUN
                                       consecutive states: y[i] == x[i+1]
                                       bit for bit within a run, and y[i] != x[i]
   Exits 77 when libfsdp was built without HDF5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_config.h"
#include "fsdptest.h"

#ifdef FSDP_HAVE_HDF5
#include <hdf5.h>

static void h5write(hid_t loc, const char *name, hid_t type, int ndim, hsize_t d0, hsize_t d1, const void *data)
{
  hsize_t dims[2] = {d0, d1};
  hid_t space = H5Screate_simple(ndim, dims, NULL);
  hid_t ds = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (ds < 0 || H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    fprintf(stderr, "h5data: cannot write %s\n", name);
    exit(1);
  }
  H5Dclose(ds);
  H5Sclose(space);
}

static float *values(uint64_t key, size_t n, float scale)
{
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = scale * test_value(key, (int64_t)i);
  return v;
}

/* Pairs (x, y) of a simulation's consecutive states, in the order it made them. */
static int chain(const char *path, long run)
{
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds[2] = {-1, -1};
  hsize_t dims[2][H5S_MAX_RANK];
  size_t n = 0, row = 1;
  float *v[2] = {NULL, NULL};
  int ndim[2] = {-1, -1}, links = 0, bad = 1;
  if (file < 0 || run < 1) {
    fprintf(stderr, "h5data: chain %s %ld: %s\n", path, run,
            file < 0 ? "cannot open the file" : "runs are 1 row or more");
    goto done;
  }
  for (int k = 0; k < 2; k++) {
    hid_t space;
    if ((ds[k] = H5Dopen2(file, k ? "y" : "x", H5P_DEFAULT)) < 0 || (space = H5Dget_space(ds[k])) < 0) {
      fprintf(stderr, "h5data: %s has no dataset /%s\n", path, k ? "y" : "x");
      goto done;
    }
    ndim[k] = H5Sget_simple_extent_dims(space, dims[k], NULL);
    H5Sclose(space);
  }
  if (ndim[0] < 1 || ndim[0] != ndim[1]) {
    fprintf(stderr, "h5data: /x and /y have ranks %d and %d: rows of samples are rank 1 or more\n", ndim[0], ndim[1]);
    goto done;
  }
  for (int d = 0; d < ndim[0]; d++) {
    if (dims[0][d] != dims[1][d]) {
      fprintf(stderr, "h5data: /x and /y differ in shape\n");
      goto done;
    }
    if (d) row *= dims[0][d];
  }
  if ((n = dims[0][0]) == 0) {
    fprintf(stderr, "h5data: /x has no rows\n");
    goto done;
  }
  for (int k = 0; k < 2; k++)
    if (!(v[k] = malloc(n * row * sizeof *v[k])) ||
        H5Dread(ds[k], H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v[k]) < 0)
      goto done;
  for (size_t i = 0; i < n; i++) {
    if (!memcmp(v[0] + i * row, v[1] + i * row, row * sizeof(float))) {
      fprintf(stderr, "h5data: row %zu: y is x\n", i);
      goto done;
    }
    if ((long)(i % (size_t)run) == run - 1 || i + 1 == n) continue;
    if (memcmp(v[1] + i * row, v[0] + (i + 1) * row, row * sizeof(float))) {
      fprintf(stderr, "h5data: row %zu: y is not row %zu's x\n", i, i + 1);
      goto done;
    }
    links++;
  }
  printf("h5data: %zu rows in runs of %ld: every y is the next row's x (%d links)\n", n, run, links);
  bad = 0;
done: /* every path closes what it opened */
  for (int k = 0; k < 2; k++) {
    free(v[k]);
    if (ds[k] >= 0) H5Dclose(ds[k]);
  }
  if (file >= 0) H5Fclose(file);
  return bad;
}

int main(int argc, char **argv)
{
  hid_t file;
  if (argc < 3) {
    fprintf(stderr, "usage: h5data data|labels|init|chain FILE ...\n");
    return 2;
  }
  if (!strcmp(argv[1], "chain")) return argc == 4 ? chain(argv[2], atol(argv[3])) : 2;
  file = H5Fcreate(argv[2], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return 1;
  if (!strcmp(argv[1], "data") || !strcmp(argv[1], "labels")) {
    long n = atol(argv[3]), in = atol(argv[4]), out = atol(argv[5]);
    float *x = values(1, (size_t)(n * in), 1.0f);
    long nan_row = -1, nan_col = -1;
    if (argc > 6 && sscanf(argv[6], "nan=%ld,%ld", &nan_row, &nan_col) != 2) {
      fprintf(stderr, "h5data: %s is not nan=ROW,COL\n", argv[6]);
      return 2;
    }
    if (!strcmp(argv[1], "data")) {
      float *y = malloc((size_t)(n * out) * sizeof *y);
      for (long i = 0; i < n; i++) /* a smooth target of x */
        for (long k = 0; k < out; k++)
          y[i * out + k] = x[i * in + k % in] * x[i * in + (k + 1) % in] + 0.5f * x[i * in];
      h5write(file, "y", H5T_NATIVE_FLOAT, 2, (hsize_t)n, (hsize_t)out, y);
      free(y);
    }
    if (nan_row >= 0 && nan_row < n && nan_col >= 0 && nan_col < in) x[nan_row * in + nan_col] = NAN;
    h5write(file, "x", H5T_NATIVE_FLOAT, 2, (hsize_t)n, (hsize_t)in, x);
    if (strcmp(argv[1], "data")) {
      int64_t *y = malloc((size_t)n * sizeof *y);
      for (long i = 0; i < n; i++) y[i] = (x[i * in] > 0) + 2 * (x[i * in + 1] > 0.3f); /* classes from x */
      for (long i = 0; i < n; i++) y[i] %= out;
      h5write(file, "y", H5T_NATIVE_INT64, 1, (hsize_t)n, 0, y);
      free(y);
    }
    free(x);
  } else if (!strcmp(argv[1], "init")) {
    long in = atol(argv[3]), hid = atol(argv[4]), depth = atol(argv[5]), out = atol(argv[6]);
    const char *omit = "", *reshape = "";
    hid_t group = H5Gcreate2(file, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (int i = 7; i < argc; i++) {
      if (!strncmp(argv[i], "omit=", 5)) omit = argv[i] + 5;
      if (!strncmp(argv[i], "reshape=", 8)) reshape = argv[i] + 8;
    }
    for (long b = 0; b <= depth; b++) {
      char w[64], bias[64];
      long rows = b < depth ? hid : out, cols = b == 0 ? in : hid;
      float *v = values(50 + (uint64_t)b, (size_t)((rows + 1) * cols), 0.3f);
      if (b < depth) {
        snprintf(w, sizeof w, "blocks.%ld.fc.weight", b);
        snprintf(bias, sizeof bias, "blocks.%ld.fc.bias", b);
      } else {
        snprintf(w, sizeof w, "head.weight");
        snprintf(bias, sizeof bias, "head.bias");
      }
      if (strcmp(w, omit))
        h5write(group, w, H5T_NATIVE_FLOAT, 2, (hsize_t)(rows + !strcmp(w, reshape)), (hsize_t)cols, v);
      if (strcmp(bias, omit)) h5write(group, bias, H5T_NATIVE_FLOAT, 1, (hsize_t)rows, 0, v);
      free(v);
    }
    H5Gclose(group);
  } else {
    fprintf(stderr, "h5data: unknown command %s\n", argv[1]);
    return 2;
  }
  H5Fclose(file);
  return 0;
}
#else
int main(void) { return 77; }
#endif
