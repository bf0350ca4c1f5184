/* The checkpoint format's checksums, computed without libfsdp
   (doc/checkpoint-format.md): what the checkpoint tests check files
   against, and forge them with. */
#ifndef FSDP_FORMATTEST_H
#define FSDP_FORMATTEST_H

#include <hdf5.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"

/* Bitwise CRC-32C, independent of the library's table and SSE4.2 code:
   crc of the bytes so far (0 for none), extended by p[0..n). */
/* Links are visited with the API of the HDF5 at hand (H5Ovisit's changed in 1.12). */
#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t LinkInfo;
#define VISIT H5Lvisit2
#else
typedef H5L_info_t LinkInfo;
#define VISIT H5Lvisit
#endif

static inline uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t n)
{
  const unsigned char *p = buf;
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}

/* Format 2 (doc/checkpoint-format.md): a dataset's crc32c is the CRC-32C of
   the file's file_id (8 bytes, little-endian), the dataset's path with its
   terminating zero, and the CRC-32C of its values (4 bytes, little-endian). */
static inline uint32_t bound_crc(uint64_t file_id, const char *path, const unsigned char *values, size_t n)
{
  unsigned char id[8], v[4];
  uint32_t c = crc32c_extend(0, values, n);
  for (int i = 0; i < 8; i++) id[i] = (unsigned char)(file_id >> (8 * i));
  for (int i = 0; i < 4; i++) v[i] = (unsigned char)(c >> (8 * i));
  return crc32c_extend(crc32c_extend(crc32c_extend(0, id, 8), path, strlen(path) + 1), v, 4);
}

/* Sets the crc32c attribute of dataset `obj` (called `name` in messages). */
static inline void put_crc(hid_t obj, const char *name, uint32_t crc)
{
  hid_t a = H5Aopen(obj, "crc32c", H5P_DEFAULT);
  TEST_ASSERT(a >= 0 && H5Awrite(a, H5T_NATIVE_UINT32, &crc) >= 0, "cannot set the crc32c of %s", name);
  H5Aclose(a);
}

static inline uint64_t file_id(hid_t file)
{
  uint64_t id = 0;
  hid_t a = H5Aopen(file, "file_id", H5P_DEFAULT);
  TEST_ASSERT(a >= 0 && H5Aread(a, H5T_NATIVE_UINT64, &id) >= 0, "the file has no root attribute file_id");
  H5Aclose(a);
  return id;
}

#endif
