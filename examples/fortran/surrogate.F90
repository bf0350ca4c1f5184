! The complete program of doc/fortran.md: an MLP surrogate trained with
! hybrid sharding over emulated nodes, its parameters read back between
! steps, and a checkpoint with the training state, loaded back.
!   mpiexec -n 4 surrogate [-fsdp_* options]
! writes surrogate.h5 in the working directory (tests/fortran.sh runs it).
program surrogate
  use, intrinsic :: iso_c_binding
  use mpi
  use fsdp
  implicit none
#include "fsdpf.h"
  integer, parameter :: BATCH = 64, STEPS = 20
  integer(fsdp_int64), parameter :: SEED = 2026
  type(fsdp_context) :: ctx
  type(fsdp_shardgroup) :: group
  type(fsdp_model) :: model
  type(fsdp_optimizer) :: opt
  type(fsdp_flatparam) :: unit
  type(fsdp_training_state) :: state
  real(c_float), target :: x(9, BATCH)
  real(c_float) :: t(1, BATCH)
  real(c_float) :: saved(32, 1) ! head.weight, read back
  real(c_float), pointer :: w(:, :)
  real(c_double) :: loss
  integer :: ierr, rank, nranks, rpn, step, id, node, nnodes, comm, shard, factor, replica, replicas
  logical :: given
  character(len=12) :: text

  FSDPCallA(fsdp_initialize(ierr))
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)

  ! Layout, set in the program: hybrid sharding (shard within a node, replicate
  ! across nodes) over two emulated nodes, so one machine stands in for two.
  ! Both are defaults: -fsdp_sharding_strategy and -fsdp_ranks_per_node on the
  ! command line still win (fsdp_options_set_value would override them).
  FSDPCallA(fsdp_options_get_int('-fsdp_ranks_per_node', 'emulate nodes of this many ranks', 0, rpn, given, ierr))
  if (.not. given .and. mod(nranks, 2) == 0) then
    write (text, '(i0)') nranks / 2
    FSDPCallA(fsdp_options_set_value('-fsdp_ranks_per_node', trim(text), ierr))
  end if
  FSDPCallA(fsdp_context_create(MPI_COMM_WORLD, ctx, ierr))
  FSDPCallA(fsdp_context_set_sharding_strategy(ctx, FSDP_HYBRID_SHARD, ierr))
  FSDPCallA(fsdp_context_set_from_options(ctx, ierr))

  ! Set-up order: the model adds its units to the context, and fsdp_model_set_up
  ! sets the context up too (do not call fsdp_context_set_up as well).  The
  ! optimizer comes after, on the shards the set-up made.
  FSDPCallA(fsdp_model_create(ctx, 'mlp:in=9,hidden=32,depth=2,out=1,act=tanh', model, ierr))
  FSDPCallA(fsdp_model_set_from_options(model, ierr))
  FSDPCallA(fsdp_model_set_up(model, ierr))
  FSDPCallA(fsdp_optimizer_create(ctx, opt, ierr))
  FSDPCallA(fsdp_optimizer_set_learning_rate(opt, 1d-2, ierr))
  FSDPCallA(fsdp_optimizer_set_from_options(opt, ierr))
  FSDPCallA(fsdp_optimizer_set_up(opt, ierr))

  ! The layout the ShardGroup built (its communicators belong to it).
  FSDPCallA(fsdp_context_get_shard_group(ctx, group, ierr))
  FSDPCallA(fsdp_shardgroup_get_node(group, node, nnodes, ierr))
  FSDPCallA(fsdp_shardgroup_get_shard_comm(group, comm, shard, factor, ierr))
  FSDPCallA(fsdp_shardgroup_get_replicate_comm(group, comm, replica, replicas, ierr))
  if (rank == 0) write (*, '(a,i0,a,i0,a,i0,a,i0,a)') 'layout: ', nranks, ' ranks on ', nnodes, &
    ' nodes, parameters sharded over ', factor, ' ranks and replicated ', replicas, ' times'

  do step = 1, STEPS
    call make_batch(rank, step, x, t)
    FSDPCallA(fsdp_model_train_step(model, opt, x, t, loss, ierr))
    if (mod(step, 10) == 0) then
      ! Reading a trained parameter between steps: every unit is sharded now,
      ! so unshard its unit (collective: every rank calls it), view, reshard.
      ! head.weight is C's [1, 32], Fortran's w(32, 1).
      FSDPCallA(fsdp_context_find_param(ctx, 'head.weight', unit, id, ierr))
      FSDPCallA(fsdp_flatparam_unshard(unit, ierr))
      FSDPCallA(fsdp_flatparam_get_param(unit, id, w, ierr))
      if (rank == 0) write (*, '(a,i3,a,es16.9,a,es16.9)') 'step', step, '  loss', loss, '  sum(head.weight) ', &
        sum(real(w, c_double))
      saved(:, :) = w ! a copy: the view goes away with the reshard
      FSDPCallA(fsdp_flatparam_reshard(unit, ierr))
    end if
  end do

  ! The training state goes into the checkpoint with the shards.  step is
  ! left alone: saving with an optimizer writes the optimizer's step count
  ! over it.  data_cursor and rng are the program's own, in its own units.
  state%data_cursor = int(STEPS, fsdp_int64) * BATCH ! samples each rank has used
  state%rng = [SEED, 0_fsdp_int64, 0_fsdp_int64, 0_fsdp_int64]
  FSDPCallA(fsdp_context_set_training_state(ctx, state, ierr))
  FSDPCallA(fsdp_context_save(ctx, opt, 'surrogate.h5', ierr))

  ! As a restarted job would: load (at any world size) and read the state back.
  FSDPCallA(fsdp_context_load(ctx, opt, 'surrogate.h5', ierr))
  FSDPCallA(fsdp_context_get_training_state(ctx, state, ierr))
  FSDPCallA(fsdp_flatparam_unshard(unit, ierr))
  FSDPCallA(fsdp_flatparam_get_param(unit, id, w, ierr))
  if (rank == 0) write (*, '(a,i0,a,i0,a,es8.2)') 'loaded: step ', state%step, ', data cursor ', &
    state%data_cursor, ', head.weight differs from the saved by ', maxval(abs(w - saved))
  FSDPCallA(fsdp_flatparam_reshard(unit, ierr))

  FSDPCallA(fsdp_optimizer_destroy(opt, ierr))
  FSDPCallA(fsdp_model_destroy(model, ierr))
  FSDPCallA(fsdp_context_destroy(ctx, ierr))
  FSDPCallA(fsdp_finalize(ierr))

contains

  ! This rank's batch: inputs uniform in [-1, 1) from libfsdp's counter-based
  ! generator (the same numbers on any machine), and a smooth response.
  subroutine make_batch(rank, step, x, t)
    integer, intent(in) :: rank, step
    real(c_float), intent(out), target, contiguous :: x(:, :)
    real(c_float), intent(out) :: t(:, :)
    real(c_float), pointer :: flat(:)
    integer :: ierr
    flat(1:size(x)) => x
    FSDPCallA(fsdp_random_uniform(SEED + rank, 'x', int(step - 1, fsdp_int64) * size(x), -1d0, 1d0, flat, ierr))
    t(1, :) = sum(x, dim=1) / size(x, 1)
  end subroutine
end program
