/* Sharded checkpoints in one parallel HDF5 file (doc/checkpoint-format.md).
   Datasets have the parameters' full shapes; every rank writes and reads
   only the pieces that lie in its own shard, as hyperslabs, with MPI-IO
   (collective or independent transfers) or POSIX calls into the file rank 0
   made alone, so nothing is gathered and a file
   loads at any world size, strategy and wrapping.  One concern a file:
   format.c (what save and load share), save.c, load.c, verify.c (what a load
   checks before it believes a file), and here a context's checkpoint
   settings and training state. */
#include "ioimpl.h"

FSDPErrorCode FSDPContextSetTrainingState(FSDPContext ctx, const FSDPTrainingState *state)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetTrainingState: ctx must not be NULL");
  FSDPCheck(state, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetTrainingState: state must not be NULL");
  ctx->training = *state;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetTrainingState(FSDPContext ctx, FSDPTrainingState *state)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetTrainingState: ctx must not be NULL");
  if (state) *state = ctx->training;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckpointKeep(FSDPContext ctx, int keep)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointKeep: ctx must not be NULL");
  FSDPCheck(keep >= 1, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointKeep: keep %d must be at least 1", keep);
  ctx->checkpoint_keep = keep;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetCheckpointKeep(FSDPContext ctx, int *keep)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckpointKeep: ctx must not be NULL");
  FSDPCheck(keep, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckpointKeep: keep must not be NULL");
  *keep = ctx->checkpoint_keep;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckpointIO(FSDPContext ctx, FSDPCheckpointIO io)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointIO: ctx must not be NULL");
  FSDPCheck((int)io >= 0 && io < FSDP_NUM_CHECKPOINT_IO, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetCheckpointIO: io %d is not collective, independent, auto or posix", (int)io);
  ctx->checkpoint_save_io = ctx->checkpoint_load_io = ctx->checkpoint_io_requested = io;
  FSDPContextResolveCheckpointIO_Private(ctx); /* after SetUp, auto as SetUp decided it */
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckpointStrict(FSDPContext ctx, bool strict)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointStrict: ctx must not be NULL");
  ctx->checkpoint_strict = strict;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckFinite(FSDPContext ctx, bool check)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckFinite: ctx must not be NULL");
  ctx->check_finite = check;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetCheckFinite(FSDPContext ctx, bool *check)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckFinite: ctx must not be NULL");
  FSDPCheck(check, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckFinite: check must not be NULL");
  *check = ctx->check_finite;
  return FSDP_SUCCESS;
}
