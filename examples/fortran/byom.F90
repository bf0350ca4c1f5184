! Bring your own model: a Fortran program that registers its own parameters
! and writes its own forward and backward, using only the FlatParam runtime.
! A two-layer perceptron y = W2' tanh(W1' x + b1) + b2 trained with MSE; each
! layer is one unit (one FlatParam), unsharded just before it runs and
! resharded or reduced right after.  Parameters are in Fortran's shapes:
! W1(in, hidden), W2(hidden, out) (C sees [hidden, in] and [out, hidden]).
!   mpiexec -n 4 byom [-steps S] [-fsdp_* options]
! After the last step every rank prints its shards and gradient shards, one
! line per element; tests/byom.c is the same program in C, and make check
! compares the two outputs (tests/fortran.sh).
! The initializer lives in a module: an internal procedure passed to C
! would need a trampoline on an executable stack.
module byom_init
  use, intrinsic :: iso_c_binding
  use fsdp
  implicit none
  integer(fsdp_int64), parameter :: seed = 7
contains
  ! Each parameter uniform in [-0.5, 0.5) from a stream named after it.
  integer(c_int) function init_unit(unit, user) bind(C) result(ierr)
    type(fsdp_flatparam), intent(in) :: unit
    type(c_ptr), value :: user
    integer :: n, p
    character(len=64) :: name
    integer(fsdp_int64), allocatable :: shape(:)
    integer(fsdp_int64) :: numel
    real(c_float), pointer :: v(:)
    if (c_associated(user)) then
      ierr = fsdp_error(FSDP_ERR_USER, 'init_unit takes no user data')
      return
    end if
    call fsdp_flatparam_get_num_params(unit, n, ierr)
    do p = 0, n - 1
      if (ierr == 0) call fsdp_flatparam_get_param_info(unit, p, name, shape, numel, ierr)
      if (ierr == 0) call fsdp_flatparam_get_param(unit, p, v, ierr)
      if (ierr == 0) call fsdp_random_uniform(seed, trim(name), 0_fsdp_int64, -0.5_c_double, 0.5_c_double, v, ierr)
    end do
  end function
end module

program byom
  use, intrinsic :: iso_c_binding
  use fsdp
  use byom_init
  implicit none
#include "fsdpf.h"
  integer, parameter :: nin = 4, hidden = 8, nout = 2, rows = 6
  type(fsdp_context) :: ctx
  type(fsdp_flatparam) :: unit(2)
  type(fsdp_optimizer) :: opt
  integer :: ierr, rank, steps, step, id(4), u
  real(c_float) :: x(nin, rows), target(nout, rows), y(nout, rows), dy(nout, rows)
  real(c_float), target :: a(hidden, rows)
  real(c_float), pointer :: a_flat(:)
  real(c_float) :: da(hidden, rows), buf(nin * rows)
  real(c_float), pointer :: w1(:, :), b1(:), w2(:, :), b2(:), gw1(:, :), gb1(:), gw2(:, :), gb2(:), shard(:), gshard(:)
  integer(fsdp_int64) :: k
  integer :: i, argc
  character(len=32) :: arg
  ! The C library's tanhf, called as C calls it: gfortran's own tanh may run
  ! vectorized (glibc's libmvec), which rounds differently from C's loop.
  interface
    pure real(c_float) function c_tanhf(x) bind(C, name="tanhf")
      import :: c_float
      real(c_float), value :: x
    end function
  end interface

  FSDPCallA(fsdp_initialize(ierr))
  call world_rank(rank)
  steps = 3
  argc = command_argument_count()
  do i = 1, argc - 1
    call get_command_argument(i, arg)
    if (arg == '-steps') then
      call get_command_argument(i + 1, arg)
      read (arg, *) steps
    end if
  end do
  a_flat(1:hidden * rows) => a

  ! This rank's batch: the same numbers at any W for the same rank.
  FSDPCallA(fsdp_random_uniform(seed, 'byom.x', int(rank * nin * rows, fsdp_int64), -1.0_c_double, 1.0_c_double, buf, ierr))
  x = reshape(buf, [nin, rows])
  FSDPCallA(fsdp_random_uniform(seed, 'byom.y', int(rank * nout * rows, fsdp_int64), -1.0_c_double, 1.0_c_double, buf(1:nout * rows), ierr))
  target = reshape(buf(1:nout * rows), [nout, rows])

  FSDPCallA(fsdp_context_create(world(), ctx, ierr))
  FSDPCallA(fsdp_context_set_from_options(ctx, ierr))
  FSDPCallA(fsdp_context_add_unit(ctx, 'layer1', unit(1), ierr))
  FSDPCallA(fsdp_flatparam_add_param(unit(1), 'layer1.weight', [nin, hidden], id(1), ierr))
  FSDPCallA(fsdp_flatparam_add_param(unit(1), 'layer1.bias', [hidden], id(2), ierr))
  FSDPCallA(fsdp_context_add_unit(ctx, 'layer2', unit(2), ierr))
  FSDPCallA(fsdp_flatparam_add_param(unit(2), 'layer2.weight', [hidden, nout], id(3), ierr))
  FSDPCallA(fsdp_flatparam_add_param(unit(2), 'layer2.bias', [nout], id(4), ierr))
  FSDPCallA(fsdp_context_set_unit_init(ctx, init_unit, c_null_ptr, ierr))
  FSDPCallA(fsdp_context_set_up(ctx, ierr))
  FSDPCallA(fsdp_optimizer_create(ctx, opt, ierr))
  FSDPCallA(fsdp_optimizer_set_type(opt, FSDP_OPTIMIZER_ADAMW, ierr))
  FSDPCallA(fsdp_optimizer_set_learning_rate(opt, 1.0e-2_c_double, ierr))
  FSDPCallA(fsdp_optimizer_set_from_options(opt, ierr))
  FSDPCallA(fsdp_optimizer_set_up(opt, ierr))

  do step = 1, steps
    FSDPCallA(fsdp_context_zero_grad(ctx, ierr))
    ! forward
    FSDPCallA(fsdp_context_begin_forward(ctx, ierr))
    FSDPCallA(fsdp_flatparam_unshard(unit(1), ierr))
    FSDPCallA(fsdp_flatparam_get_param(unit(1), id(1), w1, ierr))
    FSDPCallA(fsdp_flatparam_get_param(unit(1), id(2), b1, ierr))
    call linear(w1, b1, x, a)
    do i = 1, hidden * rows
      a_flat(i) = c_tanhf(a_flat(i))
    end do
    FSDPCallA(fsdp_flatparam_reshard(unit(1), ierr))
    FSDPCallA(fsdp_flatparam_unshard(unit(2), ierr))
    FSDPCallA(fsdp_flatparam_get_param(unit(2), id(3), w2, ierr))
    FSDPCallA(fsdp_flatparam_get_param(unit(2), id(4), b2, ierr))
    call linear(w2, b2, a, y)
    ! the loss's gradient: MSE, the mean over this rank's elements
    dy = 2 * (y - target) / real(nout * rows, c_float)
    ! backward
    FSDPCallA(fsdp_context_begin_backward(ctx, ierr))
    FSDPCallA(fsdp_flatparam_get_grad(unit(2), id(3), gw2, ierr))
    FSDPCallA(fsdp_flatparam_get_grad(unit(2), id(4), gb2, ierr))
    call linear_backward(w2, a, dy, gw2, gb2, da)
    FSDPCallA(fsdp_flatparam_reduce_grad(unit(2), ierr))
    da = da * (1 - a * a)
    FSDPCallA(fsdp_flatparam_unshard(unit(1), ierr))
    FSDPCallA(fsdp_flatparam_get_param(unit(1), id(1), w1, ierr))
    FSDPCallA(fsdp_flatparam_get_grad(unit(1), id(1), gw1, ierr))
    FSDPCallA(fsdp_flatparam_get_grad(unit(1), id(2), gb1, ierr))
    call linear_backward(w1, x, da, gw1, gb1)
    FSDPCallA(fsdp_flatparam_reduce_grad(unit(1), ierr))
    FSDPCallA(fsdp_context_finish_backward(ctx, ierr))
    FSDPCallA(fsdp_optimizer_step(opt, ierr))
  end do

  do u = 1, 2
    FSDPCallA(fsdp_flatparam_get_shard(unit(u), shard, ierr))
    FSDPCallA(fsdp_flatparam_get_grad_shard(unit(u), gshard, ierr))
    do k = 1, int(ubound(shard, 1), fsdp_int64)
      write (*, '(a,i0,a,i0,a,i0,1x,es16.9e2,1x,es16.9e2)') 'r', rank, ' u', u, ' p', k - 1, shard(k), gshard(k)
    end do
  end do
  FSDPCallA(fsdp_optimizer_destroy(opt, ierr))
  FSDPCallA(fsdp_context_destroy(ctx, ierr))
  FSDPCallA(fsdp_finalize(ierr))

contains

  ! y(o, s) = sum_i w(i, o) x(i, s) + b(o), summed in i's order (as C's loop).
  subroutine linear(w, b, x, y)
    real(c_float), intent(in) :: w(:, :), b(:), x(:, :)
    real(c_float), intent(out) :: y(:, :)
    integer :: i, o, s
    real(c_float) :: acc
    do s = 1, size(x, 2)
      do o = 1, size(w, 2)
        acc = 0
        do i = 1, size(w, 1)
          acc = acc + w(i, o) * x(i, s)
        end do
        y(o, s) = acc + b(o)
      end do
    end do
  end subroutine

  ! Adds the weight's and bias's gradients; dx (when wanted) is w dy.
  subroutine linear_backward(w, x, dy, gw, gb, dx)
    real(c_float), intent(in) :: w(:, :), x(:, :), dy(:, :)
    real(c_float), intent(inout) :: gw(:, :), gb(:)
    real(c_float), intent(out), optional :: dx(:, :)
    integer :: i, o, s
    real(c_float) :: acc
    do o = 1, size(w, 2)
      do i = 1, size(w, 1)
        acc = 0
        do s = 1, size(x, 2)
          acc = acc + x(i, s) * dy(o, s)
        end do
        gw(i, o) = gw(i, o) + acc
      end do
      acc = 0
      do s = 1, size(x, 2)
        acc = acc + dy(o, s)
      end do
      gb(o) = gb(o) + acc
    end do
    if (present(dx)) then
      do s = 1, size(x, 2)
        do i = 1, size(w, 1)
          acc = 0
          do o = 1, size(w, 2)
            acc = acc + w(i, o) * dy(o, s)
          end do
          dx(i, s) = acc
        end do
      end do
    end if
  end subroutine

  integer function world()
    use mpi, only: MPI_COMM_WORLD
    world = MPI_COMM_WORLD
  end function

  subroutine world_rank(rank)
    use mpi, only: MPI_COMM_WORLD, MPI_Comm_rank
    integer, intent(out) :: rank
    integer :: ierr
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  end subroutine
end program
