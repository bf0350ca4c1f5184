! A Fortran program built as users build their debug runs, with
! -ffpe-trap=invalid,zero,overflow (Makefile.am; other compilers: the
! program turns halting on itself): training steps of a model, a checkpoint
! saved and loaded, and calls that return errors all end normally, no
! SIGFPE inside libfsdp or what it calls (hwloc's libxml2 computes 0/0 as
! it starts; MPI, HDF5 and OpenBLAS start up too), and after each call no
! IEEE flag but inexact is signalling (gfortran's STOP would report them).
! mpitest: -n 1
! mpitest: -n 2
program test_fortran_fpe
  use, intrinsic :: iso_c_binding
  use, intrinsic :: ieee_exceptions
  use mpi_f08
  use fsdp
  implicit none
  type(ieee_flag_type), parameter :: checked(4) = [ieee_invalid, ieee_divide_by_zero, ieee_overflow, ieee_underflow]
  character(len=*), parameter :: names(4) = [character(len=14) :: 'invalid', 'divide_by_zero', 'overflow', &
                                             'underflow']
  type(fsdp_context) :: ctx
  type(fsdp_model) :: model
  type(fsdp_optimizer) :: opt
  type(fsdp_flatparam) :: unit
  type(fsdp_plan) :: plan
  character(len=512) :: plan_line
  real(c_float) :: x(9, 16), t(1, 16)
  real(c_double) :: loss
  character(len=256) :: dir, path, missing
  integer(c_int64_t) :: stamp
  integer :: ierr, step, rank, failures, n, u
  logical :: halting

  failures = 0
  ! gfortran's -ffpe-trap turned halting on before the program started;
  ! elsewhere the program does it (before MPI and libfsdp start, as there).
  do u = 1, 3
    call ieee_get_halting_mode(checked(u), halting)
    if (.not. halting) call ieee_set_halting_mode(checked(u), .true.)
  end do
  call ieee_set_flag(ieee_all, .false.)

  call fsdp_initialize(ierr)
  call expect(ierr == 0, 'fsdp_initialize')
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call get_environment_variable('TMPDIR', dir, n)
  if (n == 0) dir = '/tmp'
  if (rank == 0) call system_clock(stamp)
  call MPI_Bcast(stamp, 1, MPI_INTEGER8, 0, MPI_COMM_WORLD)
  write (path, '(a,a,i0,a)') trim(dir), '/fsdp-test-fortran-fpe-', stamp, '.h5'
  write (missing, '(a,a,i0,a)') trim(dir), '/fsdp-test-fortran-fpe-', stamp, '-missing.h5'

  call fsdp_context_create(MPI_COMM_WORLD, ctx, ierr)
  call expect(ierr == 0, 'fsdp_context_create')
  call fsdp_context_set_from_options(ctx, ierr)
  call expect(ierr == 0, 'fsdp_context_set_from_options')
  call fsdp_model_create(ctx, 'mlp:in=9,hidden=32,depth=2,out=1,act=tanh', model, ierr)
  call expect(ierr == 0, 'fsdp_model_create')
  ! The context's set-up: hwloc discovers this machine and exports it as XML (libxml2).
  call fsdp_model_set_up(model, ierr)
  call expect(ierr == 0, 'fsdp_model_set_up')
  call fsdp_optimizer_create(ctx, opt, ierr)
  call expect(ierr == 0, 'fsdp_optimizer_create')
  call fsdp_optimizer_set_learning_rate(opt, 3d-3, ierr)
  call expect(ierr == 0, 'fsdp_optimizer_set_learning_rate')
  call fsdp_optimizer_set_up(opt, ierr)
  call expect(ierr == 0, 'fsdp_optimizer_set_up')
  do step = 1, 5
    call make_batch(x, t, step + 10 * rank)
    call fsdp_model_train_step(model, opt, x, t, loss, ierr)
    call expect(ierr == 0, 'fsdp_model_train_step')
  end do
  call fsdp_context_save(ctx, opt, path, ierr)
  call expect(ierr == 0, 'fsdp_context_save')
  call fsdp_context_load(ctx, opt, path, ierr)
  call expect(ierr == 0, 'fsdp_context_load')

  ! The planner: its probe (GEMMs, ping-pongs) and predictions, and a budget nothing fits.
  call fsdp_plan_create(MPI_COMM_WORLD, plan, ierr)
  call expect(ierr == 0, 'fsdp_plan_create')
  call fsdp_plan_set_model(plan, 'gpt:vocab=16,ctx=8,dim=16,heads=2,layers=2', ierr)
  call fsdp_plan_set_batch(plan, 8_c_int64_t, ierr)
  call fsdp_plan_probe(plan, ierr)
  call expect(ierr == 0, 'fsdp_plan_probe')
  call fsdp_plan_set_up(plan, ierr)
  call expect(ierr == 0, 'fsdp_plan_set_up')
  call fsdp_plan_get_choice(plan, n, plan_line, ierr)
  call expect(ierr == 0 .and. n == 0, 'fsdp_plan_get_choice')
  call fsdp_plan_set_memory_budget(plan, 1_c_int64_t, ierr)
  call fsdp_plan_set_up(plan, ierr)
  call fsdp_plan_get_choice(plan, n, plan_line, ierr)
  call expect(ierr == FSDP_ERR_MEM, 'fsdp_plan_get_choice within 1 byte (an error)')
  call fsdp_plan_destroy(plan, ierr)
  call expect(ierr == 0, 'fsdp_plan_destroy')

  ! Errors: each returns its code, prints its message, and the program goes on.
  call fsdp_context_load(ctx, opt, missing, ierr)
  call expect(ierr /= 0, 'fsdp_context_load of a missing file (an error)')
  call fsdp_context_get_unit(ctx, 0, unit, ierr)
  call expect(ierr == FSDP_ERR_ARG, 'fsdp_context_get_unit(ctx, 0) (an error)')

  call fsdp_optimizer_destroy(opt, ierr)
  call expect(ierr == 0, 'fsdp_optimizer_destroy')
  call fsdp_model_destroy(model, ierr)
  call expect(ierr == 0, 'fsdp_model_destroy')
  call fsdp_context_destroy(ctx, ierr)
  call expect(ierr == 0, 'fsdp_context_destroy')
  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    open (newunit=u, file=path, status='old', iostat=ierr)
    if (ierr == 0) close (u, status='delete')
  end if
  call fsdp_finalize(ierr)
  call expect(ierr == 0, 'fsdp_finalize')
  if (failures > 0) then
    write (*, '(i0,a)') failures, ' checks failed'
    error stop 1
  end if
  if (rank == 0) write (*, '(a)') 'test_fortran_fpe: all passed'

contains

  ! The call's outcome, and no IEEE flag but inexact left signalling by it.
  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    logical :: raised
    integer :: i
    if (.not. ok) then
      failures = failures + 1
      write (*, '(a,a)') 'FAIL: ', what
    end if
    do i = 1, size(checked)
      call ieee_get_flag(checked(i), raised)
      if (raised) then
        failures = failures + 1
        write (*, '(a,a,a,a)') 'FAIL: ', what, ' left the IEEE flag signalling: ', trim(names(i))
      end if
    end do
    call ieee_set_flag(ieee_all, .false.)
  end subroutine

  subroutine make_batch(x, t, seed)
    real(c_float), intent(out) :: x(:, :), t(:, :)
    integer, intent(in) :: seed
    integer :: i, j
    do j = 1, size(x, 2)
      do i = 1, size(x, 1)
        x(i, j) = real(mod(seed * 7 + i * 13 + j * 31, 97), c_float) / 97 - 0.5
      end do
    end do
    t(1, :) = sum(x, dim=1) / size(x, 1)
  end subroutine
end program
