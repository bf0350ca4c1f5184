! A convolutional surrogate trained in situ, from Fortran: examples/advection-surrogate.c,
! line for line, through the fsdp module (TorchFort's distributed example
! with libfsdp underneath).  A 2-D periodic advection solver (upwind,
! u_t + a u_x + b u_y = 0) on an N x N grid is decomposed by rows over the
! ranks; every W solver steps an all-to-all gives each rank one whole
! snapshot pair (u^n, u^{n+1}), and the ranks train a circular 3x3
! convolution (cnn:grid=NxN,in=1,out=1,padding=circular) on that batch, its
! state sharded by libfsdp.  Then, from an unseen initial condition, the
! surrogate runs in place of the solver, and its drift from the solver is
! printed as it goes.  A field u(x, y) is u(N, N) here, C's u[y][x]:
! the model's sample x(N * N) is either.  The same options give the C
! example's output digit for digit (tests/fortran.sh checks it).
!   mpiexec -n 4 advection_surrogate [-rounds R] [-grid N] [-fsdp_* options]
module advection_solver
  use, intrinsic :: iso_c_binding
  use mpi
  use fsdp
  implicit none
  private
  public :: solver, BATCHES, ROLLOUT, initial_condition, batch, step
  integer, parameter :: dp = c_double
  integer, parameter :: BATCHES = 4 ! training steps per initial condition
  integer, parameter :: ROLLOUT = 20 ! surrogate steps in place of the solver
  real(dp), parameter :: COURANT_X = 0.4_dp, COURANT_Y = 0.3_dp
  real(dp), parameter :: PI = 3.14159265358979323846_dp
  type :: solver
    integer :: comm, rank, size, up, down
    integer :: n, rows ! the grid's side, and the rows this rank owns
    real(dp), allocatable :: u(:, :) ! u(n, 0:rows): column 0 the halo row (the row above), then the owned rows
  end type
  ! The C library's sin, as the C example calls it (gfortran's may vectorize through libmvec).
  interface
    pure real(c_double) function c_sin(x) bind(C, name="sin")
      import :: c_double
      real(c_double), value :: x
    end function
  end interface
contains
  ! One upwind step: each point looks left and up, the row above from the neighbour.
  subroutine step(s, next)
    type(solver), intent(inout) :: s
    real(dp), intent(out) :: next(:, :)
    real(dp) :: c, left, above
    integer :: i, j, ierr
    call MPI_Sendrecv(s%u(:, s%rows), s%n, MPI_DOUBLE_PRECISION, s%down, 0, s%u(:, 0), s%n, MPI_DOUBLE_PRECISION, &
                      s%up, 0, s%comm, MPI_STATUS_IGNORE, ierr)
    do i = 1, s%rows
      do j = 1, s%n
        c = s%u(j, i)
        left = s%u(modulo(j - 2, s%n) + 1, i)
        above = s%u(j, i - 1)
        next(j, i) = c - COURANT_X * (c - left) - COURANT_Y * (c - above)
      end do
    end do
    s%u(:, 1:s%rows) = next
  end subroutine

  ! A smooth random field: a few Fourier modes of random amplitude and phase
  ! (libfsdp's counter-based generator: the same field at any W).
  subroutine initial_condition(s, seed)
    type(solver), intent(inout) :: s
    integer(fsdp_int64), intent(in) :: seed
    real(c_float) :: c(12)
    real(dp) :: x, y, v
    integer :: i, j, k, ierr
    call fsdp_random_uniform(seed, 'advection.ic', 0_fsdp_int64, 0.0_dp, 1.0_dp, c, ierr)
    call fsdp_abort_on_error(ierr)
    do i = 1, s%rows
      do j = 1, s%n
        y = real(s%rank * s%rows + i - 1, dp) / s%n
        x = real(j - 1, dp) / s%n
        v = 0
        do k = 0, 3
          v = v + (c(3 * k + 1) - 0.5_dp) * c_sin(2 * PI * ((mod(k, 2) + 1) * x + (k / 2 + 1) * y) + &
                                                  2 * PI * c(3 * k + 2)) / (1.0_dp + c(3 * k + 3))
        end do
        s%u(j, i) = v
      end do
    end do
  end subroutine

  ! W solver steps; snapshot pair k (this rank's slab of u^k and u^{k+1})
  ! goes to rank k: x and y are this rank's whole fields.
  subroutine batch(s, next, send, recv, x, y)
    type(solver), intent(inout) :: s
    real(dp), intent(out) :: next(:, :)
    real(c_float), intent(out) :: send(:, :, :, :), recv(:, :, :, :) ! (n, rows, 2, W): slab, u^k or u^{k+1}, rank
    real(c_float), intent(out) :: x(:, :), y(:, :)                   ! (n, n)
    integer :: k, r, ierr
    do k = 1, s%size
      send(:, :, 1, k) = real(s%u(:, 1:s%rows), c_float)
      call step(s, next)
      send(:, :, 2, k) = real(s%u(:, 1:s%rows), c_float)
    end do
    call MPI_Alltoall(send, 2 * s%n * s%rows, MPI_REAL, recv, 2 * s%n * s%rows, MPI_REAL, s%comm, ierr)
    do r = 1, s%size ! rank r - 1's slab is rows (r - 1) rows + 1 .. r rows
      x(:, (r - 1) * s%rows + 1:r * s%rows) = recv(:, :, 1, r)
      y(:, (r - 1) * s%rows + 1:r * s%rows) = recv(:, :, 2, r)
    end do
  end subroutine
end module

program advection_surrogate
  use, intrinsic :: iso_c_binding
  use mpi
  use fsdp
  use advection_solver
  implicit none
#include "fsdpf.h"
  integer, parameter :: dp = c_double
  type(solver) :: s
  type(fsdp_context) :: ctx
  type(fsdp_model) :: model
  type(fsdp_optimizer) :: opt
  integer :: rounds = 30, n = 32, r, b, i, j, ierr, mpierr
  character(len=96) :: spec
  real(dp) :: err(2), loss(1), l ! arrays, for MPI_Allreduce's implicit interface
  real(dp), allocatable :: next(:, :)
  real(c_float), allocatable, target :: send(:, :, :, :), recv(:, :, :, :), x(:, :), y(:, :), field(:, :)
  real(c_float), pointer :: x1(:, :), y1(:, :), pred(:, :), dy(:, :)

  FSDPCallA(fsdp_initialize(ierr))
  call read_arguments()
  s%comm = MPI_COMM_WORLD
  call MPI_Comm_rank(s%comm, s%rank, mpierr)
  call MPI_Comm_size(s%comm, s%size, mpierr)
  if (rounds < 1 .or. n < 3 .or. mod(n, s%size) /= 0) then ! every rank sees it: all stop, none aborts the others
    if (s%rank == 0) write (0, '(a,i0,a,i0,a,i0,a)') 'advection_surrogate: -rounds ', rounds, &
      ' must be >= 1, and -grid ', n, ' >= 3 a multiple of the ', s%size, ' ranks'
    FSDPCallA(fsdp_finalize(ierr))
    stop 2
  end if
  s%n = n
  s%rows = n / s%size
  s%up = modulo(s%rank - 1, s%size)
  s%down = modulo(s%rank + 1, s%size)
  allocate (s%u(n, 0:s%rows), next(n, s%rows), send(n, s%rows, 2, s%size), recv(n, s%rows, 2, s%size), x(n, n), &
            y(n, n), field(n, n))
  s%u = 0
  ! The model's view of a field: one sample of n * n values, x(n * n, 1), the same memory.
  call c_f_pointer(c_loc(x), x1, [n * n, 1])
  call c_f_pointer(c_loc(y), y1, [n * n, 1])

  ! TorchFort's surrogate: Conv2d(1, 1, 3, padding=1, padding_mode="circular").
  write (spec, '(a,i0,a,i0,a)') 'cnn:grid=', n, 'x', n, ',in=1,out=1,padding=circular'
  FSDPCallA(fsdp_context_create(s%comm, ctx, ierr))
  FSDPCallA(fsdp_context_set_from_options(ctx, ierr))
  FSDPCallA(fsdp_model_create(ctx, trim(spec), model, ierr))
  FSDPCallA(fsdp_model_set_from_options(model, ierr))
  FSDPCallA(fsdp_model_set_up(model, ierr))
  FSDPCallA(fsdp_optimizer_create(ctx, opt, ierr))
  FSDPCallA(fsdp_optimizer_set_learning_rate(opt, 3e-2_dp, ierr))
  FSDPCallA(fsdp_optimizer_set_weight_decay(opt, 0.0_dp, ierr))
  FSDPCallA(fsdp_optimizer_set_from_options(opt, ierr))
  FSDPCallA(fsdp_optimizer_set_up(opt, ierr))

  ! Training: a new initial condition every round, BATCHES steps on the fields it produces.
  loss = 0
  do r = 0, rounds - 1
    call initial_condition(s, int(r, fsdp_int64))
    do b = 1, BATCHES
      call batch(s, next, send, recv, x, y)
      FSDPCallA(fsdp_model_train_step(model, opt, x1, y1, l, ierr))
      loss(1) = l
    end do
    call MPI_Allreduce(MPI_IN_PLACE, loss, 1, MPI_DOUBLE_PRECISION, MPI_SUM, s%comm, mpierr)
    if (s%rank == 0 .and. mod(r + 1, 10) == 0) &
      write (*, '(a,i3,a,i0,a,a)') 'round ', r + 1, '/', rounds, '  training loss ', e(loss(1) / s%size, 4)
  end do

  ! Evaluation on an initial condition never trained on: the mean squared error of a step.
  err = 0
  call initial_condition(s, 1000003_fsdp_int64)
  do b = 1, BATCHES
    call batch(s, next, send, recv, x, y)
    FSDPCallA(fsdp_model_forward(model, x1, pred, ierr))
    FSDPCallA(fsdp_model_loss(model, y1, 1.0_dp, l, dy, ierr))
    err(1) = err(1) + l
    do i = 1, n
      do j = 1, n
        err(2) = err(2) + (real(y(j, i), dp) - x(j, i)) * (real(y(j, i), dp) - x(j, i)) / (n * n)
      end do
    end do
  end do
  call MPI_Allreduce(MPI_IN_PLACE, err, 2, MPI_DOUBLE_PRECISION, MPI_SUM, s%comm, mpierr)
  if (s%rank == 0) write (*, '(a,a,a,a,a,i0,a,i0,a,i0,a,i0,a)') 'surrogate error ', &
    e(sqrt(err(1) / (BATCHES * s%size)), 4), ', persistence error ', e(sqrt(err(2) / (BATCHES * s%size)), 4), &
    ' (RMS over ', n, 'x', n, ' fields x ', BATCHES * s%size, ' steps, ', s%size, ' ranks)'
  call initial_condition(s, 1000033_fsdp_int64)
  call run_surrogate()
  FSDPCallA(fsdp_optimizer_destroy(opt, ierr))
  FSDPCallA(fsdp_model_destroy(model, ierr))
  FSDPCallA(fsdp_context_destroy(ctx, ierr))
  FSDPCallA(fsdp_finalize(ierr))

contains

  ! The surrogate in place of the solver: every rank gathers the whole field
  ! (the model's forward is collective, so each rank runs it, here all on the
  ! same field) and steps it with the model while the solver steps alongside;
  ! at some steps, the RMS difference from the solver, and from the starting
  ! field (persistence).  x holds the start.
  subroutine run_surrogate()
    real(c_float), pointer :: f1(:, :)
    real(dp) :: u
    integer :: t, row
    x(:, 1:s%rows) = real(s%u(:, 1:s%rows), c_float) ! this rank's slab, sent from x's first rows
    call MPI_Allgather(x, n * s%rows, MPI_REAL, field, n * s%rows, MPI_REAL, s%comm, mpierr)
    x = field
    call c_f_pointer(c_loc(field), f1, [n * n, 1])
    do t = 1, ROLLOUT
      FSDPCallA(fsdp_model_forward(model, f1, pred, ierr))
      f1 = pred
      call step(s, next)
      err = 0
      do i = 1, s%rows ! this rank's rows of the fields
        row = s%rank * s%rows + i
        do j = 1, n
          u = s%u(j, i)
          err(1) = err(1) + (field(j, row) - u) * (field(j, row) - u)
          err(2) = err(2) + (x(j, row) - u) * (x(j, row) - u)
        end do
      end do
      call MPI_Allreduce(MPI_IN_PLACE, err, 2, MPI_DOUBLE_PRECISION, MPI_SUM, s%comm, mpierr)
      if (s%rank == 0 .and. (t == 1 .or. mod(t, 5) == 0)) write (*, '(a,i2,a,a,a,a)') 'rollout step ', t, &
        ': surrogate error ', e(sqrt(err(1) / (n * n)), 4), ', persistence error ', e(sqrt(err(2) / (n * n)), 4)
    end do
  end subroutine

  subroutine read_arguments()
    character(len=1024) :: arg, value
    integer :: i, m
    m = command_argument_count()
    i = 1
    do while (i <= m)
      call get_command_argument(i, arg)
      value = ''
      if (i < m) call get_command_argument(i + 1, value)
      select case (arg)
      case ('-rounds')
        read (value, *) rounds
        i = i + 1
      case ('-grid')
        read (value, *) n
        i = i + 1
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
    integer :: k
    write (fmt, '(a,i0,a,i0,a)') '(es', digits + 7, '.', digits, 'e2)'
    write (buf, fmt) x
    str = trim(adjustl(buf))
    k = index(str, 'E')
    if (k > 0) str(k:k) = 'e'
  end function
end program
