/* ioimpl.h: what the files of the checkpoint code share. */
#ifndef FSDP_IOIMPL_H
#define FSDP_IOIMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../optim/optimimpl.h"

/* CRC-32C (Castagnoli, the iSCSI/ext4 one): crc of the bytes so far (0 for
   none), extended by buf[len].  FSDPCRC32C_Private(0, "123456789", 9) is
   0xE3069283. */
uint32_t FSDPCRC32C_Private(uint32_t crc, const void *buf, size_t len);
/* The same CRC over len bytes of float32 values (a multiple of 64, at least
   256), and on the same loads whether any of them may be non-finite or
   negative (a negative NaN counts: look closer where they are set).  False,
   computing nothing, where this CPU has no such pass. */
bool FSDPCRC32CFlagFloats_Private(uint32_t *crc, const void *buf, size_t len, bool *nonfinite, bool *negative);
/* crc times x^(8 n) modulo the polynomial: the CRC of A followed by B is
   FSDPCRC32CShift_Private(crc(A), |B|) ^ crc(B), so the CRCs of pieces,
   each shifted by the bytes after it, XOR to the CRC of the whole: ranks
   checksum their own pieces and one MPI_BXOR reduction combines them. */
uint32_t FSDPCRC32CShift_Private(uint32_t crc, uint64_t n);

/* The context's state must be set up before a checkpoint is written or read. */
#define CHECK_CTX_SETUP(c)                                                                                             \
  do {                                                                                                                 \
    FSDPCheck(c, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: ctx must not be NULL", __func__);                                   \
    FSDPCheck((c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the context is not set up: call FSDPContextSetUp first", \
              __func__);                                                                                               \
    FSDPCall(DeviceEnter_Private((c)->dev));                                                                           \
  } while (0)

#ifdef FSDP_HAVE_HDF5
#include <hdf5.h>

#define FORMAT_NAME "libfsdp checkpoint"
/* 2: a random file_id, each dataset's crc32c bound to its name and the file's
   id, metadata_crc32c always there.  1 still loads. */
#define FORMAT_VERSION 2
/* The root attribute that checksums every attribute of / and /optim (format.c). */
#define METADATA_CRC "metadata_crc32c"

/* One dataset: a parameter (state < 0) or state tensor `state` of one. */
typedef struct {
  FlatParam unit;
  int param, state;
} Item;

/* Elements [begin, end) of a flattened parameter that this rank handles;
   they sit at element `at` of its shard and `packed` of its packed
   optimizer state (trainable parameters only). */
typedef struct {
  int64_t begin, end, at, packed;
} Piece;

/* What a load reads and checks before any tensor: the root's and /optim's
   attributes. */
typedef struct {
  bool libfsdp;    /* written by FSDPContextSave, not by another tool */
  bool have_optim; /* the file has /optim */
  char optim_type[32];
  FSDPTrainingState training;
  int64_t step, growth_tracker; /* /optim's */
  double scale;
  bool have_scale;
  bool have_metadata_crc; /* files of libfsdp before 0.? have none */
  int version;            /* format_version; 0: not libfsdp's */
  uint64_t file_id;       /* format 2: what each dataset's checksum is bound to */
  char *param_groups;     /* /optim's (FSDPOptimizerDescribeGroups_Private), or NULL: none (older files too) */
} Header;

/* A list of names for an error message or a report: as many whole entries
   as fit, and how many there are in all (NameListFormat says how many more). */
typedef struct {
  char text[700];
  int ends[64]; /* where each kept entry ends in text */
  int count, kept;
  bool full; /* an entry did not fit: none after it is kept either */
} NameList;

/* Loading one unit: what its steps share.  A unit's datasets are read into
   staging (its shard, then its packed state tensors), checked against their
   checksums and for non-finite values, and only then moved into the shard
   and the optimizer state (on the host, their pages exchanged with
   staging's).  Each step is collective: every rank makes every call,
   whatever failed on it, and the ranks agree on the outcome after. */
typedef struct {
  FSDPContext ctx;
  FSDPOptimizer opt;
  hid_t file;
  const char *path;
  const Header *h;
  FlatParam unit;
  const Item *items;
  const bool *load;
  int nitems;
  void *staging;
  /* Where staging mirrors the shard and each state tensor: at the same offset
     within a page as what it mirrors, so that commit can exchange pages. */
  char *staged[3];
  int64_t state_numel;  /* elements of each optimizer state tensor of the unit */
  const char *names[2]; /* of the optimizer's state tensors */
  Piece *pieces;        /* this rank's piece of each parameter */
  uint32_t *crc, *want; /* per item: the CRC-32C of what was read, and the file's */
  int *have;            /* per item: whether the file has a checksum */
  int64_t *nonfinite;   /* per item: its first non-finite value read, or -1 */
  int64_t *negative;    /* per item: its first negative value read (of exp_avg_sq only), or -1 */
  hid_t dxpl;
  hid_t dxpl_chunked; /* independent transfers: the collective list that chunked datasets take; else -1 */
  int fd;             /* POSIX transfers: HDF5's file descriptor, for read_direct; else -1 */
  MPI_File *mpi_file; /* independent transfers: HDF5's MPI-IO file, for read_direct; else NULL */
  int mpi_error;      /* the error code of read_direct's failed MPI-IO read, or MPI_SUCCESS */
} UnitLoad;

/* HDF5's own error stack would print on every rank; the library's errors say
   what went wrong once, plainly. */
typedef struct {
  H5E_auto2_t func;
  void *data;
  fenv_t fenv; /* the caller's floating-point environment: what HDF5 raises stays inside (src/sys/fpenv.c) */
} QuietHDF5;

/* An error from HDF5, raised where a value, not a return, is wanted. */
#define H5ERR(...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_HDF5, __VA_ARGS__)
/* Metadata that cannot be read, or reads as impossible: the file is damaged
   (or was edited), and nothing of it is loaded. */
#define DAMAGED(...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_CORRUPT, __VA_ARGS__)
/* An MPI call whose failure is recorded, not returned: the caller still has
   collective work to finish with the other ranks. */
#define MPI_RECORD(call) CheckpointMPIRecord_Private((call), __LINE__, __func__, #call)

/* format.c: the pieces each rank handles */
void CheckpointWritePieces_Private(FlatParam unit, Piece *pieces);
void CheckpointReadPieces_Private(FlatParam unit, Piece *pieces);
char *CheckpointPieceMemory_Private(const Item *it, const Piece *pc, void *shard, void *state);
char *CheckpointStaged_Private(const UnitLoad *L, int k);
double CheckpointValue_Private(FSDPDataType dtype, const void *mem, int64_t i);
uint32_t CheckpointPlaceCRC_Private(const Item *it, const Piece *pc, uint32_t crc, size_t es);
uint32_t CheckpointPieceCRC_Private(const Item *it, const Piece *pc, const void *mem, size_t es);
void CheckpointScanValues_Private(FSDPDataType dtype, const void *mem, int64_t n, uint32_t *crc, int64_t *nonfinite,
                                  int64_t *negative);
void CheckpointScanMore_Private(FSDPDataType dtype, const void *mem, int64_t n, int64_t done, uint32_t *crc,
                                int64_t *nonfinite, int64_t *negative);
uint32_t CheckpointBindCRC_Private(uint64_t file_id, const char *path, uint32_t values);
FSDPErrorCode CheckpointListItems_Private(FSDPContext ctx, int nstates, Item **items, int *n);
/* format.c: HDF5 */
const char *CheckpointH5Reason_Private(char buf[256]);
hid_t CheckpointFileType_Private(FSDPDataType dtype);
hid_t CheckpointNativeType_Private(FSDPDataType dtype);
void CheckpointItemPath_Private(const Item *it, const char *const *state_names, char *buf, size_t len);
herr_t CheckpointSelectPiece_Private(hid_t filespace, hid_t *memspace, const ParamInfo *p, const Piece *pc);
hid_t CheckpointMakeSpace_Private(const ParamInfo *p);
herr_t CheckpointPutArray_Private(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                                  const void *value);
herr_t CheckpointPutAttr_Private(hid_t loc, const char *name, hid_t type, int n, const void *value);
herr_t CheckpointPutString_Private(hid_t loc, const char *name, const char *value);
herr_t CheckpointPutInt64_Private(hid_t loc, const char *name, int64_t v);
herr_t CheckpointPutDouble_Private(hid_t loc, const char *name, double v);
int CheckpointGetAttr_Private(hid_t loc, const char *name, hid_t type, int n, void *value);
int CheckpointGetString_Private(hid_t loc, const char *name, char *value, size_t len);
int CheckpointGetStringAlloc_Private(hid_t loc, const char *name, char **value);
int CheckpointMetadataDigest_Private(hid_t file, uint32_t *crc);
hid_t CheckpointFileAccess_Private(FSDPContext ctx, FSDPCheckpointIO io);
hid_t CheckpointTransferList_Private(FSDPCheckpointIO io);
void CheckpointQuietBegin_Private(QuietHDF5 *q);
void CheckpointQuietEnd_Private(const QuietHDF5 *q);
FSDPErrorCode CheckpointMPIRecord_Private(int err, int line, const char *func, const char *call);
FSDPErrorCode CheckpointAgreeSettings_Private(FSDPContext ctx, const char *caller, FSDPCheckpointIO io);
/* verify.c */
void CheckpointNameListAdd_Private(NameList *l, const char *name, const char *detail);
void CheckpointNameListFormat_Private(const NameList *l, char *buf, size_t len);
FSDPErrorCode CheckpointReadHeader_Private(FSDPOptimizer opt, hid_t file, const char *path, Header *h);
FSDPErrorCode CheckpointCheckFile_Private(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path,
                                          const Header *h, const Item *items, int nitems, bool *load);
FSDPErrorCode CheckpointVerifyChecksums_Private(UnitLoad *L);
FSDPErrorCode CheckpointVerifyFinite_Private(const UnitLoad *L);
#endif

#endif
