! In-situ surrogate training from Fortran: examples/heat-surrogate.c, line for
! line, through the fsdp module.  A 1-D reaction-diffusion solver (Fisher-KPP,
! u_t = kappa u_xx + rho u (1 - u), periodic), domain-decomposed over the MPI
! ranks with halo exchange, produces training pairs as it runs and trains an
! MLP to jump LEAP solver steps at once: from the 9-point window
! u^n(i-4 .. i+4) to u^{n+LEAP}(i) - u^n(i).  Parameters, gradients and AdamW
! state are sharded over all ranks.  The same options give the same output
! as the C example, digit for digit (tests/fortran.sh checks it).
!
! Checkpoint and restart: with -checkpoint FILE the job saves a sharded
! checkpoint every -checkpoint_every rounds (10 by default); with -restart as
! well it resumes from FILE when FILE exists, at any number of ranks.
!   mpiexec -n 4 heat_surrogate [-rounds R] [-points P] [-verbose] [-checkpoint FILE [-restart]] [-fsdp_* options]
! -verbose prints every round's loss with 17 digits, as the C example does.
module heat_solver
  use, intrinsic :: iso_c_binding
  use mpi
  use fsdp
  implicit none
  private
  public :: solver, LEAP, WINDOW, SNAPSHOTS, initial_condition, sample
  integer, parameter :: dp = c_double
  integer, parameter :: LEAP = 4, WINDOW = 2 * LEAP + 1, SNAPSHOTS = 8
  real(dp), parameter :: R_DIFF = 0.25_dp ! kappa dt / dx^2: explicit Euler is stable up to 0.5
  real(dp), parameter :: RHO_DT = 0.05_dp ! rho dt
  real(dp), parameter :: PI = 3.14159265358979323846_dp
  type :: solver
    integer :: comm, rank, size, left, right
    integer :: n ! points owned by this rank
    real(dp), allocatable :: u(:) ! u(1-LEAP : n+LEAP): LEAP halo cells on each side
  end type
  ! The C library's sin, as the C example calls it: gfortran may vectorize its
  ! own sin through glibc's libmvec, which rounds differently.
  interface
    pure real(c_double) function c_sin(x) bind(C, name="sin")
      import :: c_double
      real(c_double), value :: x
    end function
  end interface
contains
  ! Periodic halo exchange of `width` cells with both neighbours.
  subroutine exchange(s, width)
    type(solver), intent(inout) :: s
    integer, intent(in) :: width
    integer :: ierr
    call MPI_Sendrecv(s%u(1), width, MPI_DOUBLE_PRECISION, s%left, 0, s%u(s%n + 1), width, MPI_DOUBLE_PRECISION, &
                      s%right, 0, s%comm, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(s%u(s%n - width + 1), width, MPI_DOUBLE_PRECISION, s%right, 1, s%u(1 - width), width, &
                      MPI_DOUBLE_PRECISION, s%left, 1, s%comm, MPI_STATUS_IGNORE, ierr)
  end subroutine

  subroutine step(s, tmp)
    type(solver), intent(inout) :: s
    real(dp), intent(out) :: tmp(:)
    integer :: i
    call exchange(s, 1)
    do i = 1, s%n
      tmp(i) = s%u(i) + R_DIFF * (s%u(i + 1) - 2 * s%u(i) + s%u(i - 1)) + RHO_DT * s%u(i) * (1 - s%u(i))
    end do
    s%u(1:s%n) = tmp(1:s%n)
  end subroutine

  ! A smooth random profile in [0, 1]: a few sine modes of random phase, from
  ! libfsdp's counter-based generator (the same at any W).
  subroutine initial_condition(s, seed)
    type(solver), intent(inout) :: s
    integer(fsdp_int64), intent(in) :: seed
    real(c_float) :: c(6)
    real(dp) :: x, v
    integer :: i, k, global_n, ierr
    global_n = s%n * s%size
    call fsdp_random_uniform(seed, 'heat.ic', 0_fsdp_int64, 0.0_dp, 1.0_dp, c, ierr)
    call fsdp_abort_on_error(ierr)
    do i = 1, s%n
      x = real(s%rank * s%n + i - 1, dp) / global_n
      v = 0.5_dp
      do k = 0, 2
        v = v + 0.25_dp * (c(2 * k + 1) - 0.3_dp) * c_sin(2 * PI * (k + 1) * x + 2 * PI * c(2 * k + 2))
      end do
      s%u(i) = max(0.0_dp, min(1.0_dp, v))
    end do
  end subroutine

  ! Inputs (windows around every owned point) now, targets LEAP steps later.
  subroutine sample(s, tmp, x, y)
    type(solver), intent(inout) :: s
    real(dp), intent(out) :: tmp(:)
    real(c_float), intent(out) :: x(:, :), y(:)
    integer :: i, k, t
    call exchange(s, LEAP)
    do i = 1, s%n
      do k = 0, WINDOW - 1
        x(k + 1, i) = real(s%u(i - LEAP + k), c_float)
      end do
    end do
    do t = 1, LEAP
      call step(s, tmp)
    end do
    do i = 1, s%n
      y(i) = real(s%u(i) - x(LEAP + 1, i), c_float)
    end do
  end subroutine
end module

program heat_surrogate
  use, intrinsic :: iso_c_binding
  use mpi
  use fsdp
  use heat_solver
  implicit none
#include "fsdpf.h"
  integer, parameter :: dp = c_double
  type(solver) :: s
  type(fsdp_context) :: ctx
  type(fsdp_model) :: model
  type(fsdp_optimizer) :: opt
  type(fsdp_training_state) :: state
  integer :: rounds = 40, points = 64, every = 10, first_round = 0, r, k, i, ierr, mpierr
  character(len=1024) :: checkpoint = ''
  logical :: restart = .false., exists, verbose = .false.
  real(dp) :: err(2), loss(1), l ! loss: an array, as err, for MPI_Allreduce's implicit interface
  real(dp), allocatable :: tmp(:)
  real(c_float), allocatable :: x(:, :), y(:), y10(:, :)
  real(c_float), pointer :: pred(:, :), dy(:, :)

  FSDPCallA(fsdp_initialize(ierr))
  call read_arguments()
  s%comm = MPI_COMM_WORLD
  call MPI_Comm_rank(s%comm, s%rank, mpierr)
  call MPI_Comm_size(s%comm, s%size, mpierr)
  s%left = modulo(s%rank - 1, s%size)
  s%right = modulo(s%rank + 1, s%size)
  s%n = points
  if (rounds < 1 .or. points < LEAP .or. every < 1) then
    if (s%rank == 0) write (0, '(a,i0)') 'heat_surrogate: -rounds and -checkpoint_every must be >= 1 and -points >= ', LEAP
    call MPI_Abort(MPI_COMM_WORLD, 2, mpierr)
  end if
  allocate (s%u(1 - LEAP:points + LEAP), tmp(points), x(WINDOW, points), y(points), y10(1, points))
  s%u = 0

  ! The surrogate: parameters, gradients and optimizer state sharded over all ranks.
  FSDPCallA(fsdp_context_create(s%comm, ctx, ierr))
  FSDPCallA(fsdp_context_set_from_options(ctx, ierr))
  FSDPCallA(fsdp_model_create(ctx, 'mlp:in=9,hidden=32,depth=2,out=1,act=tanh', model, ierr))
  FSDPCallA(fsdp_model_set_from_options(model, ierr))
  FSDPCallA(fsdp_model_set_up(model, ierr))
  FSDPCallA(fsdp_optimizer_create(ctx, opt, ierr))
  FSDPCallA(fsdp_optimizer_set_learning_rate(opt, 3e-3_dp, ierr))
  FSDPCallA(fsdp_optimizer_set_weight_decay(opt, 0.0_dp, ierr))
  FSDPCallA(fsdp_optimizer_set_from_options(opt, ierr))
  FSDPCallA(fsdp_optimizer_set_up(opt, ierr))

  ! A restart continues after the last round the checkpoint holds.
  if (restart .and. len_trim(checkpoint) > 0) then
    ! Rank 0 looks, every rank follows: loading is collective.
    if (s%rank == 0) inquire (file=trim(checkpoint), exist=exists)
    call MPI_Bcast(exists, 1, MPI_LOGICAL, 0, s%comm, mpierr)
    if (exists) then
      FSDPCallA(fsdp_context_load(ctx, opt, trim(checkpoint), ierr))
      FSDPCallA(fsdp_context_get_training_state(ctx, state, ierr))
      first_round = int(state%data_cursor)
      if (s%rank == 0) write (*, '(a,a,a,i0)') 'restarted from ', trim(checkpoint), ' after round ', first_round
    end if
  end if

  ! Training: every round a new initial condition; every snapshot one step on
  ! the pairs it produced.  Targets are scaled to order one.
  loss = 0
  do r = first_round, rounds - 1
    call initial_condition(s, int(r, fsdp_int64))
    do k = 1, SNAPSHOTS
      call sample(s, tmp, x, y)
      y10(1, :) = 10.0_c_float * y
      FSDPCallA(fsdp_model_train_step(model, opt, x, y10, l, ierr))
      loss(1) = l
    end do
    call MPI_Allreduce(MPI_IN_PLACE, loss, 1, MPI_DOUBLE_PRECISION, MPI_SUM, s%comm, mpierr)
    if (s%rank == 0 .and. verbose) write (*, '(a,i0,a,a)') 'round ', r + 1, ' loss ', e(loss(1) / s%size, 17)
    if (s%rank == 0 .and. mod(r + 1, 10) == 0) &
      write (*, '(a,i3,a,i0,a,a)') 'round ', r + 1, '/', rounds, '  training loss ', e(loss(1) / s%size, 4)
    if (len_trim(checkpoint) > 0 .and. mod(r + 1, every) == 0) then
      state%data_cursor = r + 1 ! rounds done
      FSDPCallA(fsdp_context_set_training_state(ctx, state, ierr))
      FSDPCallA(fsdp_context_save(ctx, opt, trim(checkpoint), ierr))
    end if
  end do

  ! Evaluation on an initial condition never trained on.
  err = 0
  call initial_condition(s, 1000003_fsdp_int64)
  do k = 1, SNAPSHOTS
    call sample(s, tmp, x, y)
    y10(1, :) = 10.0_c_float * y
    FSDPCallA(fsdp_model_forward(model, x, pred, ierr))
    FSDPCallA(fsdp_model_loss(model, y10, 1.0_dp, l, dy, ierr))
    err(1) = err(1) + l * points / 100.0_dp ! surrogate: the sum of (pred/10 - y)^2
    do i = 1, points
      err(2) = err(2) + real(y(i), dp) * y(i) ! persistence: no change
    end do
  end do
  call MPI_Allreduce(MPI_IN_PLACE, err, 2, MPI_DOUBLE_PRECISION, MPI_SUM, s%comm, mpierr)
  if (s%rank == 0) write (*, '(a,a,a,a,a,i0,a,i0,a,i0,a)') 'surrogate error ', &
    e(sqrt(err(1) / (points * s%size * SNAPSHOTS)), 4), ', persistence error ', &
    e(sqrt(err(2) / (points * s%size * SNAPSHOTS)), 4), ' (RMS over ', points * s%size, ' points x ', SNAPSHOTS, &
    ' snapshots, ', s%size, ' ranks)'
  FSDPCallA(fsdp_optimizer_destroy(opt, ierr))
  FSDPCallA(fsdp_model_destroy(model, ierr))
  FSDPCallA(fsdp_context_destroy(ctx, ierr))
  FSDPCallA(fsdp_finalize(ierr))

contains

  subroutine read_arguments()
    character(len=1024) :: arg, value
    integer :: i, n
    n = command_argument_count()
    i = 1
    do while (i <= n)
      call get_command_argument(i, arg)
      value = ''
      if (i < n) call get_command_argument(i + 1, value)
      select case (arg)
      case ('-rounds')
        read (value, *) rounds
        i = i + 1
      case ('-points')
        read (value, *) points
        i = i + 1
      case ('-checkpoint_every')
        read (value, *) every
        i = i + 1
      case ('-checkpoint')
        checkpoint = value
        i = i + 1
      case ('-restart')
        restart = .true.
      case ('-verbose')
        verbose = .true.
      end select
      i = i + 1
    end do
  end subroutine

  ! x as C's printf("%.<digits>e") writes it.
  function e(x, digits) result(str)
    real(dp), intent(in) :: x
    integer, intent(in) :: digits
    character(len=:), allocatable :: str
    character(len=40) :: buf, fmt
    integer :: j
    write (fmt, '(a,i0,a,i0,a)') '(es', digits + 7, '.', digits, 'e2)'
    write (buf, fmt) x
    str = trim(adjustl(buf))
    j = index(str, 'E')
    if (j > 0) str(j:j) = 'e'
  end function
end program
