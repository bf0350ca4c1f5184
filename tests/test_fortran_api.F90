! The Fortran module against C: its constants equal the C enums; every
! element of a Fortran view of a 1-, 2- and 4-D parameter (and a scalar), and
! of its gradient view, is the C element it maps to (transposed shapes);
! gradients reduce into the shard where get_shard_range says; bad arguments
! return the right ierr with a message Fortran can read, and abort nothing;
! both communicator forms (use mpi's integers and mpi_f08's type(MPI_Comm))
! give the context and shard group their communicators; options and the
! training state cross the interface; the wait mode, a program's own request
! waited for by the context (both handle forms), and the SIMD path.
! mpitest: -n 2
! mpitest: -n 3
module fortran_peek
  use, intrinsic :: iso_c_binding
  use fsdp
  implicit none
  interface
    integer(c_int) function fsdpt_enum(name) bind(C)
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_size_t) function fsdpt_plan_candidate_size() bind(C)
      import :: c_size_t
    end function
    real(c_float) function fsdpt_param_element(unit, id, index) bind(C)
      import :: c_float, c_int, c_int64_t, fsdp_flatparam
      type(fsdp_flatparam), intent(in) :: unit
      integer(c_int), value :: id
      integer(c_int64_t), intent(in) :: index(*)
    end function
    real(c_float) function fsdpt_grad_element(unit, id, index) bind(C)
      import :: c_float, c_int, c_int64_t, fsdp_flatparam
      type(fsdp_flatparam), intent(in) :: unit
      integer(c_int), value :: id
      integer(c_int64_t), intent(in) :: index(*)
    end function
  end interface
  integer :: failures = 0
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      write (*, '(a,a)') 'FAIL: ', what
    end if
  end subroutine

  subroutine ok(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    call check(ierr == FSDP_SUCCESS, what//' returned an error')
  end subroutine

  subroutine check_enum(name, value)
    character(len=*), intent(in) :: name
    integer, intent(in) :: value
    call check(fsdpt_enum(name//c_null_char) == value, 'the Fortran value of '//name//' is not C''s')
  end subroutine

  ! Parameter id: the value a C row-major flat index k gets from the initializer.
  pure real(c_float) function init_value(id, k)
    integer, intent(in) :: id
    integer(c_int64_t), intent(in) :: k
    init_value = real(1000 * (id + 1) + k, c_float)
  end function

  ! Fills elements [first, last) of parameter id, flattened as C does.
  integer(c_int) function shard_init(unit, id, first, last, values, user) bind(C) result(ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer(c_int), value :: id
    integer(c_int64_t), value :: first, last
    type(c_ptr), value :: values, user
    real(c_float), pointer :: v(:)
    integer(c_int64_t) :: k
    ierr = FSDP_SUCCESS
    if (.not. c_associated(unit%ptr) .or. c_associated(user)) ierr = fsdp_error(FSDP_ERR_USER, 'bad arguments')
    call c_f_pointer(values, v, [last - first])
    do k = first, last - 1
      v(k - first + 1) = init_value(id, k)
    end do
  end function
end module

program test_fortran_api
  use, intrinsic :: iso_c_binding
  use fsdp
  use fortran_peek
  implicit none
  integer :: ierr, code, rank
  character(len=256) :: message, name
  type(fsdp_context) :: ctx
  type(fsdp_flatparam) :: unit, found
  integer :: id_vec, id_w, id_t4, id_s, id, world, nunits
  real(c_float), pointer :: vec(:), w(:, :), t4(:, :, :, :), s(:), v3(:, :, :), g(:, :), shard(:)
  integer(fsdp_int64), allocatable :: pshape(:)
  integer(fsdp_int64) :: numel, first, last, offset, k
  integer :: i, j, l, m, ivalue
  logical :: set, flag
  type(fsdp_training_state) :: state_in, state_out

  call fsdp_initialize(ierr)
  call check(ierr == FSDP_SUCCESS, 'fsdp_initialize')
  call fsdp_initialized(flag, ierr)
  call check(flag .and. ierr == 0, 'fsdp_initialized')
  call world_comm(world, rank)

  ! Every constant the module restates is C's.
  call check_enum('FSDP_SUCCESS', FSDP_SUCCESS)
  call check_enum('FSDP_ERR_ARG', FSDP_ERR_ARG)
  call check_enum('FSDP_ERR_STATE', FSDP_ERR_STATE)
  call check_enum('FSDP_ERR_MEM', FSDP_ERR_MEM)
  call check_enum('FSDP_ERR_MPI', FSDP_ERR_MPI)
  call check_enum('FSDP_ERR_HWLOC', FSDP_ERR_HWLOC)
  call check_enum('FSDP_ERR_HDF5', FSDP_ERR_HDF5)
  call check_enum('FSDP_ERR_CUDA', FSDP_ERR_CUDA)
  call check_enum('FSDP_ERR_NCCL', FSDP_ERR_NCCL)
  call check_enum('FSDP_ERR_IO', FSDP_ERR_IO)
  call check_enum('FSDP_ERR_OPTION', FSDP_ERR_OPTION)
  call check_enum('FSDP_ERR_UNSUPPORTED', FSDP_ERR_UNSUPPORTED)
  call check_enum('FSDP_ERR_TIMEOUT', FSDP_ERR_TIMEOUT)
  call check_enum('FSDP_ERR_CORRUPT', FSDP_ERR_CORRUPT)
  call check_enum('FSDP_ERR_USER', FSDP_ERR_USER)
  call check_enum('FSDP_ERR_INTERNAL', FSDP_ERR_INTERNAL)
  call check_enum('FSDP_ERR_NOT_FINITE', FSDP_ERR_NOT_FINITE)
  call check_enum('FSDP_ERRORS_PRINT', FSDP_ERRORS_PRINT)
  call check_enum('FSDP_ERRORS_RETURN', FSDP_ERRORS_RETURN)
  call check_enum('FSDP_ERRORS_ARE_FATAL', FSDP_ERRORS_ARE_FATAL)
  call check_enum('FSDP_FLOAT32', FSDP_FLOAT32)
  call check_enum('FSDP_FLOAT64', FSDP_FLOAT64)
  call check_enum('FSDP_BFLOAT16', FSDP_BFLOAT16)
  call check_enum('FSDP_FLOAT16', FSDP_FLOAT16)
  call check_enum('FSDP_SHARD_DOMAIN_NODE', FSDP_SHARD_DOMAIN_NODE)
  call check_enum('FSDP_SHARD_DOMAIN_PACKAGE', FSDP_SHARD_DOMAIN_PACKAGE)
  call check_enum('FSDP_SHARD_DOMAIN_NUMA', FSDP_SHARD_DOMAIN_NUMA)
  call check_enum('FSDP_SHARD_DOMAIN_WORLD', FSDP_SHARD_DOMAIN_WORLD)
  call check_enum('FSDP_FULL_SHARD', FSDP_FULL_SHARD)
  call check_enum('FSDP_SHARD_GRAD_OP', FSDP_SHARD_GRAD_OP)
  call check_enum('FSDP_NO_SHARD', FSDP_NO_SHARD)
  call check_enum('FSDP_HYBRID_SHARD', FSDP_HYBRID_SHARD)
  call check_enum('FSDP_HYBRID_SHARD_ZERO2', FSDP_HYBRID_SHARD_ZERO2)
  call check_enum('FSDP_COMM_ENGINE_THREAD', FSDP_COMM_ENGINE_THREAD)
  call check_enum('FSDP_COMM_ENGINE_NONBLOCKING', FSDP_COMM_ENGINE_NONBLOCKING)
  call check_enum('FSDP_COMM_ENGINE_SYNC', FSDP_COMM_ENGINE_SYNC)
  call check_enum('FSDP_BACKWARD_PREFETCH_PRE', FSDP_BACKWARD_PREFETCH_PRE)
  call check_enum('FSDP_BACKWARD_PREFETCH_POST', FSDP_BACKWARD_PREFETCH_POST)
  call check_enum('FSDP_BACKWARD_PREFETCH_NONE', FSDP_BACKWARD_PREFETCH_NONE)
  call check_enum('FSDP_DEVICE_HOST', FSDP_DEVICE_HOST)
  call check_enum('FSDP_DEVICE_CUDA', FSDP_DEVICE_CUDA)
  call check_enum('FSDP_FLATPARAM_SHARDED', FSDP_FLATPARAM_SHARDED)
  call check_enum('FSDP_FLATPARAM_GATHERING', FSDP_FLATPARAM_GATHERING)
  call check_enum('FSDP_FLATPARAM_UNSHARDED', FSDP_FLATPARAM_UNSHARDED)
  call check_enum('FSDP_FLATPARAM_REDUCING', FSDP_FLATPARAM_REDUCING)
  call check_enum('FSDP_OPTIMIZER_SGD', FSDP_OPTIMIZER_SGD)
  call check_enum('FSDP_OPTIMIZER_ADAMW', FSDP_OPTIMIZER_ADAMW)
  call check_enum('FSDP_LR_CONSTANT', FSDP_LR_CONSTANT)
  call check_enum('FSDP_LR_COSINE', FSDP_LR_COSINE)
  call check_enum('FSDP_WRAP_BLOCK', FSDP_WRAP_BLOCK)
  call check_enum('FSDP_WRAP_MODEL', FSDP_WRAP_MODEL)
  call check_enum('FSDP_WRAP_SIZE', FSDP_WRAP_SIZE)
  call check_enum('FSDP_ACT_RELU', FSDP_ACT_RELU)
  call check_enum('FSDP_ACT_TANH', FSDP_ACT_TANH)
  call check_enum('FSDP_ACT_GELU', FSDP_ACT_GELU)
  call check_enum('FSDP_ACT_IDENTITY', FSDP_ACT_IDENTITY)
  call check_enum('FSDP_WAIT_AUTO', FSDP_WAIT_AUTO)
  call check_enum('FSDP_WAIT_POLL', FSDP_WAIT_POLL)
  call check_enum('FSDP_WAIT_SLEEP', FSDP_WAIT_SLEEP)
  call check_enum('FSDP_SIMD_GENERIC', FSDP_SIMD_GENERIC)
  call check_enum('FSDP_SIMD_AVX2', FSDP_SIMD_AVX2)
  call check_enum('FSDP_SIMD_AVX512', FSDP_SIMD_AVX512)
  call check_enum('FSDP_MEM_PARAMS', FSDP_MEM_PARAMS)
  call check_enum('FSDP_MEM_GRADS', FSDP_MEM_GRADS)
  call check_enum('FSDP_MEM_OPTIM_STATE', FSDP_MEM_OPTIM_STATE)
  call check_enum('FSDP_MEM_UNSHARDED', FSDP_MEM_UNSHARDED)
  call check_enum('FSDP_MEM_COMM_STAGING', FSDP_MEM_COMM_STAGING)
  call check_enum('FSDP_MEM_OTHER', FSDP_MEM_OTHER)

  ! The SIMD path: the best this CPU runs, generic on request, nothing unknown.
  call fsdp_get_simd(i, j, ierr)
  call check(ierr == 0 .and. i >= FSDP_SIMD_GENERIC .and. i <= j .and. j <= FSDP_SIMD_AVX512, 'fsdp_get_simd')
  call fsdp_set_simd(FSDP_SIMD_GENERIC, ierr)
  call fsdp_get_simd(l, m, ierr)
  call check(ierr == 0 .and. l == FSDP_SIMD_GENERIC .and. m == j, 'fsdp_set_simd(FSDP_SIMD_GENERIC)')
  call fsdp_set_simd(9, ierr)
  call check(ierr == FSDP_ERR_ARG, 'fsdp_set_simd(9) is refused')
  call fsdp_set_simd(i, ierr)
  call ok(ierr, 'fsdp_set_simd back')
  call fsdp_sharding_strategy_name(FSDP_HYBRID_SHARD, name)
  call check(name == 'hybrid', 'fsdp_sharding_strategy_name(FSDP_HYBRID_SHARD) is '//trim(name))

  ! Options through the database.
  call fsdp_options_set_value('-test_fortran_n', '7', ierr)
  call ok(ierr, 'fsdp_options_set_value')
  call fsdp_options_get_int('-test_fortran_n', 'a test option', 3, ivalue, set, ierr)
  call check(ierr == 0 .and. set .and. ivalue == 7, 'fsdp_options_get_int')
  call fsdp_options_set_value('-test_fortran_s', 'hello', ierr)
  call ok(ierr, 'fsdp_options_set_value')
  call fsdp_options_get_string('-test_fortran_s', 'a test option', 'none', name, set, ierr)
  call check(ierr == 0 .and. set .and. name == 'hello', 'fsdp_options_get_string gave '//trim(name))

  ! A context on use mpi's integer MPI_COMM_WORLD, one unit with a 1-D, a
  ! 2-D, a 4-D and a scalar parameter, filled by a Fortran shard initializer.
  call fsdp_context_create(world, ctx, ierr)
  call check(ierr == 0, 'fsdp_context_create (integer communicator)')
  call check_context_comm_int(ctx)
  call fsdp_context_add_unit(ctx, 'u', unit, ierr)
  call ok(ierr, 'fsdp_context_add_unit')
  call fsdp_flatparam_add_param(unit, 'vec', [5], id_vec, ierr)
  call ok(ierr, 'fsdp_flatparam_add_param')
  call fsdp_flatparam_add_param(unit, 'w', [3, 4], id_w, ierr) ! C: [4, 3]
  call fsdp_flatparam_add_param(unit, 't4', [2, 3, 1, 2], id_t4, ierr) ! C: [2, 1, 3, 2]
  call fsdp_flatparam_add_param(unit, 's', [integer ::], id_s, ierr)
  call check(ierr == 0, 'fsdp_flatparam_add_param')
  call fsdp_flatparam_get_param_info(unit, id_t4, name, pshape, numel, ierr)
  call check(ierr == 0 .and. name == 't4' .and. size(pshape) == 4 .and. numel == 12, 'get_param_info of t4')
  if (size(pshape) == 4) call check(all(pshape == [2, 3, 1, 2]), 'get_param_info: t4''s Fortran shape')
  call fsdp_context_set_shard_init(ctx, shard_init, c_null_ptr, ierr)
  call check(ierr == 0, 'fsdp_context_set_shard_init')
  call fsdp_context_set_wait_mode(ctx, 7, ierr)
  call check(ierr == FSDP_ERR_ARG, 'fsdp_context_set_wait_mode(7) is refused')
  call fsdp_context_set_wait_mode(ctx, FSDP_WAIT_SLEEP, ierr)
  call ok(ierr, 'fsdp_context_set_wait_mode')
  call fsdp_context_set_shm_reduce(ctx, .false., ierr)
  call ok(ierr, 'fsdp_context_set_shm_reduce')
  call fsdp_context_set_shm_views(ctx, .true., ierr)
  call ok(ierr, 'fsdp_context_set_shm_views')
  call fsdp_context_get_shm_views(ctx, flag, ierr)
  call check(ierr == 0 .and. flag, 'fsdp_context_get_shm_views before set_up: what was asked')
  call fsdp_context_set_up(ctx, ierr)
  call check(ierr == 0, 'fsdp_context_set_up')
  call fsdp_context_get_shm_views(ctx, flag, ierr)
  call check(ierr == 0 .and. .not. flag, 'fsdp_context_get_shm_views: no views without the shared-memory window')
  call fsdp_context_get_wait_mode(ctx, i, j, l, ierr)
  call check(ierr == 0 .and. i == FSDP_WAIT_SLEEP .and. j >= 1 .and. l >= 1, 'fsdp_context_get_wait_mode')
  call wait_for_sum_int(ctx)
  call fsdp_context_get_num_units(ctx, nunits, ierr)
  call ok(ierr, 'fsdp_context_get_num_units')
  call check(nunits == 1, 'one unit')
  call fsdp_context_find_param(ctx, 'w', found, id, ierr)
  call check(ierr == 0 .and. c_associated(found%ptr, unit%ptr) .and. id == id_w, 'fsdp_context_find_param')

  ! Views, element by element against C's.
  call fsdp_context_begin_forward(ctx, ierr)
  call ok(ierr, 'fsdp_context_begin_forward')
  call fsdp_flatparam_unshard(unit, ierr)
  call check(ierr == 0, 'fsdp_flatparam_unshard')
  call fsdp_flatparam_get_param(unit, id_vec, vec, ierr)
  call check(ierr == 0 .and. size(vec) == 5, 'the view of vec')
  do i = 1, 5
    call check(vec(i) == fsdpt_param_element(unit, id_vec, [int(i - 1, c_int64_t)]) .and. &
               vec(i) == init_value(id_vec, int(i - 1, c_int64_t)), 'vec(i) is C''s vec[i-1]')
  end do
  call fsdp_flatparam_get_param(unit, id_w, w, ierr)
  call check(ierr == 0 .and. all(shape_of2(w) == [3, 4]), 'the view of w has shape (3, 4)')
  do j = 1, 4
    do i = 1, 3
      call check(w(i, j) == fsdpt_param_element(unit, id_w, [int(j - 1, c_int64_t), int(i - 1, c_int64_t)]), &
                 'w(i, j) is C''s w[j-1][i-1]')
      call check(w(i, j) == init_value(id_w, int((j - 1) * 3 + (i - 1), c_int64_t)), 'w(i, j) was initialized')
    end do
  end do
  call fsdp_flatparam_get_param(unit, id_t4, t4, ierr)
  call check(ierr == 0 .and. size(t4, 1) == 2 .and. size(t4, 2) == 3 .and. size(t4, 3) == 1 .and. size(t4, 4) == 2, &
             'the view of t4 has shape (2, 3, 1, 2)')
  do m = 1, 2
    do l = 1, 1
      do j = 1, 3
        do i = 1, 2
          call check(t4(i, j, l, m) == fsdpt_param_element(unit, id_t4, [int(m - 1, c_int64_t), &
                     int(l - 1, c_int64_t), int(j - 1, c_int64_t), int(i - 1, c_int64_t)]), &
                     't4(i, j, l, m) is C''s t4[m-1][l-1][j-1][i-1]')
        end do
      end do
    end do
  end do
  call fsdp_flatparam_get_param(unit, id_s, s, ierr)
  call check(ierr == 0 .and. size(s) == 1, 'the view of the scalar s')
  if (size(s) == 1) call check(s(1) == init_value(id_s, 0_c_int64_t), 's(1) is the scalar')
  ! A 2-D parameter flattened: the same memory in C's order.
  call fsdp_flatparam_get_param(unit, id_w, vec, ierr)
  call check(ierr == 0 .and. size(vec) == 12, 'a rank-1 view of w')
  if (size(vec) == 12) call check(vec(5) == w(2, 2), 'w flattened: element 5 is w(2, 2)')

  ! The wrong rank is refused, with a message that names the parameter.
  call fsdp_set_error_mode(FSDP_ERRORS_RETURN, ierr)
  call ok(ierr, 'fsdp_set_error_mode')
  call fsdp_flatparam_get_param(unit, id_w, v3, ierr)
  call check(ierr == FSDP_ERR_ARG .and. .not. associated(v3), 'a rank-3 view of w is FSDP_ERR_ARG')
  call fsdp_get_last_error(code, message, ierr)
  call check(ierr == 0 .and. code == FSDP_ERR_ARG, 'fsdp_get_last_error: the code')
  call check(index(message, 'fsdp_flatparam_get_param: parameter ''w'' has 2 dimensions, the view has rank 3') > 0, &
             'the message: '//trim(message))
  call fsdp_flatparam_get_param(unit, id_vec, g, ierr)
  call check(ierr == FSDP_ERR_ARG .and. .not. associated(g), 'a rank-2 view of vec is FSDP_ERR_ARG')
  call fsdp_get_last_error(code, message, ierr)
  call check(code == FSDP_ERR_ARG .and. &
             index(message, 'fsdp_flatparam_get_param: parameter ''vec'' has 1 dimension, the view has rank 2') > 0, &
             'a rank-2 view of vec: '//trim(message))
  ! The traceback of an error the module raised names the Fortran call
  ! (valgrind: its frame's name is still there after the call returned).
  call fsdp_error_print_trace(ierr)
  call ok(ierr, 'fsdp_error_print_trace')

  ! Gradients: written in Fortran, read by C, reduced into the shard.
  call fsdp_context_begin_backward(ctx, ierr)
  call ok(ierr, 'fsdp_context_begin_backward')
  call fsdp_flatparam_get_grad(unit, id_w, g, ierr)
  call check(ierr == 0 .and. all(shape_of2(g) == [3, 4]), 'the gradient view of w')
  g = 2 * w
  do j = 1, 4
    do i = 1, 3
      call check(fsdpt_grad_element(unit, id_w, [int(j - 1, c_int64_t), int(i - 1, c_int64_t)]) == 2 * w(i, j), &
                 'g(i, j) is C''s grad[j-1][i-1]')
    end do
  end do
  call fsdp_flatparam_reduce_grad(unit, ierr)
  call ok(ierr, 'fsdp_flatparam_reduce_grad')
  call fsdp_context_finish_backward(ctx, ierr)
  call check(ierr == 0, 'reduce and finish backward')
  call fsdp_flatparam_get_grad_shard(unit, shard, ierr)
  call ok(ierr, 'fsdp_flatparam_get_grad_shard')
  call fsdp_flatparam_get_shard_range(unit, id_w, first, last, offset, ierr)
  call check(ierr == 0, 'fsdp_flatparam_get_shard_range')
  do k = first, last - 1
    ! every rank wrote the same gradient: the average is it
    call check(shard(offset + k - first + 1) == 2 * init_value(id_w, k), 'the gradient shard holds w''s gradient')
  end do
  call fsdp_flatparam_get_shard(unit, shard, ierr)
  call ok(ierr, 'fsdp_flatparam_get_shard')
  do k = first, last - 1
    call check(shard(offset + k - first + 1) == init_value(id_w, k), 'the shard holds w')
  end do

  ! Bad arguments: the right code and a readable message, in Fortran's
  ! terms (1-based units, Fortran's shapes, the Fortran call); nothing aborts.
  call fsdp_context_get_unit(ctx, 1, found, ierr)
  call check(ierr == 0 .and. c_associated(found%ptr, unit%ptr), 'fsdp_context_get_unit(ctx, 1) is the first unit')
  call fsdp_context_get_unit(ctx, 5, found, ierr)
  call check(ierr == FSDP_ERR_ARG .and. .not. c_associated(found%ptr), 'get_unit(5) is FSDP_ERR_ARG')
  call fsdp_get_last_error(code, message, ierr)
  call ok(ierr, 'fsdp_get_last_error')
  call check(code == FSDP_ERR_ARG .and. message == 'fsdp_context_get_unit: unit index 5 is not in [1, 1]', &
             'get_unit(5): '//trim(message))
  call fsdp_context_get_unit(ctx, 0, found, ierr)
  call fsdp_get_last_error(code, message, ierr)
  call check(code == FSDP_ERR_ARG .and. message == 'fsdp_context_get_unit: unit index 0 is not in [1, 1]', &
             'get_unit(0): '//trim(message))
  call fsdp_flatparam_add_param(unit, 'neg', [2, -3], id, ierr)
  call fsdp_get_last_error(code, message, ierr)
  call check(code == FSDP_ERR_ARG .and. message == 'fsdp_flatparam_add_param: parameter ''neg'': shape(2) is -3', &
             'add_param with shape [2, -3]: '//trim(message))
  call fsdp_flatparam_add_param(unit, 'late', [2], id, ierr)
  call check(ierr /= 0, 'add_param after set_up fails')
  call fsdp_get_error_string(FSDP_ERR_ARG, name)
  call check(name == 'invalid argument', 'fsdp_get_error_string: '//trim(name))

  ! The training state crosses intact.
  state_in%step = 41
  state_in%data_cursor = -3
  state_in%rng = [1_c_int64_t, -2_c_int64_t, huge(1_c_int64_t), 4_c_int64_t]
  call fsdp_context_set_training_state(ctx, state_in, ierr)
  call ok(ierr, 'fsdp_context_set_training_state')
  call fsdp_context_get_training_state(ctx, state_out, ierr)
  call check(ierr == 0 .and. state_out%step == 41 .and. state_out%data_cursor == -3 .and. &
             all(state_out%rng == state_in%rng), 'the training state')

  call fsdp_context_destroy(ctx, ierr)
  call check(ierr == 0 .and. .not. c_associated(ctx%ptr), 'fsdp_context_destroy')

  ! The model's arrays: the loss and backward must have the last forward's batch.
  call model_batches(world)
  call gpt_model(world)
  call cnn_model(world)
  call unet_model(world)
  call memory_limit(world)
  call planner(world)
  deallocate (pshape)

  call f08_forms(failures)
  call fsdp_set_error_mode(FSDP_ERRORS_PRINT, ierr)
  call ok(ierr, 'fsdp_set_error_mode')
  call fsdp_finalize(ierr)
  call ok(ierr, 'fsdp_finalize')
  if (failures > 0) then
    write (*, '(i0,a)') failures, ' checks failed'
    stop 1
  end if
  if (rank == 0) write (*, '(a)') 'test_fortran_api: all checks passed'

contains

  subroutine model_batches(comm)
    integer, intent(in) :: comm
    type(fsdp_context) :: mctx
    type(fsdp_model) :: model
    real(c_float), target :: x(3, 4), t(2, 3), out(2, 4), wide(5, 4)
    real(c_float), pointer :: y(:, :), dy(:, :)
    real(c_double) :: l
    integer :: ierr, code
    character(len=256) :: message
    x = 0.5
    t = 0
    wide = 0
    call fsdp_context_create(comm, mctx, ierr)
    call fsdp_model_create(mctx, 'mlp:in=3,hidden=4,depth=1,out=2', model, ierr)
    call fsdp_model_set_up(model, ierr)
    call ok(ierr, 'the model''s set up')
    call fsdp_model_forward(model, wide, y, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_ARG .and. message == 'fsdp_model_forward: x''s first extent is 5, the model''s in is 3', &
               'forward of x(5, 4): '//trim(message))
    call fsdp_model_forward(model, x, y, ierr)
    call check(ierr == 0 .and. size(y, 1) == 2 .and. size(y, 2) == 4, 'forward: y(2, 4)')
    call fsdp_model_backward(model, t, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_ARG .and. message == 'fsdp_model_backward: dy has 3 samples, the last forward had 4', &
               'backward of dy(2, 3): '//trim(message))
    call fsdp_model_backward(model, x, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_ARG .and. message == 'fsdp_model_backward: dy''s first extent is 3, the model''s out is 2', &
               'backward of dy(3, 4): '//trim(message))
    call fsdp_model_loss(model, t, 1.0_c_double, l, dy, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_ARG .and. index(message, 'target has 3 samples, the last forward had 4') > 0, &
               'a loss on 3 samples after a forward on 4: '//trim(message))
    call fsdp_model_predict(model, x, out, ierr)
    call check(ierr == 0 .and. all(out == y), 'fsdp_model_predict copies the forward''s output')
    call fsdp_model_destroy(model, ierr)
    call fsdp_context_destroy(mctx, ierr)
    call ok(ierr, 'the model''s context destroyed')
  end subroutine

  ! A GPT through the model API: token ids in x(ctx, n), labels ctx per
  ! sample; at GPT-2's small initialization the loss is close to log(vocab).
  ! A memory limit below the plan: set_up refuses, naming the plan.
  subroutine memory_limit(comm)
    integer, intent(in) :: comm
    type(fsdp_context) :: mctx
    type(fsdp_model) :: model
    integer :: ierr, code
    character(len=256) :: message
    call fsdp_context_create(comm, mctx, ierr)
    call fsdp_context_set_memory_limit(mctx, 1000_fsdp_int64, ierr)
    call ok(ierr, 'fsdp_context_set_memory_limit')
    call fsdp_model_create(mctx, 'mlp:in=4,hidden=64,depth=2,out=2', model, ierr)
    call fsdp_model_set_up(model, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_MEM .and. index(message, 'the memory plan needs') > 0, &
               'a plan above the memory limit refused: '//trim(message))
    call fsdp_model_destroy(model, ierr)
    call fsdp_context_destroy(mctx, ierr)
    call fsdp_context_create(comm, mctx, ierr)
    call fsdp_context_set_memory_limit(mctx, FSDP_MEMORY_LIMIT_AUTO, ierr)
    call ok(ierr, 'fsdp_context_set_memory_limit(FSDP_MEMORY_LIMIT_AUTO)')
    call fsdp_context_destroy(mctx, ierr)
  end subroutine

  ! The planner: its candidates cross the interface whole (the type's size is C's, each one's bytes add up
  ! to its total, its layout covers the ranks), the choice is an options line, and a budget nothing fits
  ! is FSDP_ERR_MEM with no choice.
  subroutine planner(comm)
    integer, intent(in) :: comm
    type(fsdp_plan) :: plan
    type(fsdp_plan_candidate) :: c
    integer :: ierr, n, i, size, choice, code
    double precision :: flops, intra, inter, latency
    character(len=512) :: options
    character(len=256) :: message
    call MPI_Comm_size(comm, size, ierr)
    call check(c_sizeof(c) == fsdpt_plan_candidate_size(), 'type(fsdp_plan_candidate) has the size of C''s')
    call fsdp_plan_create(comm, plan, ierr)
    call ok(ierr, 'fsdp_plan_create')
    call fsdp_plan_set_model(plan, 'mlp:in=4,hidden=64,depth=2,out=2', ierr)
    call fsdp_plan_set_job(plan, 1, size, ierr)
    call fsdp_plan_set_batch(plan, int(6 * size, fsdp_int64), ierr)
    call fsdp_plan_set_optimizer(plan, FSDP_OPTIMIZER_SGD, 0.9d0, ierr)
    call fsdp_plan_set_rates(plan, 1d10, 1d9, 0d0, 1d-6, ierr)
    call fsdp_plan_get_rates(plan, flops, intra, inter, latency, ierr)
    call check(ierr == 0 .and. flops == 1d10 .and. intra == 1d9 .and. inter == 0 .and. latency == 1d-6, &
               'fsdp_plan_set_rates and get_rates')
    call fsdp_plan_set_up(plan, ierr)
    call ok(ierr, 'fsdp_plan_set_up')
    call fsdp_plan_get_num_candidates(plan, n, ierr)
    call check(ierr == 0 .and. n > 4, 'fsdp_plan_get_num_candidates')
    do i = 0, n - 1
      call fsdp_plan_get_candidate(plan, i, c, ierr)
      call check(ierr == 0 .and. sum(c%bytes) == c%total .and. c%factor * c%replicas == size .and. &
                 c%batch * c%grad_accum == 6 * size .and. c%fits .and. c%seconds > 0 .and. &
                 c%bytes(FSDP_MEM_OPTIM_STATE) == c%bytes(FSDP_MEM_PARAMS), &
                 'fsdp_plan_get_candidate: a candidate''s fields (SGD with momentum: one state per parameter)')
    end do
    call fsdp_plan_get_choice(plan, choice, options, ierr)
    call check(ierr == 0 .and. choice == 0 .and. index(options, '-fsdp_sharding_strategy ') == 1, &
               'fsdp_plan_get_choice: '//trim(options))
    call fsdp_plan_set_memory_budget(plan, 100_fsdp_int64, ierr)
    call fsdp_plan_set_up(plan, ierr)
    call fsdp_plan_get_choice(plan, choice, options, ierr)
    call check(ierr == FSDP_ERR_MEM .and. choice == -1 .and. len_trim(options) == 0, &
               'nothing fits 100 bytes: FSDP_ERR_MEM')
    call fsdp_plan_set_memory_budget(plan, -1_fsdp_int64, ierr)
    call check(ierr == FSDP_ERR_ARG, 'a negative budget is refused')
    ! A node's topology: a rank per core (or, without hwloc, a refusal that names it).
    call fsdp_plan_set_topology(plan, 'pack:1 core:3 pu:1', ierr)
    if (ierr == 0) then
      call fsdp_plan_set_memory_budget(plan, 0_fsdp_int64, ierr)
      call fsdp_plan_set_batch(plan, 6_fsdp_int64, ierr)
      call fsdp_plan_set_up(plan, ierr)
      call fsdp_plan_get_candidate(plan, 0, c, ierr)
      call check(ierr == 0 .and. c%factor * c%replicas == 3, 'fsdp_plan_set_topology: a rank per core of 3')
    else
      call fsdp_get_last_error(code, message, i)
      call check(code == FSDP_ERR_UNSUPPORTED .and. index(message, '''pack:1 core:3 pu:1'' needs hwloc') > 0, &
                 'fsdp_plan_set_topology without hwloc: '//trim(message))
    end if
    call fsdp_plan_destroy(plan, ierr)
    call check(ierr == 0 .and. .not. c_associated(plan%ptr), 'fsdp_plan_destroy')
  end subroutine

  subroutine gpt_model(comm)
    integer, intent(in) :: comm
    type(fsdp_context) :: mctx
    type(fsdp_model) :: model
    type(fsdp_optimizer) :: opt
    real(c_double) :: wd, scale
    real(c_float), target :: x(4, 3)
    integer(fsdp_int64), target :: labels(12), short(5), bad(12)
    real(c_float), pointer :: y(:, :), dy(:, :)
    real(c_double) :: l
    integer(fsdp_int64) :: ctx, vocab
    integer :: ierr, code, i
    logical :: on
    character(len=256) :: message
    x = reshape([(real(mod(3 * i, 7), c_float), i = 1, 12)], [4, 3])
    labels = [(int(mod(5 * i + 1, 7), fsdp_int64), i = 1, 12)]
    short = 0
    call fsdp_context_create(comm, mctx, ierr)
    call fsdp_model_create(mctx, 'gpt:vocab=7,ctx=4,dim=8,heads=2,layers=1,tied=1', model, ierr)
    call ok(ierr, 'fsdp_model_create (gpt)')
    call fsdp_model_set_activation_checkpointing(model, .true., ierr)
    call fsdp_model_get_activation_checkpointing(model, on, ierr)
    call check(ierr == 0 .and. on, 'activation checkpointing on')
    call fsdp_model_set_up(model, ierr)
    call fsdp_model_get_tokens(model, ctx, vocab, ierr)
    call check(ierr == 0 .and. ctx == 4 .and. vocab == 7, 'fsdp_model_get_tokens')
    call fsdp_model_forward(model, x, y, ierr)
    call check(ierr == 0 .and. size(y, 1) == 28 .and. size(y, 2) == 3, 'gpt forward: y(28, 3)')
    call fsdp_model_loss(model, short, 1.0_c_double, l, dy, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_ARG .and. index(message, 'labels has 5 elements: a GPT takes 4 per sample') > 0, &
               'gpt labels not a multiple of ctx: '//trim(message))
    bad = labels
    bad(6) = 7
    call fsdp_model_loss(model, bad, 1.0_c_double, l, dy, ierr)
    call fsdp_get_last_error(code, message, ierr)
    call check(code == FSDP_ERR_ARG .and. message == 'fsdp_model_loss: labels(6) is 7, not in [0, 7)', &
               'a label out of range: '//trim(message))
    call fsdp_model_loss(model, labels, 1.0_c_double, l, dy, ierr)
    call check(ierr == 0 .and. abs(l - log(7.0_c_double)) < 0.05 .and. size(dy, 1) == 28 .and. size(dy, 2) == 3, &
               'gpt cross-entropy near log(7) at initialization')
    call fsdp_model_backward(model, dy, ierr)
    call ok(ierr, 'gpt backward')
    call fsdp_context_finish_backward(mctx, ierr)
    call ok(ierr, 'gpt: the backward pass finished')
    ! nanoGPT's parameter groups: no weight decay for biases and LayerNorm's weights
    call fsdp_optimizer_create(mctx, opt, ierr)
    call fsdp_optimizer_add_param_group(opt, 'ndim<2', 0.0_c_double, 1.0_c_double, ierr)
    call ok(ierr, 'fsdp_optimizer_add_param_group')
    call fsdp_optimizer_get_param_settings(opt, 'blocks.0.ln_1.weight', wd, scale, ierr)
    call check(ierr == 0 .and. wd == 0 .and. scale == 1, 'blocks.0.ln_1.weight in the ndim<2 group')
    call fsdp_optimizer_get_param_settings(opt, 'wte.weight', wd, scale, ierr)
    call check(ierr == 0 .and. wd == 0.01_c_double .and. scale == 1, 'wte.weight decays at the default 0.01')
    call fsdp_optimizer_set_up(opt, ierr)
    call ok(ierr, 'gpt: the optimizer with a group set up')
    call fsdp_optimizer_step(opt, ierr)
    call ok(ierr, 'gpt: a step with parameter groups')
    call fsdp_optimizer_destroy(opt, ierr)
    call ok(ierr, 'gpt: the optimizer destroyed')
    call fsdp_model_destroy(model, ierr)
    call ok(ierr, 'gpt: the model destroyed')
    call fsdp_context_destroy(mctx, ierr)
    call ok(ierr, 'gpt: its context destroyed')
  end subroutine

  ! A convolutional model from Fortran: samples are fields x(W, H, C), flattened
  ! into columns; TorchFort's circular convolution on a 6x5 grid moves a
  ! constant field to a constant field (each output is the kernel's sum times
  ! the value, plus the bias) however the pad wraps.
  subroutine cnn_model(comm)
    integer, intent(in) :: comm
    type(fsdp_context) :: mctx
    type(fsdp_model) :: model
    integer(fsdp_int64), allocatable :: sin(:), sout(:)
    real(c_float), target :: x(5, 6, 2, 3)
    real(c_float), pointer :: y(:, :)
    integer :: ierr
    x = 1
    call fsdp_context_create(comm, mctx, ierr)
    call fsdp_model_create(mctx, 'cnn:grid=6x5,in=2,out=1,padding=circular', model, ierr)
    call ok(ierr, 'fsdp_model_create (cnn)')
    call fsdp_model_set_up(model, ierr)
    call ok(ierr, 'cnn: set up')
    call fsdp_model_get_sample_shape(model, .false., sin, ierr)
    call check(ierr == 0 .and. size(sin) == 3, 'cnn: the input sample has 3 dimensions')
    if (size(sin) == 3) call check(all(sin == [5, 6, 2]), 'cnn: the input sample is x(5, 6, 2)')
    call fsdp_model_get_sample_shape(model, .true., sout, ierr)
    call check(ierr == 0 .and. size(sout) == 3, 'cnn: the output sample has 3 dimensions')
    if (size(sout) == 3) call check(all(sout == [5, 6, 1]), 'cnn: the output sample is y(5, 6, 1)')
    call fsdp_model_forward(model, reshape(x, [60, 3]), y, ierr)
    call check(ierr == 0 .and. size(y, 1) == 30 .and. size(y, 2) == 3, 'cnn forward: y(30, 3)')
    if (ierr == 0) call check(maxval(y) - minval(y) < 1e-5, 'cnn: a constant field stays constant under circular padding')
    call fsdp_model_destroy(model, ierr)
    call fsdp_context_destroy(mctx, ierr)
    call ok(ierr, 'cnn: its context destroyed')
  end subroutine

  ! A U-Net from Fortran: its sample shapes, and a training step's forward and backward.
  subroutine unet_model(comm)
    integer, intent(in) :: comm
    type(fsdp_context) :: mctx
    type(fsdp_model) :: model
    integer(fsdp_int64), allocatable :: sout(:)
    real(c_float), target :: x(64, 2), t(96, 2) ! x(4, 8, 2, 2) flat: forward keeps its address for backward
    real(c_float), pointer :: y(:, :)
    integer :: ierr, i
    x = reshape([(real(mod(i, 7), c_float) / 7, i=1, size(x))], shape(x))
    t = 0
    call fsdp_context_create(comm, mctx, ierr)
    call fsdp_model_create(mctx, 'unet:grid=8x4,in=2,out=3,channels=2,levels=2,padding=circular', model, ierr)
    call ok(ierr, 'fsdp_model_create (unet)')
    call fsdp_model_set_up(model, ierr)
    call ok(ierr, 'unet: set up')
    call fsdp_model_get_sample_shape(model, .true., sout, ierr)
    call check(ierr == 0 .and. size(sout) == 3, 'unet: the output sample has 3 dimensions')
    if (size(sout) == 3) call check(all(sout == [4, 8, 3]), 'unet: the output sample is y(4, 8, 3)')
    call fsdp_model_forward(model, x, y, ierr)
    call check(ierr == 0 .and. size(y, 1) == 96 .and. size(y, 2) == 2, 'unet forward: y(96, 2)')
    call fsdp_model_backward(model, t, ierr)
    call ok(ierr, 'unet: backward')
    call fsdp_context_finish_backward(mctx, ierr)
    call ok(ierr, 'unet: the gradients reduced')
    call fsdp_model_destroy(model, ierr)
    call fsdp_context_destroy(mctx, ierr)
    call ok(ierr, 'unet: its context destroyed')
  end subroutine

  function shape_of2(a) result(r)
    real(c_float), intent(in) :: a(:, :)
    integer :: r(2)
    r = shape(a)
  end function

  subroutine world_comm(comm, rank)
    use mpi, only: MPI_COMM_WORLD, MPI_Comm_rank
    integer, intent(out) :: comm, rank
    integer :: ierr
    comm = MPI_COMM_WORLD
    call MPI_Comm_rank(comm, rank, ierr)
  end subroutine

  ! An MPI_Iallreduce of the program's, on an integer request, completed by
  ! fsdp_context_wait: the sum is there and the request is freed.
  subroutine wait_for_sum_int(ctx)
    use mpi, only: MPI_COMM_WORLD, MPI_INTEGER, MPI_SUM, MPI_REQUEST_NULL, MPI_Comm_size
    type(fsdp_context), intent(in) :: ctx
    integer :: mine, total, request, size, ierr, mpierr
    call MPI_Comm_size(MPI_COMM_WORLD, size, mpierr)
    mine = 3
    call MPI_Iallreduce(mine, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, request, mpierr)
    call fsdp_context_wait(ctx, request, ierr)
    call check(ierr == 0 .and. total == 3 * size .and. request == MPI_REQUEST_NULL, &
               'fsdp_context_wait (integer request)')
  end subroutine

  ! The context's integer communicator and its shard group's are congruent
  ! with what they were made from.
  subroutine check_context_comm_int(ctx)
    use mpi, only: MPI_COMM_WORLD, MPI_CONGRUENT, MPI_Comm_compare
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_shardgroup) :: group
    integer :: comm, result, ierr, mpierr
    call fsdp_context_get_comm(ctx, comm, ierr)
    call MPI_Comm_compare(comm, MPI_COMM_WORLD, result, mpierr)
    call check(ierr == 0 .and. result == MPI_CONGRUENT, 'fsdp_context_get_comm (integer)')
    call fsdp_context_get_shard_group(ctx, group, ierr)
    call fsdp_shardgroup_get_comm(group, comm, ierr)
    call MPI_Comm_compare(comm, MPI_COMM_WORLD, result, mpierr)
    call check(ierr == 0 .and. result == MPI_CONGRUENT, 'fsdp_shardgroup_get_comm (integer)')
  end subroutine
end program

#ifdef FSDP_HAVE_MPI_F08
! mpi_f08's type(MPI_Comm): a ShardGroup of every rank with F = 1 gives
! one-rank shard groups and a replicate group of all.
subroutine f08_forms(failures)
  use mpi_f08
  use fsdp
  implicit none
  integer, intent(inout) :: failures
  type(fsdp_shardgroup) :: group
  type(fsdp_context) :: ctx
  type(MPI_Comm) :: comm
  type(MPI_Request) :: request
  integer :: ierr, result, index, factor, size, world_size, mine, total
  call MPI_Comm_size(MPI_COMM_WORLD, world_size)
  call fsdp_shardgroup_create(MPI_COMM_WORLD, group, ierr)
  call fsdp_shardgroup_set_sharding_factor(group, 1, ierr)
  call fsdp_shardgroup_set_up(group, ierr)
  if (ierr /= 0) failures = failures + 1
  call fsdp_shardgroup_get_shard_comm(group, comm, index, factor, ierr)
  call MPI_Comm_size(comm, size)
  if (ierr /= 0 .or. factor /= 1 .or. size /= 1 .or. index /= 0) then
    failures = failures + 1
    write (*, '(a)') 'FAIL: fsdp_shardgroup_get_shard_comm (mpi_f08)'
  end if
  call fsdp_shardgroup_get_replicate_comm(group, comm, index, size, ierr)
  call MPI_Comm_compare(comm, MPI_COMM_WORLD, result)
  if (ierr /= 0 .or. size /= world_size .or. result /= MPI_CONGRUENT) then
    failures = failures + 1
    write (*, '(a)') 'FAIL: fsdp_shardgroup_get_replicate_comm (mpi_f08)'
  end if
  call fsdp_shardgroup_destroy(group, ierr)
  call fsdp_context_create(MPI_COMM_WORLD, ctx, ierr)
  call fsdp_context_get_comm(ctx, comm, ierr)
  call MPI_Comm_compare(comm, MPI_COMM_WORLD, result)
  if (ierr /= 0 .or. result /= MPI_CONGRUENT) then
    failures = failures + 1
    write (*, '(a)') 'FAIL: fsdp_context_create/get_comm (mpi_f08)'
  end if
  ! A type(MPI_Request) of the program's, completed by the context's wait.
  call fsdp_context_set_up(ctx, ierr)
  mine = 5
  call MPI_Iallreduce(mine, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, request)
  call fsdp_context_wait(ctx, request, ierr)
  if (ierr /= 0 .or. total /= 5 * world_size .or. request /= MPI_REQUEST_NULL) then
    failures = failures + 1
    write (*, '(a)') 'FAIL: fsdp_context_wait (mpi_f08 request)'
  end if
  call fsdp_context_destroy(ctx, ierr)
end subroutine
#else
subroutine f08_forms(failures)
  integer, intent(inout) :: failures
  write (*, '(a)') 'note: MPI has no mpi_f08 module; integer communicators only'
  failures = failures + 0
end subroutine
#endif
