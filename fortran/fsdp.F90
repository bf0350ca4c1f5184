! fsdp.F90: the Fortran interface to libfsdp (doc/fortran.md).
!
! Every call is a subroutine whose last argument is an integer ierr: 0
! (FSDP_SUCCESS) or one of the FSDP_ERR_* codes, with the message readable
! from fsdp_get_last_error.  Nothing here stops the program; a program that
! wants that at its top level uses FSDPCallA (fsdpf.h) or fsdp_abort_on_error.
!
! Shapes are Fortran's: C keeps a parameter of shape [d1, ..., dn] in
! row-major order, and Fortran sees the same memory as an array of shape
! (dn, ..., d1): a Linear layer's weight [out, in] is w(in, out), and
! w(i, o) is C's w[o][i].  fsdp_flatparam_add_param takes shapes the same
! way.  Batches are columns: a model's input is x(in, n), its output y(out, n).
! Indices of units are 1-based; parameter ids are what add_param returns.
module fsdp
  use, intrinsic :: iso_c_binding
#ifdef FSDP_HAVE_MPI_F08
  use mpi_f08, only: MPI_Comm, MPI_Request
#endif
  implicit none
  private

  ! ---------------------------------------------------------------- constants (include/fsdp.h)
  integer, parameter, public :: FSDP_SUCCESS = 0, FSDP_ERR_ARG = 1, FSDP_ERR_STATE = 2, FSDP_ERR_MEM = 3, &
                                FSDP_ERR_MPI = 4, FSDP_ERR_HWLOC = 5, FSDP_ERR_HDF5 = 6, FSDP_ERR_CUDA = 7, &
                                FSDP_ERR_NCCL = 8, FSDP_ERR_IO = 9, FSDP_ERR_OPTION = 10, &
                                FSDP_ERR_UNSUPPORTED = 11, FSDP_ERR_TIMEOUT = 12, FSDP_ERR_CORRUPT = 13, &
                                FSDP_ERR_USER = 14, FSDP_ERR_INTERNAL = 15, FSDP_ERR_NOT_FINITE = 16
  integer, parameter, public :: FSDP_ERRORS_PRINT = 0, FSDP_ERRORS_RETURN = 1, FSDP_ERRORS_ARE_FATAL = 2
  integer, parameter, public :: FSDP_FLOAT32 = 0, FSDP_FLOAT64 = 1, FSDP_BFLOAT16 = 2, FSDP_FLOAT16 = 3
  integer, parameter, public :: FSDP_SHARD_DOMAIN_NODE = 0, FSDP_SHARD_DOMAIN_PACKAGE = 1, &
                                FSDP_SHARD_DOMAIN_NUMA = 2, FSDP_SHARD_DOMAIN_WORLD = 3
  integer, parameter, public :: FSDP_FULL_SHARD = 0, FSDP_SHARD_GRAD_OP = 1, FSDP_NO_SHARD = 2, &
                                FSDP_HYBRID_SHARD = 3, FSDP_HYBRID_SHARD_ZERO2 = 4
  integer, parameter, public :: FSDP_COMM_ENGINE_THREAD = 0, FSDP_COMM_ENGINE_NONBLOCKING = 1, &
                                FSDP_COMM_ENGINE_SYNC = 2
  integer, parameter, public :: FSDP_BACKWARD_PREFETCH_PRE = 0, FSDP_BACKWARD_PREFETCH_POST = 1, &
                                FSDP_BACKWARD_PREFETCH_NONE = 2
  integer, parameter, public :: FSDP_DEVICE_HOST = 0, FSDP_DEVICE_CUDA = 1
  integer, parameter, public :: FSDP_FLATPARAM_SHARDED = 0, FSDP_FLATPARAM_GATHERING = 1, &
                                FSDP_FLATPARAM_UNSHARDED = 2, FSDP_FLATPARAM_REDUCING = 3
  integer, parameter, public :: FSDP_OPTIMIZER_SGD = 0, FSDP_OPTIMIZER_ADAMW = 1
  integer, parameter, public :: FSDP_LR_CONSTANT = 0, FSDP_LR_COSINE = 1
  integer, parameter, public :: FSDP_WRAP_BLOCK = 0, FSDP_WRAP_MODEL = 1, FSDP_WRAP_SIZE = 2
  integer, parameter, public :: FSDP_ACT_RELU = 0, FSDP_ACT_TANH = 1, FSDP_ACT_GELU = 2, FSDP_ACT_IDENTITY = 3
  integer, parameter, public :: FSDP_WAIT_AUTO = 0, FSDP_WAIT_POLL = 1, FSDP_WAIT_SLEEP = 2
  integer, parameter, public :: FSDP_SIMD_GENERIC = 0, FSDP_SIMD_AVX2 = 1, FSDP_SIMD_AVX512 = 2
  ! Memory categories: the indices of fsdp_plan_candidate%bytes (0-based, as in C)
  integer, parameter, public :: FSDP_MEM_PARAMS = 0, FSDP_MEM_GRADS = 1, FSDP_MEM_OPTIM_STATE = 2, &
                                FSDP_MEM_UNSHARDED = 3, FSDP_MEM_COMM_STAGING = 4, FSDP_MEM_OTHER = 5
  ! Element counts and offsets: parameters can exceed 2^31 elements.
  integer, parameter, public :: fsdp_int64 = c_int64_t
  ! fsdp_context_set_memory_limit's default: the node's memory, the cgroup and RLIMIT_AS decide
  integer(fsdp_int64), parameter, public :: FSDP_MEMORY_LIMIT_AUTO = -1

  ! ---------------------------------------------------------------- handles
  ! bind(C) so that an initializer receives its unit by reference from C.
  type, bind(C), public :: fsdp_shardgroup
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C), public :: fsdp_context
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C), public :: fsdp_flatparam
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C), public :: fsdp_optimizer
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C), public :: fsdp_model
    type(c_ptr) :: ptr = c_null_ptr
    integer(c_int64_t) :: rows = -1 ! the batch of the last forward: the loss and backward must match it
  end type
  type, bind(C), public :: fsdp_plan
    type(c_ptr) :: ptr = c_null_ptr
  end type
  ! One layout the planner considered (FSDPPlanCandidate): bytes per rank by memory category (FSDP_MEM_*,
  ! FSDP_MEM_OTHER the activations), bytes sent per step, predicted seconds (< 0: no rates).
  type, bind(C), public :: fsdp_plan_candidate
    integer(c_int) :: strategy = 0
    integer(c_int) :: factor = 0
    integer(c_int) :: replicas = 0
    integer(c_int) :: wrap = 0
    integer(c_int) :: nunits = 0
    integer(c_int64_t) :: batch = 0
    integer(c_int) :: grad_accum = 0
    logical(c_bool) :: activation_checkpointing = .false.
    integer(c_size_t) :: bytes(0:5) = 0
    integer(c_size_t) :: total = 0
    real(c_double) :: shard_bytes = 0, replicate_bytes = 0, inter_node_bytes = 0
    real(c_double) :: compute_seconds = 0, comm_seconds = 0, seconds = 0
    logical(c_bool) :: fits = .false.
  end type
  ! What a program needs besides parameters and optimizer state to resume (FSDPTrainingState).
  type, bind(C), public :: fsdp_training_state
    integer(c_int64_t) :: step = 0
    integer(c_int64_t) :: data_cursor = 0
    integer(c_int64_t) :: rng(4) = 0 ! uint64_t in C: the same bits
  end type

  ! Initializers are bind(C) functions returning FSDP_SUCCESS or an error code
  ! (raise it with fsdp_error to give a message).  A shard initializer fills
  ! elements [first, last) of parameter id, flattened in memory order, into
  ! values (last - first elements of the unit's type, real(c_float) by default).
  abstract interface
    function fsdp_unit_init(unit, user) bind(C) result(ierr)
      import :: fsdp_flatparam, c_ptr, c_int
      type(fsdp_flatparam), intent(in) :: unit
      type(c_ptr), value :: user
      integer(c_int) :: ierr
    end function
    function fsdp_shard_init(unit, id, first, last, values, user) bind(C) result(ierr)
      import :: fsdp_flatparam, c_ptr, c_int, c_int64_t
      type(fsdp_flatparam), intent(in) :: unit
      integer(c_int), value :: id
      integer(c_int64_t), value :: first, last
      type(c_ptr), value :: values, user
      integer(c_int) :: ierr
    end function
  end interface
  public :: fsdp_unit_init, fsdp_shard_init

  ! ---------------------------------------------------------------- the procedures
  public :: fsdp_initialize, fsdp_finalize, fsdp_initialized, fsdp_get_version
  public :: fsdp_get_error_string, fsdp_set_error_mode, fsdp_get_last_error, fsdp_error_print_trace, fsdp_error, &
            fsdp_abort_on_error, fsdp_set_simd, fsdp_get_simd
  public :: fsdp_options_get_int, fsdp_options_get_real, fsdp_options_get_bool, fsdp_options_get_string, &
            fsdp_options_set_value, fsdp_options_clear_value, fsdp_options_insert_string
  public :: fsdp_log_view, fsdp_log_event_register, fsdp_log_event_begin, fsdp_log_event_end
  public :: fsdp_data_type_name, fsdp_sharding_strategy_name, fsdp_random_uniform
  public :: fsdp_shardgroup_create, fsdp_shardgroup_set_sharding_factor, fsdp_shardgroup_set_shard_domain, &
            fsdp_shardgroup_set_from_options, fsdp_shardgroup_set_up, fsdp_shardgroup_view, fsdp_shardgroup_destroy, &
            fsdp_shardgroup_get_comm, fsdp_shardgroup_get_shard_comm, fsdp_shardgroup_get_replicate_comm, &
            fsdp_shardgroup_get_node, fsdp_shardgroup_get_local_rank
  public :: fsdp_context_create, fsdp_context_set_sharding_strategy, fsdp_context_get_shard_group, &
            fsdp_context_set_unit_init, fsdp_context_set_shard_init, fsdp_context_set_sync_params, &
            fsdp_context_set_mixed_precision, fsdp_context_set_comm_engine, fsdp_context_set_backward_prefetch, &
            fsdp_context_set_wait_mode, fsdp_context_get_wait_mode, fsdp_context_wait, &
            fsdp_context_set_forward_prefetch, fsdp_context_set_limit_all_gathers, fsdp_context_set_device, &
            fsdp_context_set_checkpoint_keep, fsdp_context_set_check_finite, fsdp_context_set_from_options, &
            fsdp_context_set_memory_limit, &
            fsdp_context_set_shm_reduce, fsdp_context_set_shm_views, fsdp_context_get_shm_views, &
            fsdp_context_add_unit, fsdp_context_set_up, fsdp_context_begin_forward, fsdp_context_begin_backward, &
            fsdp_context_finish_backward, fsdp_context_zero_grad, fsdp_context_set_grad_sync, &
            fsdp_context_set_replicate_grad_sync, fsdp_context_broadcast_params, fsdp_context_synchronize, &
            fsdp_context_set_training_state, fsdp_context_get_training_state, fsdp_context_save, fsdp_context_load, &
            fsdp_context_get_sharding_strategy, fsdp_context_get_comm, fsdp_context_get_num_units, &
            fsdp_context_get_unit, fsdp_context_find_param, fsdp_context_get_sizes, fsdp_context_view, &
            fsdp_context_destroy
  public :: fsdp_flatparam_set_data_type, fsdp_flatparam_add_param, fsdp_flatparam_set_trainable, &
            fsdp_flatparam_unshard, fsdp_flatparam_reshard, fsdp_flatparam_reduce_grad, fsdp_flatparam_get_param, &
            fsdp_flatparam_get_grad, fsdp_flatparam_get_shard, fsdp_flatparam_get_grad_shard, &
            fsdp_flatparam_get_shard_range, fsdp_flatparam_get_name, fsdp_flatparam_get_state, &
            fsdp_flatparam_get_num_params, fsdp_flatparam_get_param_info, fsdp_flatparam_get_sizes
  public :: fsdp_optimizer_create, fsdp_optimizer_set_type, fsdp_optimizer_set_learning_rate, &
            fsdp_optimizer_set_weight_decay, fsdp_optimizer_add_param_group, fsdp_optimizer_get_param_settings, &
            fsdp_optimizer_set_momentum, fsdp_optimizer_set_betas, &
            fsdp_optimizer_set_eps, fsdp_optimizer_set_schedule, fsdp_optimizer_set_clip_grad_norm, &
            fsdp_optimizer_set_from_options, fsdp_optimizer_set_up, fsdp_optimizer_step, &
            fsdp_optimizer_clip_grad_norm, fsdp_optimizer_get_step, fsdp_optimizer_get_learning_rate, &
            fsdp_optimizer_get_grad_norm, fsdp_optimizer_view, fsdp_optimizer_destroy
  public :: fsdp_model_create, fsdp_model_set_wrap_policy, fsdp_model_set_seed, fsdp_model_set_from_options, &
            fsdp_model_set_up, fsdp_model_get_sizes, fsdp_model_forward, fsdp_model_loss, fsdp_model_backward, &
            fsdp_model_train_step, fsdp_model_predict, fsdp_model_view, fsdp_model_destroy, &
            fsdp_model_get_tokens, fsdp_model_get_sample_shape, fsdp_model_set_activation_checkpointing, &
            fsdp_model_get_activation_checkpointing
  public :: fsdp_plan_create, fsdp_plan_set_model, fsdp_plan_set_job, fsdp_plan_set_topology, fsdp_plan_set_batch, &
            fsdp_plan_set_memory_budget, fsdp_plan_set_optimizer, fsdp_plan_set_rates, fsdp_plan_get_rates, &
            fsdp_plan_set_from_options, fsdp_plan_probe, fsdp_plan_set_up, fsdp_plan_get_num_candidates, &
            fsdp_plan_get_candidate, fsdp_plan_get_choice, fsdp_plan_view, fsdp_plan_destroy

  ! Communicators: an integer handle (use mpi) or, where MPI has mpi_f08, a type(MPI_Comm).
  interface fsdp_shardgroup_create
    module procedure shardgroup_create_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure shardgroup_create_f08
#endif
  end interface
  interface fsdp_context_create
    module procedure context_create_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure context_create_f08
#endif
  end interface
  interface fsdp_plan_create
    module procedure plan_create_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure plan_create_f08
#endif
  end interface
  interface fsdp_context_get_comm
    module procedure context_get_comm_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure context_get_comm_f08
#endif
  end interface
  interface fsdp_shardgroup_get_comm
    module procedure shardgroup_get_comm_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure shardgroup_get_comm_f08
#endif
  end interface
  interface fsdp_shardgroup_get_shard_comm
    module procedure shardgroup_get_shard_comm_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure shardgroup_get_shard_comm_f08
#endif
  end interface
  interface fsdp_shardgroup_get_replicate_comm
    module procedure shardgroup_get_replicate_comm_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure shardgroup_get_replicate_comm_f08
#endif
  end interface
  ! Requests, as communicators: an integer handle or a type(MPI_Request).
  interface fsdp_context_wait
    module procedure context_wait_int
#ifdef FSDP_HAVE_MPI_F08
    module procedure context_wait_f08
#endif
  end interface
  ! Views of rank 1 (any parameter, flattened in memory order) to 4.
  interface fsdp_flatparam_get_param
    module procedure get_param_1, get_param_2, get_param_3, get_param_4
  end interface
  interface fsdp_flatparam_get_grad
    module procedure get_grad_1, get_grad_2, get_grad_3, get_grad_4
  end interface
  ! MSE with real targets(out, n); cross-entropy with integer labels(n) in [0, out).
  interface fsdp_model_loss
    module procedure model_loss_mse, model_loss_ce
  end interface
  !> One training step on this rank's batch: zero the gradients, forward, the loss, backward, the optimizer's step.
  !! The loss is MSE for a real target(out, n) and cross-entropy for integer(fsdp_int64) labels(n) in [0, out);
  !! the gradients of the loss (scale 1) are averaged over the ranks as backward reduce-scatters them.  The same
  !! as fsdp_context_zero_grad, fsdp_model_forward, fsdp_model_loss, fsdp_model_backward and fsdp_optimizer_step
  !! in turn; it stops at the first error.
  !! @collective Collective on the model's context's communicator: every rank calls it, each with its own batch
  !! (n may differ across ranks).
  !! @param[in,out] model   the model, set up (it remembers the batch for its backward)
  !! @param[in] opt         the context's optimizer, set up
  !! @param[in] x           the inputs, x(in, n): n samples as columns; contiguous
  !! @param[in] target      the MSE target, target(out, n) (or labels(n) of kind fsdp_int64: cross-entropy)
  !! @param[out] loss       this rank's loss before the step (0 on an error)
  !! @param[out] ierr       FSDP_SUCCESS or the error
  !! @retval FSDP_ERR_ARG         x's first extent is not the model's in, target's shape is not (out, n), or a label
  !!                              is not in [0, out)
  !! @retval FSDP_ERR_STATE       the model or the optimizer is not set up, or a unit is not sharded
  !! @retval FSDP_ERR_NOT_FINITE  the gradient norm is NaN or infinite (-fsdp_check_finite): no step was taken
  !! @retval FSDP_ERR_MEM         a buffer cannot be allocated
  !! @retval FSDP_ERR_MPI         an MPI call failed
  !! @retval FSDP_ERR_CUDA        on a CUDA context, a CUDA call failed
  !! @see FSDPModelForward, FSDPModelLoss, FSDPModelBackward, FSDPOptimizerStep, FSDPContextZeroGrad
  interface fsdp_model_train_step
    module procedure model_train_step_mse, model_train_step_ce
  end interface

  ! ---------------------------------------------------------------- the C functions
  ! Each C function the module calls, by its C name (bind(C, name=...)).
  interface
    function c_strlen(s) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function
    integer(c_int) function c_initialize(argc, args) bind(C, name="fsdpf_initialize")
      import :: c_int, c_char
      integer(c_int), value :: argc
      character(kind=c_char), intent(in) :: args(*)
    end function
    integer(c_int) function c_initialized(flag) bind(C, name="FSDPInitialized")
      import :: c_int, c_bool
      logical(c_bool), intent(out) :: flag
    end function
    integer(c_int) function c_get_version(major, minor, patch) bind(C, name="FSDPGetVersion")
      import :: c_int
      integer(c_int), intent(out) :: major, minor, patch
    end function
    integer(c_int) function c_set_error_mode(mode) bind(C, name="FSDPSetErrorMode")
      import :: c_int
      integer(c_int), value :: mode
    end function
    integer(c_int) function c_get_last_error(code, message, nframes) bind(C, name="FSDPGetLastError")
      import :: c_int, c_ptr
      integer(c_int), intent(out) :: code
      type(c_ptr), intent(out) :: message
      integer(c_int), intent(out) :: nframes
    end function
    integer(c_int) function c_raise(code, func, message) bind(C, name="fsdpf_raise")
      import :: c_int, c_char
      integer(c_int), value :: code
      character(kind=c_char), intent(in) :: func(*), message(*)
    end function
    integer(c_int) function c_frame(code, func) bind(C, name="fsdpf_frame")
      import :: c_int, c_char
      integer(c_int), value :: code
      character(kind=c_char), intent(in) :: func(*)
    end function
    integer(c_int) function c_traceback(code, line, file) bind(C, name="fsdpf_traceback")
      import :: c_int, c_char
      integer(c_int), value :: code, line
      character(kind=c_char), intent(in) :: file(*)
    end function
    subroutine c_abort(code) bind(C, name="fsdpf_abort")
      import :: c_int
      integer(c_int), value :: code
    end subroutine
    integer(c_int) function c_options_get_int(name, help, defval, min, max, value, set) &
      bind(C, name="FSDPOptionsGetInt")
      import :: c_int, c_int64_t, c_char, c_bool
      character(kind=c_char), intent(in) :: name(*), help(*)
      integer(c_int64_t), value :: defval, min, max
      integer(c_int64_t), intent(out) :: value
      logical(c_bool), intent(out) :: set
    end function
    integer(c_int) function c_options_get_real(name, help, defval, value, set) bind(C, name="FSDPOptionsGetReal")
      import :: c_int, c_double, c_char, c_bool
      character(kind=c_char), intent(in) :: name(*), help(*)
      real(c_double), value :: defval
      real(c_double), intent(out) :: value
      logical(c_bool), intent(out) :: set
    end function
    integer(c_int) function c_options_get_bool(name, help, defval, value, set) bind(C, name="FSDPOptionsGetBool")
      import :: c_int, c_char, c_bool
      character(kind=c_char), intent(in) :: name(*), help(*)
      logical(c_bool), value :: defval
      logical(c_bool), intent(out) :: value, set
    end function
    integer(c_int) function c_options_get_string(name, help, defval, value, len, set) &
      bind(C, name="FSDPOptionsGetString")
      import :: c_int, c_char, c_bool, c_size_t
      character(kind=c_char), intent(in) :: name(*), help(*), defval(*)
      character(kind=c_char), intent(out) :: value(*)
      integer(c_size_t), value :: len
      logical(c_bool), intent(out) :: set
    end function
    integer(c_int) function c_options_set_value(name, value) bind(C, name="FSDPOptionsSetValue")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*), value(*)
    end function
    integer(c_int) function c_options_clear_value(name) bind(C, name="FSDPOptionsClearValue")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_options_insert_string(options) bind(C, name="FSDPOptionsInsertString")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: options(*)
    end function
    integer(c_int) function c_log_view(viewer) bind(C, name="FSDPLogView")
      import :: c_int, c_ptr
      type(c_ptr), value :: viewer
    end function
    integer(c_int) function c_log_event_register(name, event) bind(C, name="FSDPLogEventRegister")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), intent(out) :: event
    end function
    integer(c_int) function c_log_event_begin(event) bind(C, name="FSDPLogEventBegin")
      import :: c_int
      integer(c_int), value :: event
    end function
    integer(c_int) function c_log_event_end(event, bytes) bind(C, name="FSDPLogEventEnd")
      import :: c_int, c_int64_t
      integer(c_int), value :: event
      integer(c_int64_t), value :: bytes
    end function
    integer(c_int) function c_random_uniform(seed, stream, first, last, low, high, values) &
      bind(C, name="FSDPRandomUniform")
      import :: c_int, c_int64_t, c_char, c_double, c_float
      integer(c_int64_t), value :: seed, first, last
      character(kind=c_char), intent(in) :: stream(*)
      real(c_double), value :: low, high
      real(c_float), intent(out) :: values(*)
    end function
    integer(c_int) function c_shardgroup_view(group, viewer) bind(C, name="ShardGroupView")
      import :: c_int, c_ptr
      type(c_ptr), value :: group, viewer
    end function
    integer(c_int) function c_shardgroup_get_comm(group, which, comm, index, size) &
      bind(C, name="fsdpf_shardgroup_get_comm")
      import :: c_int, c_ptr
      type(c_ptr), value :: group
      integer(c_int), value :: which
      integer(c_int), intent(out) :: comm, index, size
    end function
    integer(c_int) function c_context_get_comm(ctx, comm) bind(C, name="fsdpf_context_get_comm")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), intent(out) :: comm
    end function
    integer(c_int) function c_context_set_init(ctx, kind, fn, user) bind(C, name="fsdpf_context_set_init")
      import :: c_int, c_ptr, c_funptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: kind
      type(c_funptr), value :: fn
      type(c_ptr), value :: user
    end function
    integer(c_int) function c_context_set_mixed_precision(ctx, param_dtype, reduce_dtype) &
      bind(C, name="FSDPContextSetMixedPrecision")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: param_dtype, reduce_dtype
    end function
    integer(c_int) function c_context_add_unit(ctx, name, unit) bind(C, name="FSDPContextAddUnit")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), intent(out) :: unit
    end function
    integer(c_int) function c_context_get_unit(ctx, i, unit) bind(C, name="FSDPContextGetUnit")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: i
      type(c_ptr), intent(out) :: unit
    end function
    integer(c_int) function c_context_find_param(ctx, name, unit, id) bind(C, name="FSDPContextFindParam")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), intent(out) :: unit
      integer(c_int), intent(out) :: id
    end function
    integer(c_int) function c_flatparam_add_param(unit, name, ndim, shape, id) bind(C, name="FlatParamAddParam")
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: unit
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: ndim
      integer(c_int64_t), intent(in) :: shape(*)
      integer(c_int), intent(out) :: id
    end function
    integer(c_int) function c_flatparam_set_trainable(unit, id, trainable) bind(C, name="FlatParamSetTrainable")
      import :: c_int, c_ptr, c_bool
      type(c_ptr), value :: unit
      integer(c_int), value :: id
      logical(c_bool), value :: trainable
    end function
    integer(c_int) function c_flatparam_get_shard_range(unit, id, first, last, offset) &
      bind(C, name="FlatParamGetShardRange")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: unit
      integer(c_int), value :: id
      integer(c_int64_t), intent(out) :: first, last, offset
    end function
    integer(c_int) function c_flatparam_get_param_info(unit, id, name, ndim, shape, numel) &
      bind(C, name="FlatParamGetParamInfo")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: unit
      integer(c_int), value :: id
      type(c_ptr), intent(out) :: name
      integer(c_int), intent(out) :: ndim
      type(c_ptr), intent(out) :: shape
      integer(c_int64_t), intent(out) :: numel
    end function
    integer(c_int) function c_optimizer_set_momentum(opt, momentum, nesterov) bind(C, name="FSDPOptimizerSetMomentum")
      import :: c_int, c_ptr, c_double, c_bool
      type(c_ptr), value :: opt
      real(c_double), value :: momentum
      logical(c_bool), value :: nesterov
    end function
    integer(c_int) function c_optimizer_set_betas(opt, beta1, beta2) bind(C, name="FSDPOptimizerSetBetas")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: opt
      real(c_double), value :: beta1, beta2
    end function
    integer(c_int) function c_optimizer_set_schedule(opt, schedule, warmup, total) bind(C, name="FSDPOptimizerSetSchedule")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: opt
      integer(c_int), value :: schedule
      integer(c_int64_t), value :: warmup, total
    end function
    integer(c_int) function c_optimizer_clip_grad_norm(opt, max_norm, total) bind(C, name="FSDPOptimizerClipGradNorm")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: opt
      real(c_double), value :: max_norm
      real(c_double), intent(out) :: total
    end function
    integer(c_int) function c_model_create(ctx, spec, model) bind(C, name="FSDPModelCreate")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char), intent(in) :: spec(*)
      type(c_ptr), intent(out) :: model
    end function
    integer(c_int) function c_model_set_wrap_policy(model, policy, min_numel) bind(C, name="FSDPModelSetWrapPolicy")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: model
      integer(c_int), value :: policy
      integer(c_int64_t), value :: min_numel
    end function
    integer(c_int) function c_model_get_sample_shape(model, output, ndim, shape) bind(C, name="FSDPModelGetSampleShape")
      import :: c_int, c_ptr, c_int64_t, c_bool
      type(c_ptr), value :: model
      logical(c_bool), value :: output
      integer(c_int), intent(out) :: ndim
      integer(c_int64_t), intent(out) :: shape(4)
    end function
    integer(c_int) function c_model_get_tokens(model, ctx, vocab) bind(C, name="FSDPModelGetTokens")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: model
      integer(c_int64_t), intent(out) :: ctx, vocab
    end function
    integer(c_int) function c_model_set_activation_checkpointing(model, on) &
      bind(C, name="FSDPModelSetActivationCheckpointing")
      import :: c_int, c_ptr, c_bool
      type(c_ptr), value :: model
      logical(c_bool), value :: on
    end function
    integer(c_int) function c_model_get_activation_checkpointing(model, on) &
      bind(C, name="FSDPModelGetActivationCheckpointing")
      import :: c_int, c_ptr, c_bool
      type(c_ptr), value :: model
      logical(c_bool), intent(out) :: on
    end function
    integer(c_int) function c_model_set_seed(model, seed) bind(C, name="FSDPModelSetSeed")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: model
      integer(c_int64_t), value :: seed
    end function
    integer(c_int) function c_model_forward(model, n, x, y) bind(C, name="FSDPModelForward")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: model
      integer(c_int64_t), value :: n
      type(c_ptr), value :: x
      type(c_ptr), intent(out) :: y
    end function
    integer(c_int) function c_model_loss(model, type, target, scale, loss, dy) bind(C, name="FSDPModelLoss")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: model
      integer(c_int), value :: type
      type(c_ptr), value :: target
      real(c_double), value :: scale
      real(c_double), intent(out) :: loss
      type(c_ptr), intent(out) :: dy
    end function
    integer(c_int) function c_model_backward(model, dy) bind(C, name="FSDPModelBackward")
      import :: c_int, c_ptr
      type(c_ptr), value :: model, dy
    end function
  end interface

  ! One interface body per C function, even where signatures repeat: gfortran
  ! 12 loses VALUE in `procedure(iface), bind(C) :: f` declarations.
  interface
    integer(c_int) function c_finalize() bind(C, name="fsdpf_finalize")
      import :: c_int
    end function
    integer(c_int) function c_error_print_trace() bind(C, name="fsdpf_error_print_trace")
      import :: c_int
    end function
    type(c_ptr) function c_get_error_string(v) bind(C, name="FSDPGetErrorString")
      import :: c_ptr, c_int
      integer(c_int), value :: v
    end function
    type(c_ptr) function c_data_type_name(v) bind(C, name="FSDPDataTypeName")
      import :: c_ptr, c_int
      integer(c_int), value :: v
    end function
    type(c_ptr) function c_sharding_strategy_name(v) bind(C, name="FSDPShardingStrategyName")
      import :: c_ptr, c_int
      integer(c_int), value :: v
    end function
    integer(c_int) function c_shardgroup_create(comm, obj) bind(C, name="fsdpf_shardgroup_create")
      import :: c_ptr, c_int
      integer(c_int), intent(in) :: comm
      type(c_ptr), intent(out) :: obj
    end function
    integer(c_int) function c_shardgroup_set_sharding_factor(obj, v) bind(C, name="ShardGroupSetShardingFactor")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_shardgroup_set_shard_domain(obj, v) bind(C, name="ShardGroupSetShardDomain")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_shardgroup_set_from_options(obj) bind(C, name="ShardGroupSetFromOptions")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_shardgroup_set_up(obj) bind(C, name="ShardGroupSetUp")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_shardgroup_destroy(obj) bind(C, name="ShardGroupDestroy")
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: obj
    end function
    integer(c_int) function c_context_create(comm, obj) bind(C, name="fsdpf_context_create")
      import :: c_ptr, c_int
      integer(c_int), intent(in) :: comm
      type(c_ptr), intent(out) :: obj
    end function
    integer(c_int) function c_context_set_sharding_strategy(obj, v) bind(C, name="FSDPContextSetShardingStrategy")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_get_shard_group(obj, v) bind(C, name="FSDPContextGetShardGroup")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      type(c_ptr), intent(out) :: v
    end function
    integer(c_int) function c_context_set_sync_params(obj, v) bind(C, name="FSDPContextSetSyncParams")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_set_comm_engine(obj, v) bind(C, name="FSDPContextSetCommEngine")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_set_wait_mode(obj, v) bind(C, name="FSDPContextSetWaitMode")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_get_wait_mode(obj, mode, node_ranks, node_cpus) &
        bind(C, name="FSDPContextGetWaitMode")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: mode, node_ranks, node_cpus
    end function
    integer(c_int) function c_context_wait(obj, request) bind(C, name="fsdpf_context_wait")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(inout) :: request
    end function
    integer(c_int) function c_set_simd(level) bind(C, name="FSDPSetSimd")
      import :: c_int
      integer(c_int), value :: level
    end function
    integer(c_int) function c_get_simd(level, best) bind(C, name="FSDPGetSimd")
      import :: c_int
      integer(c_int), intent(out) :: level, best
    end function
    integer(c_int) function c_context_set_backward_prefetch(obj, v) bind(C, name="FSDPContextSetBackwardPrefetch")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_set_forward_prefetch(obj, v) bind(C, name="FSDPContextSetForwardPrefetch")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_set_limit_all_gathers(obj, v) bind(C, name="FSDPContextSetLimitAllGathers")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_set_device(obj, v) bind(C, name="FSDPContextSetDevice")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_set_checkpoint_keep(obj, v) bind(C, name="FSDPContextSetCheckpointKeep")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_context_set_memory_limit(obj, v) bind(C, name="FSDPContextSetMemoryLimit")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: obj
      integer(c_int64_t), value :: v
    end function
    integer(c_int) function c_context_set_shm_reduce(obj, v) bind(C, name="FSDPContextSetShmReduce")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_set_shm_views(obj, v) bind(C, name="FSDPContextSetShmViews")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_get_shm_views(obj, v) bind(C, name="FSDPContextGetShmViews")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), intent(out) :: v
    end function
    integer(c_int) function c_context_set_check_finite(obj, v) bind(C, name="FSDPContextSetCheckFinite")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_set_from_options(obj) bind(C, name="FSDPContextSetFromOptions")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_set_up(obj) bind(C, name="FSDPContextSetUp")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_begin_forward(obj) bind(C, name="FSDPContextBeginForward")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_begin_backward(obj) bind(C, name="FSDPContextBeginBackward")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_finish_backward(obj) bind(C, name="FSDPContextFinishBackward")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_zero_grad(obj) bind(C, name="FSDPContextZeroGrad")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_set_grad_sync(obj, v) bind(C, name="FSDPContextSetGradSync")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_set_replicate_grad_sync(obj, v) bind(C, name="FSDPContextSetReplicateGradSync")
      import :: c_ptr, c_int, c_bool
      type(c_ptr), value :: obj
      logical(c_bool), value :: v
    end function
    integer(c_int) function c_context_broadcast_params(obj) bind(C, name="FSDPContextBroadcastParams")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_synchronize(obj) bind(C, name="FSDPContextSynchronize")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_context_get_sharding_strategy(obj, v) bind(C, name="FSDPContextGetShardingStrategy")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_context_get_device(obj, v) bind(C, name="FSDPContextGetDevice")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_context_get_num_units(obj, v) bind(C, name="FSDPContextGetNumUnits")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_context_destroy(obj) bind(C, name="fsdpf_context_destroy")
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: obj
    end function
    integer(c_int) function c_flatparam_set_data_type(obj, v) bind(C, name="FlatParamSetDataType")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_flatparam_unshard(obj) bind(C, name="FlatParamUnshard")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_flatparam_reshard(obj) bind(C, name="FlatParamReshard")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_flatparam_reduce_grad(obj) bind(C, name="FlatParamReduceGrad")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_flatparam_get_name(obj, v) bind(C, name="FlatParamGetName")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      type(c_ptr), intent(out) :: v
    end function
    integer(c_int) function c_flatparam_get_state(obj, v) bind(C, name="FlatParamGetState")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_flatparam_get_num_params(obj, v) bind(C, name="FlatParamGetNumParams")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_flatparam_get_view_data_type(obj, v) bind(C, name="FlatParamGetViewDataType")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_flatparam_get_data_type(obj, v) bind(C, name="FlatParamGetDataType")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: v
    end function
    integer(c_int) function c_optimizer_set_type(obj, v) bind(C, name="FSDPOptimizerSetType")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      integer(c_int), value :: v
    end function
    integer(c_int) function c_optimizer_set_learning_rate(obj, v) bind(C, name="FSDPOptimizerSetLearningRate")
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: obj
      real(c_double), value :: v
    end function
    integer(c_int) function c_optimizer_set_weight_decay(obj, v) bind(C, name="FSDPOptimizerSetWeightDecay")
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: obj
      real(c_double), value :: v
    end function
    integer(c_int) function c_optimizer_add_param_group(obj, pattern, weight_decay, lr_scale) &
        bind(C, name="FSDPOptimizerAddParamGroup")
      import :: c_ptr, c_int, c_double, c_char
      type(c_ptr), value :: obj
      character(kind=c_char), intent(in) :: pattern(*)
      real(c_double), value :: weight_decay, lr_scale
    end function
    integer(c_int) function c_optimizer_get_param_settings(obj, name, weight_decay, lr_scale) &
        bind(C, name="FSDPOptimizerGetParamSettings")
      import :: c_ptr, c_int, c_double, c_char
      type(c_ptr), value :: obj
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), intent(out) :: weight_decay, lr_scale
    end function
    integer(c_int) function c_optimizer_set_eps(obj, v) bind(C, name="FSDPOptimizerSetEps")
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: obj
      real(c_double), value :: v
    end function
    integer(c_int) function c_optimizer_set_clip_grad_norm(obj, v) bind(C, name="FSDPOptimizerSetClipGradNorm")
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: obj
      real(c_double), value :: v
    end function
    integer(c_int) function c_optimizer_set_from_options(obj) bind(C, name="FSDPOptimizerSetFromOptions")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_optimizer_set_up(obj) bind(C, name="FSDPOptimizerSetUp")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_optimizer_step(obj) bind(C, name="FSDPOptimizerStep")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_optimizer_get_step(obj, v) bind(C, name="FSDPOptimizerGetStep")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: obj
      integer(c_int64_t), intent(out) :: v
    end function
    integer(c_int) function c_optimizer_get_learning_rate(obj, v) bind(C, name="FSDPOptimizerGetLearningRate")
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: obj
      real(c_double), intent(out) :: v
    end function
    integer(c_int) function c_optimizer_get_grad_norm(obj, v) bind(C, name="FSDPOptimizerGetGradNorm")
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: obj
      real(c_double), intent(out) :: v
    end function
    integer(c_int) function c_optimizer_destroy(obj) bind(C, name="FSDPOptimizerDestroy")
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: obj
    end function
    integer(c_int) function c_model_set_from_options(obj) bind(C, name="FSDPModelSetFromOptions")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_model_set_up(obj) bind(C, name="FSDPModelSetUp")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_model_destroy(obj) bind(C, name="FSDPModelDestroy")
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: obj
    end function
    integer(c_int) function c_model_get_context(obj, v) bind(C, name="FSDPModelGetContext")
      import :: c_ptr, c_int
      type(c_ptr), value :: obj
      type(c_ptr), intent(out) :: v
    end function
    integer(c_int) function c_shardgroup_get_node(group, a, b) bind(C, name="ShardGroupGetNode")
      import :: c_int, c_ptr
      type(c_ptr), value :: group
      integer(c_int), intent(out) :: a, b
    end function
    integer(c_int) function c_shardgroup_get_local_rank(group, a, b) bind(C, name="ShardGroupGetLocalRank")
      import :: c_int, c_ptr
      type(c_ptr), value :: group
      integer(c_int), intent(out) :: a, b
    end function
    integer(c_int) function c_context_set_training_state(ctx, state) bind(C, name="FSDPContextSetTrainingState")
      import :: c_int, c_ptr, fsdp_training_state
      type(c_ptr), value :: ctx
      type(fsdp_training_state), intent(inout) :: state
    end function
    integer(c_int) function c_context_get_training_state(ctx, state) bind(C, name="FSDPContextGetTrainingState")
      import :: c_int, c_ptr, fsdp_training_state
      type(c_ptr), value :: ctx
      type(fsdp_training_state), intent(inout) :: state
    end function
    integer(c_int) function c_context_save(ctx, opt, path) bind(C, name="FSDPContextSave")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx, opt
      character(kind=c_char), intent(in) :: path(*)
    end function
    integer(c_int) function c_context_load(ctx, opt, path) bind(C, name="FSDPContextLoad")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx, opt
      character(kind=c_char), intent(in) :: path(*)
    end function
    integer(c_int) function c_context_get_sizes(obj, a, b, c) bind(C, name="FSDPContextGetSizes")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: obj
      integer(c_int64_t), intent(out) :: a, b, c
    end function
    integer(c_int) function c_flatparam_get_sizes(obj, a, b, c) bind(C, name="FlatParamGetSizes")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: obj
      integer(c_int64_t), intent(out) :: a, b, c
    end function
    integer(c_int) function c_model_get_sizes(obj, a, b, c) bind(C, name="FSDPModelGetSizes")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: obj
      integer(c_int64_t), intent(out) :: a, b, c
    end function
    integer(c_int) function c_context_view(obj, viewer) bind(C, name="FSDPContextView")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj, viewer
    end function
    integer(c_int) function c_optimizer_view(obj, viewer) bind(C, name="FSDPOptimizerView")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj, viewer
    end function
    integer(c_int) function c_model_view(obj, viewer) bind(C, name="FSDPModelView")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj, viewer
    end function
    integer(c_int) function c_optimizer_create(parent, obj) bind(C, name="FSDPOptimizerCreate")
      import :: c_int, c_ptr
      type(c_ptr), value :: parent
      type(c_ptr), intent(out) :: obj
    end function
    integer(c_int) function c_flatparam_get_param(unit, id, values) bind(C, name="FlatParamGetParam")
      import :: c_int, c_ptr
      type(c_ptr), value :: unit
      integer(c_int), value :: id
      type(c_ptr), intent(out) :: values
    end function
    integer(c_int) function c_flatparam_get_grad(unit, id, values) bind(C, name="FlatParamGetGrad")
      import :: c_int, c_ptr
      type(c_ptr), value :: unit
      integer(c_int), value :: id
      type(c_ptr), intent(out) :: values
    end function
    integer(c_int) function c_flatparam_get_shard_(unit, values, numel) bind(C, name="FlatParamGetShard")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: unit
      type(c_ptr), intent(out) :: values
      integer(c_int64_t), intent(out) :: numel
    end function
    integer(c_int) function c_flatparam_get_grad_shard(unit, values, numel) bind(C, name="FlatParamGetGradShard")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: unit
      type(c_ptr), intent(out) :: values
      integer(c_int64_t), intent(out) :: numel
    end function
    integer(c_int) function c_plan_create(comm, obj) bind(C, name="fsdpf_plan_create")
      import :: c_ptr, c_int
      integer(c_int), intent(in) :: comm
      type(c_ptr), intent(out) :: obj
    end function
    integer(c_int) function c_plan_set_model(obj, spec) bind(C, name="FSDPPlanSetModel")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: obj
      character(kind=c_char), intent(in) :: spec(*)
    end function
    integer(c_int) function c_plan_set_job(obj, nodes, ranks) bind(C, name="FSDPPlanSetJob")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj
      integer(c_int), value :: nodes, ranks
    end function
    integer(c_int) function c_plan_set_topology(obj, source) bind(C, name="FSDPPlanSetTopology")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: obj
      character(kind=c_char), intent(in) :: source(*)
    end function
    integer(c_int) function c_plan_set_batch(obj, batch) bind(C, name="FSDPPlanSetBatch")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: obj
      integer(c_int64_t), value :: batch
    end function
    integer(c_int) function c_plan_set_memory_budget(obj, bytes) bind(C, name="FSDPPlanSetMemoryBudget")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: obj
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function c_plan_set_optimizer(obj, type, momentum) bind(C, name="FSDPPlanSetOptimizer")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: obj
      integer(c_int), value :: type
      real(c_double), value :: momentum
    end function
    integer(c_int) function c_plan_set_rates(obj, flops, intra, inter, latency) bind(C, name="FSDPPlanSetRates")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: obj
      real(c_double), value :: flops, intra, inter, latency
    end function
    integer(c_int) function c_plan_get_rates(obj, flops, intra, inter, latency) bind(C, name="FSDPPlanGetRates")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: obj
      real(c_double), intent(out) :: flops, intra, inter, latency
    end function
    integer(c_int) function c_plan_set_from_options(obj) bind(C, name="FSDPPlanSetFromOptions")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_plan_probe(obj) bind(C, name="FSDPPlanProbe")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_plan_set_up(obj) bind(C, name="FSDPPlanSetUp")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj
    end function
    integer(c_int) function c_plan_get_num_candidates(obj, n) bind(C, name="FSDPPlanGetNumCandidates")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: n
    end function
    integer(c_int) function c_plan_get_candidate(obj, i, cand) bind(C, name="FSDPPlanGetCandidate")
      import :: c_int, c_ptr, fsdp_plan_candidate
      type(c_ptr), value :: obj
      integer(c_int), value :: i
      type(fsdp_plan_candidate), intent(out) :: cand
    end function
    integer(c_int) function c_plan_get_choice(obj, index, options, len) bind(C, name="FSDPPlanGetChoice")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: obj
      integer(c_int), intent(out) :: index
      character(kind=c_char), intent(out) :: options(*)
      integer(c_size_t), value :: len
    end function
    integer(c_int) function c_plan_view(obj, viewer) bind(C, name="FSDPPlanView")
      import :: c_int, c_ptr
      type(c_ptr), value :: obj, viewer
    end function
    integer(c_int) function c_plan_destroy(obj) bind(C, name="FSDPPlanDestroy")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: obj
    end function
  end interface

contains

  ! ---------------------------------------------------------------- helpers

  ! A NUL-terminated copy of s without its trailing blanks.
  pure function cstr(s) result(r)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=:), allocatable :: r
    r = trim(s)//c_null_char
  end function

  ! Copy a C string into s, truncated or blank-padded.
  subroutine fstr(p, s)
    type(c_ptr), intent(in) :: p
    character(len=*), intent(out) :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    s = ''
    if (.not. c_associated(p)) return
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    do i = 1, min(n, len(s))
      s(i:i) = chars(i)
    end do
  end subroutine

  ! An error the module finds itself, recorded like the library's own; the
  ! message names the Fortran call (func), as C's messages name C's.
  ! A C call's code; an error's traceback gains the module's call that made
  ! it (fsdp_context_set_up), so that a Fortran program sees its own name.
  integer function named(func, code) result(ierr)
    character(len=*), intent(in) :: func
    integer(c_int), intent(in) :: code
    ierr = code
    if (code /= FSDP_SUCCESS) ierr = c_frame(code, cstr(func))
  end function

  integer function raise(code, func, message) result(ierr)
    integer, intent(in) :: code
    character(len=*), intent(in) :: func, message
    ierr = c_raise(int(code, c_int), cstr(func), cstr(func//': '//message))
  end function

  ! ---------------------------------------------------------------- initialization

  ! Reads -fsdp_* options from the command line and FSDP_OPTIONS; initializes
  ! MPI (MPI_THREAD_MULTIPLE) unless the program did.
  subroutine fsdp_initialize(ierr)
    integer, intent(out) :: ierr
    character(len=:), allocatable :: args, arg
    integer :: i, n, length
    args = ''
    do i = 0, command_argument_count()
      call get_command_argument(i, length=length)
      allocate (character(len=length) :: arg)
      call get_command_argument(i, arg)
      args = args//arg//c_null_char
      deallocate (arg)
    end do
    n = command_argument_count() + 1
    ierr = named('fsdp_initialize', c_initialize(int(n, c_int), args))
  end subroutine

  ! Prints -fsdp_log_view's report; finalizes MPI only when fsdp_initialize initialized it.
  subroutine fsdp_finalize(ierr)
    integer, intent(out) :: ierr
    ierr = named('fsdp_finalize', c_finalize())
  end subroutine

  subroutine fsdp_initialized(flag, ierr)
    logical, intent(out) :: flag
    integer, intent(out) :: ierr
    logical(c_bool) :: f
    ierr = named('fsdp_initialized', c_initialized(f))
    flag = f
  end subroutine

  subroutine fsdp_get_version(major, minor, patch, ierr)
    integer, intent(out) :: major, minor, patch, ierr
    ierr = named('fsdp_get_version', c_get_version(major, minor, patch))
  end subroutine

  ! ---------------------------------------------------------------- errors

  subroutine fsdp_get_error_string(code, string)
    integer, intent(in) :: code
    character(len=*), intent(out) :: string
    call fstr(c_get_error_string(int(code, c_int)), string)
  end subroutine

  ! The host kernels' SIMD path (FSDP_SIMD_GENERIC, _AVX2, _AVX512), and the best this CPU runs.
  subroutine fsdp_set_simd(level, ierr)
    integer, intent(in) :: level
    integer, intent(out) :: ierr
    ierr = named('fsdp_set_simd', c_set_simd(int(level, c_int)))
  end subroutine

  subroutine fsdp_get_simd(level, best, ierr)
    integer, intent(out) :: level, best, ierr
    integer(c_int) :: l, b
    ierr = named('fsdp_get_simd', c_get_simd(l, b))
    level = int(l)
    best = int(b)
  end subroutine

  subroutine fsdp_set_error_mode(mode, ierr)
    integer, intent(in) :: mode
    integer, intent(out) :: ierr
    ierr = named('fsdp_set_error_mode', c_set_error_mode(int(mode, c_int)))
  end subroutine

  ! The last error on this thread: its code and message (FSDP_SUCCESS and '' when none).
  subroutine fsdp_get_last_error(code, message, ierr)
    integer, intent(out) :: code
    character(len=*), intent(out) :: message
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int) :: nframes
    ierr = named('fsdp_get_last_error', c_get_last_error(code, p, nframes))
    call fstr(p, message)
  end subroutine

  subroutine fsdp_error_print_trace(ierr)
    integer, intent(out) :: ierr
    ierr = named('fsdp_error_print_trace', c_error_print_trace())
  end subroutine

  ! For initializers: raise code with a message and return it (ierr = fsdp_error(...)).
  integer function fsdp_error(code, message) result(ierr)
    integer, intent(in) :: code
    character(len=*), intent(in) :: message
    ierr = c_raise(int(code, c_int), cstr('Fortran initializer'), cstr(message))
  end function

  !> At a program's top level: on an error, print its traceback and abort the job.
  !! Does nothing when ierr is FSDP_SUCCESS.  Otherwise adds a traceback frame with file and line (when both are
  !! given: FSDPCallA in fsdpf.h passes the program's own) to the last error, prints the traceback and calls
  !! MPI_Abort on MPI_COMM_WORLD with ierr as the exit code.
  !! @collective Not collective: one rank with an error ends the whole job.
  !! @param[in] ierr  the code a call returned
  !! @param[in] line  optional: the program's line, for the traceback
  !! @param[in] file  optional: the program's file, for the traceback
  !! @errors None: it returns only when ierr is FSDP_SUCCESS.
  !! @see FSDPErrorAbort, FSDPErrorTraceback, FSDPErrorPrintTrace
  subroutine fsdp_abort_on_error(ierr, line, file)
    integer, intent(in) :: ierr
    integer, intent(in), optional :: line
    character(len=*), intent(in), optional :: file
    integer(c_int) :: code
    if (ierr == FSDP_SUCCESS) return
    code = int(ierr, c_int)
    if (present(line) .and. present(file)) code = c_traceback(code, int(line, c_int), cstr(file))
    call c_abort(code)
  end subroutine

  ! ---------------------------------------------------------------- options

  subroutine fsdp_options_get_int(name, help, defval, value, set, ierr)
    character(len=*), intent(in) :: name, help
    integer, intent(in) :: defval
    integer, intent(out) :: value
    logical, intent(out) :: set
    integer, intent(out) :: ierr
    integer(c_int64_t) :: v
    logical(c_bool) :: s
    ! The option's range is the default integer's.
    ierr = named('fsdp_options_get_int', &
      c_options_get_int(cstr(name), cstr(help), int(defval, c_int64_t), -int(huge(value), c_int64_t) - 1, &
                             int(huge(value), c_int64_t), v, s))
    value = int(v)
    set = s
  end subroutine

  subroutine fsdp_options_get_real(name, help, defval, value, set, ierr)
    character(len=*), intent(in) :: name, help
    real(c_double), intent(in) :: defval
    real(c_double), intent(out) :: value
    logical, intent(out) :: set
    integer, intent(out) :: ierr
    logical(c_bool) :: s
    ierr = named('fsdp_options_get_real', c_options_get_real(cstr(name), cstr(help), defval, value, s))
    set = s
  end subroutine

  subroutine fsdp_options_get_bool(name, help, defval, value, set, ierr)
    character(len=*), intent(in) :: name, help
    logical, intent(in) :: defval
    logical, intent(out) :: value, set
    integer, intent(out) :: ierr
    logical(c_bool) :: v, s
    ierr = named('fsdp_options_get_bool', c_options_get_bool(cstr(name), cstr(help), logical(defval, c_bool), v, s))
    value = v
    set = s
  end subroutine

  ! value gets the string, blank-padded; one longer than len(value) is an error.
  subroutine fsdp_options_get_string(name, help, defval, value, set, ierr)
    character(len=*), intent(in) :: name, help, defval
    character(len=*), intent(out) :: value
    logical, intent(out) :: set
    integer, intent(out) :: ierr
    character(kind=c_char) :: buf(len(value) + 1)
    logical(c_bool) :: s
    integer :: i
    buf = c_null_char
    ierr = named('fsdp_options_get_string', &
      c_options_get_string(cstr(name), cstr(help), cstr(defval), buf, int(size(buf), c_size_t), s))
    value = ''
    do i = 1, len(value)
      if (buf(i) == c_null_char) exit
      value(i:i) = buf(i)
    end do
    set = s
  end subroutine

  subroutine fsdp_options_set_value(name, value, ierr)
    character(len=*), intent(in) :: name, value
    integer, intent(out) :: ierr
    ierr = named('fsdp_options_set_value', c_options_set_value(cstr(name), cstr(value)))
  end subroutine

  subroutine fsdp_options_clear_value(name, ierr)
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    ierr = named('fsdp_options_clear_value', c_options_clear_value(cstr(name)))
  end subroutine

  subroutine fsdp_options_insert_string(options, ierr)
    character(len=*), intent(in) :: options
    integer, intent(out) :: ierr
    ierr = named('fsdp_options_insert_string', c_options_insert_string(cstr(options)))
  end subroutine

  ! ---------------------------------------------------------------- logging

  ! The -fsdp_log_view report now, on standard output (collective on MPI_COMM_WORLD).
  subroutine fsdp_log_view(ierr)
    integer, intent(out) :: ierr
    ierr = named('fsdp_log_view', c_log_view(c_null_ptr))
  end subroutine

  subroutine fsdp_log_event_register(name, event, ierr)
    character(len=*), intent(in) :: name
    integer, intent(out) :: event, ierr
    ierr = named('fsdp_log_event_register', c_log_event_register(cstr(name), event))
  end subroutine

  subroutine fsdp_log_event_begin(event, ierr)
    integer, intent(in) :: event
    integer, intent(out) :: ierr
    ierr = named('fsdp_log_event_begin', c_log_event_begin(int(event, c_int)))
  end subroutine

  subroutine fsdp_log_event_end(event, bytes, ierr)
    integer, intent(in) :: event
    integer(fsdp_int64), intent(in) :: bytes
    integer, intent(out) :: ierr
    ierr = named('fsdp_log_event_end', c_log_event_end(int(event, c_int), bytes))
  end subroutine

  ! ---------------------------------------------------------------- names and random numbers

  subroutine fsdp_data_type_name(dtype, name)
    integer, intent(in) :: dtype
    character(len=*), intent(out) :: name
    call fstr(c_data_type_name(int(dtype, c_int)), name)
  end subroutine

  subroutine fsdp_sharding_strategy_name(strategy, name)
    integer, intent(in) :: strategy
    character(len=*), intent(out) :: name
    call fstr(c_sharding_strategy_name(int(strategy, c_int)), name)
  end subroutine

  ! values(i) = element first + i - 1 of the stream, uniform in [low, high):
  ! the same numbers C's FSDPRandomUniform(seed, stream, first, first + size(values), ...) gives.
  subroutine fsdp_random_uniform(seed, stream, first, low, high, values, ierr)
    integer(fsdp_int64), intent(in) :: seed, first
    character(len=*), intent(in) :: stream
    real(c_double), intent(in) :: low, high
    real(c_float), intent(out), contiguous :: values(:)
    integer, intent(out) :: ierr
    ierr = named('fsdp_random_uniform', &
      c_random_uniform(seed, cstr(stream), first, first + size(values, kind=c_int64_t), low, high, values))
  end subroutine

  ! ---------------------------------------------------------------- ShardGroup

  subroutine shardgroup_create_int(comm, group, ierr)
    integer, intent(in) :: comm
    type(fsdp_shardgroup), intent(out) :: group
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_create', c_shardgroup_create(int(comm, c_int), group%ptr))
  end subroutine

  subroutine fsdp_shardgroup_set_sharding_factor(group, factor, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(in) :: factor
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_set_sharding_factor', &
      c_shardgroup_set_sharding_factor(group%ptr, int(factor, c_int)))
  end subroutine

  subroutine fsdp_shardgroup_set_shard_domain(group, domain, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(in) :: domain
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_set_shard_domain', c_shardgroup_set_shard_domain(group%ptr, int(domain, c_int)))
  end subroutine

  subroutine fsdp_shardgroup_set_from_options(group, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_set_from_options', c_shardgroup_set_from_options(group%ptr))
  end subroutine

  subroutine fsdp_shardgroup_set_up(group, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_set_up', c_shardgroup_set_up(group%ptr))
  end subroutine

  ! On standard output, collective on the group.
  subroutine fsdp_shardgroup_view(group, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_view', c_shardgroup_view(group%ptr, c_null_ptr))
  end subroutine

  subroutine fsdp_shardgroup_destroy(group, ierr)
    type(fsdp_shardgroup), intent(inout) :: group
    integer, intent(out) :: ierr
    ierr = named('fsdp_shardgroup_destroy', c_shardgroup_destroy(group%ptr))
  end subroutine

  ! The communicators belong to the group: do not free them.
  subroutine shardgroup_get_comm_int(group, comm, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: comm, ierr
    integer(c_int) :: index, size
    ierr = named('fsdp_shardgroup_get_comm', c_shardgroup_get_comm(group%ptr, 0_c_int, comm, index, size))
  end subroutine

  ! index: this rank's place in its shard group (0-based, as MPI ranks); factor: F.
  subroutine shardgroup_get_shard_comm_int(group, comm, index, factor, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: comm, index, factor, ierr
    ierr = named('fsdp_shardgroup_get_shard_comm', c_shardgroup_get_comm(group%ptr, 1_c_int, comm, index, factor))
  end subroutine

  subroutine shardgroup_get_replicate_comm_int(group, comm, index, size, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: comm, index, size, ierr
    ierr = named('fsdp_shardgroup_get_replicate_comm', c_shardgroup_get_comm(group%ptr, 2_c_int, comm, index, size))
  end subroutine

  subroutine fsdp_shardgroup_get_node(group, node, nnodes, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: node, nnodes, ierr
    ierr = named('fsdp_shardgroup_get_node', c_shardgroup_get_node(group%ptr, node, nnodes))
  end subroutine

  subroutine fsdp_shardgroup_get_local_rank(group, local_rank, local_size, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    integer, intent(out) :: local_rank, local_size, ierr
    ierr = named('fsdp_shardgroup_get_local_rank', c_shardgroup_get_local_rank(group%ptr, local_rank, local_size))
  end subroutine

#ifdef FSDP_HAVE_MPI_F08
  subroutine shardgroup_create_f08(comm, group, ierr)
    type(MPI_Comm), intent(in) :: comm
    type(fsdp_shardgroup), intent(out) :: group
    integer, intent(out) :: ierr
    call shardgroup_create_int(comm%MPI_VAL, group, ierr)
  end subroutine

  subroutine shardgroup_get_comm_f08(group, comm, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    type(MPI_Comm), intent(out) :: comm
    integer, intent(out) :: ierr
    call shardgroup_get_comm_int(group, comm%MPI_VAL, ierr)
  end subroutine

  subroutine shardgroup_get_shard_comm_f08(group, comm, index, factor, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    type(MPI_Comm), intent(out) :: comm
    integer, intent(out) :: index, factor, ierr
    call shardgroup_get_shard_comm_int(group, comm%MPI_VAL, index, factor, ierr)
  end subroutine

  subroutine shardgroup_get_replicate_comm_f08(group, comm, index, size, ierr)
    type(fsdp_shardgroup), intent(in) :: group
    type(MPI_Comm), intent(out) :: comm
    integer, intent(out) :: index, size, ierr
    call shardgroup_get_replicate_comm_int(group, comm%MPI_VAL, index, size, ierr)
  end subroutine

  subroutine context_create_f08(comm, ctx, ierr)
    type(MPI_Comm), intent(in) :: comm
    type(fsdp_context), intent(out) :: ctx
    integer, intent(out) :: ierr
    call context_create_int(comm%MPI_VAL, ctx, ierr)
  end subroutine

  subroutine context_get_comm_f08(ctx, comm, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(MPI_Comm), intent(out) :: comm
    integer, intent(out) :: ierr
    call context_get_comm_int(ctx, comm%MPI_VAL, ierr)
  end subroutine

  subroutine context_wait_f08(ctx, request, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(MPI_Request), intent(inout) :: request
    integer, intent(out) :: ierr
    call context_wait_int(ctx, request%MPI_VAL, ierr)
  end subroutine
#endif

  ! ---------------------------------------------------------------- FSDPContext: create and configure

  ! Collective on comm, which the context duplicates.
  subroutine context_create_int(comm, ctx, ierr)
    integer, intent(in) :: comm
    type(fsdp_context), intent(out) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_create', c_context_create(int(comm, c_int), ctx%ptr))
  end subroutine

  subroutine fsdp_context_set_sharding_strategy(ctx, strategy, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: strategy
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_sharding_strategy', c_context_set_sharding_strategy(ctx%ptr, int(strategy, c_int)))
  end subroutine

  ! The context's own ShardGroup: configure it before set_up; do not destroy it.
  subroutine fsdp_context_get_shard_group(ctx, group, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_shardgroup), intent(out) :: group
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_get_shard_group', c_context_get_shard_group(ctx%ptr, group%ptr))
  end subroutine

  ! user is handed to init as it is (c_null_ptr, or c_loc of the program's data).
  subroutine fsdp_context_set_unit_init(ctx, init, user, ierr)
    type(fsdp_context), intent(in) :: ctx
    procedure(fsdp_unit_init) :: init
    type(c_ptr), intent(in) :: user
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_unit_init', c_context_set_init(ctx%ptr, 0_c_int, c_funloc(init), user))
  end subroutine

  subroutine fsdp_context_set_shard_init(ctx, init, user, ierr)
    type(fsdp_context), intent(in) :: ctx
    procedure(fsdp_shard_init) :: init
    type(c_ptr), intent(in) :: user
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_shard_init', c_context_set_init(ctx%ptr, 1_c_int, c_funloc(init), user))
  end subroutine

  subroutine fsdp_context_set_sync_params(ctx, sync, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: sync
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_sync_params', c_context_set_sync_params(ctx%ptr, logical(sync, c_bool)))
  end subroutine

  subroutine fsdp_context_set_mixed_precision(ctx, param_dtype, reduce_dtype, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: param_dtype, reduce_dtype
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_mixed_precision', &
      c_context_set_mixed_precision(ctx%ptr, int(param_dtype, c_int), int(reduce_dtype, c_int)))
  end subroutine

  subroutine fsdp_context_set_comm_engine(ctx, engine, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: engine
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_comm_engine', c_context_set_comm_engine(ctx%ptr, int(engine, c_int)))
  end subroutine

  ! How waits for collectives behave (FSDP_WAIT_AUTO, _POLL, _SLEEP); before set_up.
  subroutine fsdp_context_set_wait_mode(ctx, mode, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: mode
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_wait_mode', c_context_set_wait_mode(ctx%ptr, int(mode, c_int)))
  end subroutine

  ! After set_up: the mode chosen, and the ranks and CPUs of this node it was chosen from.
  subroutine fsdp_context_get_wait_mode(ctx, mode, node_ranks, node_cpus, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: mode, node_ranks, node_cpus
    integer, intent(out) :: ierr
    integer(c_int) :: m, r, c
    ierr = named('fsdp_context_get_wait_mode', c_context_get_wait_mode(ctx%ptr, m, r, c))
    mode = int(m)
    node_ranks = int(r)
    node_cpus = int(c)
  end subroutine

  ! Waits for a request of the program's own (an MPI_Iallreduce of a loss,
  ! say) the way the context waits for its collectives; the request is then
  ! MPI_REQUEST_NULL.
  subroutine context_wait_int(ctx, request, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(inout) :: request
    integer, intent(out) :: ierr
    integer(c_int) :: r
    r = int(request, c_int)
    ierr = named('fsdp_context_wait', c_context_wait(ctx%ptr, r))
    request = int(r)
  end subroutine

  subroutine fsdp_context_set_backward_prefetch(ctx, mode, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: mode
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_backward_prefetch', c_context_set_backward_prefetch(ctx%ptr, int(mode, c_int)))
  end subroutine

  subroutine fsdp_context_set_forward_prefetch(ctx, prefetch, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: prefetch
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_forward_prefetch', &
      c_context_set_forward_prefetch(ctx%ptr, logical(prefetch, c_bool)))
  end subroutine

  subroutine fsdp_context_set_limit_all_gathers(ctx, limit, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: limit
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_limit_all_gathers', c_context_set_limit_all_gathers(ctx%ptr, int(limit, c_int)))
  end subroutine

  subroutine fsdp_context_set_device(ctx, device, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: device
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_device', c_context_set_device(ctx%ptr, int(device, c_int)))
  end subroutine

  subroutine fsdp_context_set_checkpoint_keep(ctx, keep, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: keep
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_checkpoint_keep', c_context_set_checkpoint_keep(ctx%ptr, int(keep, c_int)))
  end subroutine

  ! The most memory the context's plan may take, in bytes (0: no check;
  ! FSDP_MEMORY_LIMIT_AUTO, the default: what the node and the job allow); before set_up.
  subroutine fsdp_context_set_memory_limit(ctx, bytes, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer(fsdp_int64), intent(in) :: bytes
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_memory_limit', c_context_set_memory_limit(ctx%ptr, bytes))
  end subroutine

  ! The shard group's fp32 collectives through node shared memory (default .true.); before set_up.
  subroutine fsdp_context_set_shm_reduce(ctx, use, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: use
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_shm_reduce', c_context_set_shm_reduce(ctx%ptr, logical(use, c_bool)))
  end subroutine

  ! Unsharded parameters as views of the node's shared shards (default .true.); before set_up.
  subroutine fsdp_context_set_shm_views(ctx, use, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: use
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_shm_views', c_context_set_shm_views(ctx%ptr, logical(use, c_bool)))
  end subroutine

  ! Before set_up, what was asked for; after, whether the units are views.
  subroutine fsdp_context_get_shm_views(ctx, use, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(out) :: use
    integer, intent(out) :: ierr
    logical(c_bool) :: c
    ierr = named('fsdp_context_get_shm_views', c_context_get_shm_views(ctx%ptr, c))
    use = c
  end subroutine

  subroutine fsdp_context_set_check_finite(ctx, check, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: check
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_check_finite', c_context_set_check_finite(ctx%ptr, logical(check, c_bool)))
  end subroutine

  subroutine fsdp_context_set_from_options(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_from_options', c_context_set_from_options(ctx%ptr))
  end subroutine

  subroutine fsdp_context_add_unit(ctx, name, unit, ierr)
    type(fsdp_context), intent(in) :: ctx
    character(len=*), intent(in) :: name
    type(fsdp_flatparam), intent(out) :: unit
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_add_unit', c_context_add_unit(ctx%ptr, cstr(name), unit%ptr))
  end subroutine

  subroutine fsdp_context_set_up(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_up', c_context_set_up(ctx%ptr))
  end subroutine

  ! ---------------------------------------------------------------- FSDPContext: a training step

  subroutine fsdp_context_begin_forward(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_begin_forward', c_context_begin_forward(ctx%ptr))
  end subroutine

  subroutine fsdp_context_begin_backward(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_begin_backward', c_context_begin_backward(ctx%ptr))
  end subroutine

  subroutine fsdp_context_finish_backward(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_finish_backward', c_context_finish_backward(ctx%ptr))
  end subroutine

  subroutine fsdp_context_zero_grad(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_zero_grad', c_context_zero_grad(ctx%ptr))
  end subroutine

  subroutine fsdp_context_set_grad_sync(ctx, sync, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: sync
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_grad_sync', c_context_set_grad_sync(ctx%ptr, logical(sync, c_bool)))
  end subroutine

  subroutine fsdp_context_set_replicate_grad_sync(ctx, sync, ierr)
    type(fsdp_context), intent(in) :: ctx
    logical, intent(in) :: sync
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_set_replicate_grad_sync', &
      c_context_set_replicate_grad_sync(ctx%ptr, logical(sync, c_bool)))
  end subroutine

  subroutine fsdp_context_broadcast_params(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_broadcast_params', c_context_broadcast_params(ctx%ptr))
  end subroutine

  subroutine fsdp_context_synchronize(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_synchronize', c_context_synchronize(ctx%ptr))
  end subroutine

  ! ---------------------------------------------------------------- FSDPContext: checkpoints

  subroutine fsdp_context_set_training_state(ctx, state, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_training_state), intent(in) :: state
    integer, intent(out) :: ierr
    type(fsdp_training_state) :: s
    s = state
    ierr = named('fsdp_context_set_training_state', c_context_set_training_state(ctx%ptr, s))
  end subroutine

  subroutine fsdp_context_get_training_state(ctx, state, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_training_state), intent(out) :: state
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_get_training_state', c_context_get_training_state(ctx%ptr, state))
  end subroutine

  ! Collective: a sharded HDF5 checkpoint (doc/checkpoint-format.md), loadable
  ! at any world size; opt may be a null fsdp_optimizer() for parameters only.
  subroutine fsdp_context_save(ctx, opt, path, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_optimizer), intent(in) :: opt
    character(len=*), intent(in) :: path
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_save', c_context_save(ctx%ptr, opt%ptr, cstr(path)))
  end subroutine

  subroutine fsdp_context_load(ctx, opt, path, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_optimizer), intent(in) :: opt
    character(len=*), intent(in) :: path
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_load', c_context_load(ctx%ptr, opt%ptr, cstr(path)))
  end subroutine

  ! ---------------------------------------------------------------- FSDPContext: queries

  subroutine fsdp_context_get_sharding_strategy(ctx, strategy, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: strategy, ierr
    ierr = named('fsdp_context_get_sharding_strategy', c_context_get_sharding_strategy(ctx%ptr, strategy))
  end subroutine

  ! The context's communicator: do not free it.
  subroutine context_get_comm_int(ctx, comm, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: comm, ierr
    ierr = named('fsdp_context_get_comm', c_context_get_comm(ctx%ptr, comm))
  end subroutine

  subroutine fsdp_context_get_num_units(ctx, nunits, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: nunits, ierr
    ierr = named('fsdp_context_get_num_units', c_context_get_num_units(ctx%ptr, nunits))
  end subroutine

  ! Unit i, 1 <= i <= nunits, in the order they were added.  The index is
  ! checked here, so that the message speaks of Fortran's, not C's (i - 1).
  subroutine fsdp_context_get_unit(ctx, i, unit, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(in) :: i
    type(fsdp_flatparam), intent(out) :: unit
    integer, intent(out) :: ierr
    integer(c_int) :: n
    character(len=96) :: msg
    unit%ptr = c_null_ptr
    ierr = named('fsdp_context_get_unit', c_context_get_num_units(ctx%ptr, n))
    if (ierr /= FSDP_SUCCESS) return
    if (i < 1 .or. i > n) then
      if (n == 0) then
        write (msg, '(a,i0,a)') 'unit index ', i, ': the context has no units'
      else
        write (msg, '(a,i0,a,i0,a)') 'unit index ', i, ' is not in [1, ', n, ']'
      end if
      ierr = raise(FSDP_ERR_ARG, 'fsdp_context_get_unit', trim(msg))
      return
    end if
    ierr = named('fsdp_context_get_unit', c_context_get_unit(ctx%ptr, int(i - 1, c_int), unit%ptr))
  end subroutine

  subroutine fsdp_context_find_param(ctx, name, unit, id, ierr)
    type(fsdp_context), intent(in) :: ctx
    character(len=*), intent(in) :: name
    type(fsdp_flatparam), intent(out) :: unit
    integer, intent(out) :: id, ierr
    ierr = named('fsdp_context_find_param', c_context_find_param(ctx%ptr, cstr(name), unit%ptr, id))
  end subroutine

  subroutine fsdp_context_get_sizes(ctx, numel, shard_numel, max_unit_numel, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer(fsdp_int64), intent(out) :: numel, shard_numel, max_unit_numel
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_get_sizes', c_context_get_sizes(ctx%ptr, numel, shard_numel, max_unit_numel))
  end subroutine

  ! On standard output, collective on the context's communicator.
  subroutine fsdp_context_view(ctx, ierr)
    type(fsdp_context), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_view', c_context_view(ctx%ptr, c_null_ptr))
  end subroutine

  subroutine fsdp_context_destroy(ctx, ierr)
    type(fsdp_context), intent(inout) :: ctx
    integer, intent(out) :: ierr
    ierr = named('fsdp_context_destroy', c_context_destroy(ctx%ptr))
  end subroutine

  ! ---------------------------------------------------------------- FlatParam

  subroutine fsdp_flatparam_set_data_type(unit, dtype, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: dtype
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_set_data_type', c_flatparam_set_data_type(unit%ptr, int(dtype, c_int)))
  end subroutine

  ! shape in Fortran's order: a weight w(in, out) is C's [out, in].  size(shape) = 0: a scalar.
  ! A negative extent is refused here, named by its Fortran position (C's
  ! message would name the reversed one).
  subroutine fsdp_flatparam_add_param(unit, name, shape, id, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    character(len=*), intent(in) :: name
    integer, intent(in) :: shape(:)
    integer, intent(out) :: id, ierr
    integer(c_int64_t) :: cshape(max(1, size(shape)))
    character(len=64) :: msg
    integer :: i, n
    n = size(shape)
    id = -1
    do i = 1, n
      if (shape(i) < 0) then
        write (msg, '(a,i0,a,i0)') ': shape(', i, ') is ', shape(i)
        ierr = raise(FSDP_ERR_ARG, 'fsdp_flatparam_add_param', 'parameter '''//trim(name)//''''//trim(msg))
        return
      end if
    end do
    cshape = 0
    do i = 1, n
      cshape(i) = shape(n + 1 - i)
    end do
    ierr = named('fsdp_flatparam_add_param', c_flatparam_add_param(unit%ptr, cstr(name), int(n, c_int), cshape, id))
  end subroutine

  subroutine fsdp_flatparam_set_trainable(unit, id, trainable, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    logical, intent(in) :: trainable
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_set_trainable', &
      c_flatparam_set_trainable(unit%ptr, int(id, c_int), logical(trainable, c_bool)))
  end subroutine

  subroutine fsdp_flatparam_unshard(unit, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_unshard', c_flatparam_unshard(unit%ptr))
  end subroutine

  subroutine fsdp_flatparam_reshard(unit, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_reshard', c_flatparam_reshard(unit%ptr))
  end subroutine

  subroutine fsdp_flatparam_reduce_grad(unit, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_reduce_grad', c_flatparam_reduce_grad(unit%ptr))
  end subroutine

  ! The parameter's address and its Fortran shape for a view of rank `rank`:
  ! rank 1 takes any parameter flattened; otherwise the ranks must agree.
  ! Views are real(c_float): a 16-bit view type (mixed precision) is refused.
  subroutine view_of(unit, id, rank, grad, caller, p, fshape, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id, rank
    logical, intent(in) :: grad
    character(len=*), intent(in) :: caller
    type(c_ptr), intent(out) :: p
    integer(c_int64_t), intent(out) :: fshape(rank)
    integer, intent(out) :: ierr
    type(c_ptr) :: name, shape_p
    integer(c_int) :: ndim, dtype
    integer(c_int64_t) :: numel
    integer(c_int64_t), pointer :: cshape(:)
    character(len=96) :: msg
    character(len=64) :: pname
    integer :: i
    p = c_null_ptr
    fshape = 0
    ierr = c_flatparam_get_param_info(unit%ptr, int(id, c_int), name, ndim, shape_p, numel)
    if (ierr /= FSDP_SUCCESS) return
    call fstr(name, pname)
    if (grad) then
      ierr = c_flatparam_get_data_type(unit%ptr, dtype)
    else
      ierr = c_flatparam_get_view_data_type(unit%ptr, dtype)
    end if
    if (ierr /= FSDP_SUCCESS) return
    if (dtype /= FSDP_FLOAT32) then
      call fsdp_data_type_name(int(dtype), msg)
      ierr = raise(FSDP_ERR_UNSUPPORTED, caller, 'parameter '''//trim(pname)//''' is viewed as '//trim(msg)// &
                   ', and Fortran views are real(c_float) only')
      return
    end if
    if (rank == 1) then
      fshape(1) = numel
    else if (ndim /= rank) then
      write (msg, '(a,i0,a,a,i0)') ' has ', ndim, trim(merge(' dimension ', ' dimensions', ndim == 1)), &
        ', the view has rank ', rank
      ierr = raise(FSDP_ERR_ARG, caller, 'parameter '''//trim(pname)//''''//trim(msg))
      return
    else
      call c_f_pointer(shape_p, cshape, [ndim])
      do i = 1, rank
        fshape(i) = cshape(rank + 1 - i)
      end do
    end if
    if (grad) then
      ierr = c_flatparam_get_grad(unit%ptr, int(id, c_int), p)
    else
      ierr = c_flatparam_get_param(unit%ptr, int(id, c_int), p)
    end if
  end subroutine

  subroutine get_param_1(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(1)
    values => null()
    call view_of(unit, id, 1, .false., 'fsdp_flatparam_get_param', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_param_2(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(2)
    values => null()
    call view_of(unit, id, 2, .false., 'fsdp_flatparam_get_param', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_param_3(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:, :, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(3)
    values => null()
    call view_of(unit, id, 3, .false., 'fsdp_flatparam_get_param', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_param_4(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:, :, :, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(4)
    values => null()
    call view_of(unit, id, 4, .false., 'fsdp_flatparam_get_param', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_grad_1(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(1)
    values => null()
    call view_of(unit, id, 1, .true., 'fsdp_flatparam_get_grad', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_grad_2(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(2)
    values => null()
    call view_of(unit, id, 2, .true., 'fsdp_flatparam_get_grad', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_grad_3(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:, :, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(3)
    values => null()
    call view_of(unit, id, 3, .true., 'fsdp_flatparam_get_grad', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  subroutine get_grad_4(unit, id, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    real(c_float), pointer, intent(out) :: values(:, :, :, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: s(4)
    values => null()
    call view_of(unit, id, 4, .true., 'fsdp_flatparam_get_grad', p, s, ierr)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, s)
  end subroutine

  ! This rank's shard of the unit (fp32 master copy), always valid after set_up.
  subroutine fsdp_flatparam_get_shard(unit, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    real(c_float), pointer, intent(out) :: values(:)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    values => null()
    ierr = named('fsdp_flatparam_get_shard', c_flatparam_get_shard_(unit%ptr, p, n))
    if (ierr == FSDP_SUCCESS) ierr = shard_is_fp32(unit, 'fsdp_flatparam_get_shard')
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, [n])
  end subroutine

  subroutine fsdp_flatparam_get_grad_shard(unit, values, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    real(c_float), pointer, intent(out) :: values(:)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    values => null()
    ierr = named('fsdp_flatparam_get_grad_shard', c_flatparam_get_grad_shard(unit%ptr, p, n))
    if (ierr == FSDP_SUCCESS) ierr = shard_is_fp32(unit, 'fsdp_flatparam_get_grad_shard')
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, values, [n])
  end subroutine

  integer function shard_is_fp32(unit, caller) result(ierr)
    type(fsdp_flatparam), intent(in) :: unit
    character(len=*), intent(in) :: caller
    integer(c_int) :: dtype
    character(len=32) :: name
    ierr = c_flatparam_get_data_type(unit%ptr, dtype)
    if (ierr == FSDP_SUCCESS .and. dtype /= FSDP_FLOAT32) then
      call fsdp_data_type_name(int(dtype), name)
      ierr = raise(FSDP_ERR_UNSUPPORTED, caller, 'the unit''s type is '//trim(name)// &
                   ', and Fortran views are real(c_float) only')
    end if
  end function

  ! Elements [first, last) of parameter id (flattened, 0-based as in C) are at
  ! shard(offset + 1 : offset + last - first); first == last when none are here.
  subroutine fsdp_flatparam_get_shard_range(unit, id, first, last, offset, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    integer(fsdp_int64), intent(out) :: first, last, offset
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_get_shard_range', &
      c_flatparam_get_shard_range(unit%ptr, int(id, c_int), first, last, offset))
  end subroutine

  subroutine fsdp_flatparam_get_name(unit, name, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    character(len=*), intent(out) :: name
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    ierr = named('fsdp_flatparam_get_name', c_flatparam_get_name(unit%ptr, p))
    call fstr(p, name)
  end subroutine

  subroutine fsdp_flatparam_get_state(unit, state, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(out) :: state, ierr
    ierr = named('fsdp_flatparam_get_state', c_flatparam_get_state(unit%ptr, state))
  end subroutine

  subroutine fsdp_flatparam_get_num_params(unit, nparams, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(out) :: nparams, ierr
    ierr = named('fsdp_flatparam_get_num_params', c_flatparam_get_num_params(unit%ptr, nparams))
  end subroutine

  ! name, Fortran shape (allocated to the parameter's rank) and element count.
  subroutine fsdp_flatparam_get_param_info(unit, id, name, shape, numel, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer, intent(in) :: id
    character(len=*), intent(out) :: name
    integer(fsdp_int64), allocatable, intent(out) :: shape(:)
    integer(fsdp_int64), intent(out) :: numel
    integer, intent(out) :: ierr
    type(c_ptr) :: pname, pshape
    integer(c_int) :: ndim
    integer(c_int64_t), pointer :: cshape(:)
    integer :: i
    name = ''
    numel = 0
    ierr = named('fsdp_flatparam_get_param_info', &
      c_flatparam_get_param_info(unit%ptr, int(id, c_int), pname, ndim, pshape, numel))
    if (ierr /= FSDP_SUCCESS) then
      allocate (shape(0))
      return
    end if
    call fstr(pname, name)
    allocate (shape(ndim))
    if (ndim > 0) then
      call c_f_pointer(pshape, cshape, [ndim])
      do i = 1, ndim
        shape(i) = cshape(ndim + 1 - i)
      end do
    end if
  end subroutine

  subroutine fsdp_flatparam_get_sizes(unit, numel, padded_numel, shard_numel, ierr)
    type(fsdp_flatparam), intent(in) :: unit
    integer(fsdp_int64), intent(out) :: numel, padded_numel, shard_numel
    integer, intent(out) :: ierr
    ierr = named('fsdp_flatparam_get_sizes', c_flatparam_get_sizes(unit%ptr, numel, padded_numel, shard_numel))
  end subroutine

  ! ---------------------------------------------------------------- optimizers

  subroutine fsdp_optimizer_create(ctx, opt, ierr)
    type(fsdp_context), intent(in) :: ctx
    type(fsdp_optimizer), intent(out) :: opt
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_create', c_optimizer_create(ctx%ptr, opt%ptr))
  end subroutine

  subroutine fsdp_optimizer_set_type(opt, type, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer, intent(in) :: type
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_type', c_optimizer_set_type(opt%ptr, int(type, c_int)))
  end subroutine

  subroutine fsdp_optimizer_set_learning_rate(opt, lr, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: lr
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_learning_rate', c_optimizer_set_learning_rate(opt%ptr, lr))
  end subroutine

  subroutine fsdp_optimizer_set_weight_decay(opt, weight_decay, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: weight_decay
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_weight_decay', c_optimizer_set_weight_decay(opt%ptr, weight_decay))
  end subroutine

  ! Parameter groups (FSDPOptimizerAddParamGroup): the parameters `pattern`
  ! selects (a shell glob on their names, or 'ndim<2' for nanoGPT's rule) take
  ! this weight decay and lr_scale times the learning rate.  Before set-up.
  subroutine fsdp_optimizer_add_param_group(opt, pattern, weight_decay, lr_scale, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    character(len=*), intent(in) :: pattern
    real(c_double), intent(in) :: weight_decay, lr_scale
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_add_param_group', &
      c_optimizer_add_param_group(opt%ptr, cstr(pattern), weight_decay, lr_scale))
  end subroutine

  ! The weight decay and learning-rate scale that parameter `name` takes.
  subroutine fsdp_optimizer_get_param_settings(opt, name, weight_decay, lr_scale, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    character(len=*), intent(in) :: name
    real(c_double), intent(out) :: weight_decay, lr_scale
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_get_param_settings', &
      c_optimizer_get_param_settings(opt%ptr, cstr(name), weight_decay, lr_scale))
  end subroutine

  subroutine fsdp_optimizer_set_momentum(opt, momentum, nesterov, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: momentum
    logical, intent(in) :: nesterov
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_momentum', &
      c_optimizer_set_momentum(opt%ptr, momentum, logical(nesterov, c_bool)))
  end subroutine

  subroutine fsdp_optimizer_set_betas(opt, beta1, beta2, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: beta1, beta2
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_betas', c_optimizer_set_betas(opt%ptr, beta1, beta2))
  end subroutine

  subroutine fsdp_optimizer_set_eps(opt, eps, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: eps
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_eps', c_optimizer_set_eps(opt%ptr, eps))
  end subroutine

  subroutine fsdp_optimizer_set_schedule(opt, schedule, warmup_steps, total_steps, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer, intent(in) :: schedule, warmup_steps, total_steps
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_schedule', &
      c_optimizer_set_schedule(opt%ptr, int(schedule, c_int), int(warmup_steps, c_int64_t), &
                                    int(total_steps, c_int64_t)))
  end subroutine

  subroutine fsdp_optimizer_set_clip_grad_norm(opt, max_norm, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: max_norm
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_clip_grad_norm', c_optimizer_set_clip_grad_norm(opt%ptr, max_norm))
  end subroutine

  subroutine fsdp_optimizer_set_from_options(opt, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_from_options', c_optimizer_set_from_options(opt%ptr))
  end subroutine

  subroutine fsdp_optimizer_set_up(opt, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_set_up', c_optimizer_set_up(opt%ptr))
  end subroutine

  subroutine fsdp_optimizer_step(opt, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_step', c_optimizer_step(opt%ptr))
  end subroutine

  subroutine fsdp_optimizer_clip_grad_norm(opt, max_norm, total_norm, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(in) :: max_norm
    real(c_double), intent(out) :: total_norm
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_clip_grad_norm', c_optimizer_clip_grad_norm(opt%ptr, max_norm, total_norm))
  end subroutine

  subroutine fsdp_optimizer_get_step(opt, step, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer(fsdp_int64), intent(out) :: step
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_get_step', c_optimizer_get_step(opt%ptr, step))
  end subroutine

  subroutine fsdp_optimizer_get_learning_rate(opt, lr, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(out) :: lr
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_get_learning_rate', c_optimizer_get_learning_rate(opt%ptr, lr))
  end subroutine

  subroutine fsdp_optimizer_get_grad_norm(opt, norm, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    real(c_double), intent(out) :: norm
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_get_grad_norm', c_optimizer_get_grad_norm(opt%ptr, norm))
  end subroutine

  subroutine fsdp_optimizer_view(opt, ierr)
    type(fsdp_optimizer), intent(in) :: opt
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_view', c_optimizer_view(opt%ptr, c_null_ptr))
  end subroutine

  subroutine fsdp_optimizer_destroy(opt, ierr)
    type(fsdp_optimizer), intent(inout) :: opt
    integer, intent(out) :: ierr
    ierr = named('fsdp_optimizer_destroy', c_optimizer_destroy(opt%ptr))
  end subroutine

  ! ---------------------------------------------------------------- models (doc/nn.md)

  subroutine fsdp_model_create(ctx, spec, model, ierr)
    type(fsdp_context), intent(in) :: ctx
    character(len=*), intent(in) :: spec
    type(fsdp_model), intent(out) :: model
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_create', c_model_create(ctx%ptr, cstr(spec), model%ptr))
  end subroutine

  subroutine fsdp_model_set_wrap_policy(model, policy, min_numel, ierr)
    type(fsdp_model), intent(in) :: model
    integer, intent(in) :: policy
    integer(fsdp_int64), intent(in) :: min_numel
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_set_wrap_policy', c_model_set_wrap_policy(model%ptr, int(policy, c_int), min_numel))
  end subroutine

  subroutine fsdp_model_set_seed(model, seed, ierr)
    type(fsdp_model), intent(in) :: model
    integer(fsdp_int64), intent(in) :: seed
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_set_seed', c_model_set_seed(model%ptr, seed))
  end subroutine

  subroutine fsdp_model_set_from_options(model, ierr)
    type(fsdp_model), intent(in) :: model
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_set_from_options', c_model_set_from_options(model%ptr))
  end subroutine

  subroutine fsdp_model_set_up(model, ierr)
    type(fsdp_model), intent(in) :: model
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_set_up', c_model_set_up(model%ptr))
  end subroutine

  ! A GPT's context length and vocabulary (x(ctx, n) holds token ids, the
  ! output is (ctx * vocab, n), the labels ctx per sample); 0 and 0 for an MLP.
  subroutine fsdp_model_get_tokens(model, ctx, vocab, ierr)
    type(fsdp_model), intent(in) :: model
    integer(fsdp_int64), intent(out) :: ctx, vocab
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_get_tokens', c_model_get_tokens(model%ptr, ctx, vocab))
  end subroutine

  ! One sample's input (output .false.) or output shape, in Fortran order: a
  ! cnn: model on a 32x24 grid of 2 channels takes x(24, 32, 2) per sample.
  subroutine fsdp_model_get_sample_shape(model, output, shape, ierr)
    type(fsdp_model), intent(in) :: model
    logical, intent(in) :: output
    integer(fsdp_int64), allocatable, intent(out) :: shape(:)
    integer, intent(out) :: ierr
    integer(c_int) :: ndim
    integer(c_int64_t) :: cshape(4)
    integer :: i
    ierr = named('fsdp_model_get_sample_shape', &
      c_model_get_sample_shape(model%ptr, logical(output, c_bool), ndim, cshape))
    if (ierr /= FSDP_SUCCESS) ndim = 0
    allocate (shape(ndim))
    do i = 1, ndim
      shape(i) = cshape(ndim + 1 - i)
    end do
  end subroutine

  subroutine fsdp_model_set_activation_checkpointing(model, on, ierr)
    type(fsdp_model), intent(in) :: model
    logical, intent(in) :: on
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_set_activation_checkpointing', &
      c_model_set_activation_checkpointing(model%ptr, logical(on, c_bool)))
  end subroutine

  subroutine fsdp_model_get_activation_checkpointing(model, on, ierr)
    type(fsdp_model), intent(in) :: model
    logical, intent(out) :: on
    integer, intent(out) :: ierr
    logical(c_bool) :: c
    ierr = named('fsdp_model_get_activation_checkpointing', c_model_get_activation_checkpointing(model%ptr, c))
    on = c
  end subroutine

  subroutine fsdp_model_get_sizes(model, in, out, numel, ierr)
    type(fsdp_model), intent(in) :: model
    integer(fsdp_int64), intent(out) :: in, out, numel
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_get_sizes', c_model_get_sizes(model%ptr, in, out, numel))
  end subroutine

  ! Collective: y => the output (out, n) of the input x(in, n), valid until the
  ! next forward.  C keeps x's address until fsdp_model_backward: x must be
  ! contiguous in the caller (a whole array, or columns x(:, j:k)), or the
  ! compiler passes a temporary copy that is gone when this returns.
  subroutine fsdp_model_forward(model, x, y, ierr)
    type(fsdp_model), intent(inout) :: model
    real(c_float), intent(in), target, contiguous :: x(:, :)
    real(c_float), pointer, intent(out) :: y(:, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    y => null()
    ierr = check_rows(model, 'fsdp_model_forward', 'x', size(x, 1, kind=c_int64_t), .true.)
    if (ierr /= FSDP_SUCCESS) return
    ierr = named('fsdp_model_forward', c_model_forward(model%ptr, size(x, 2, kind=c_int64_t), c_loc(x), p))
    if (ierr == FSDP_SUCCESS) then
      model%rows = size(x, 2, kind=c_int64_t)
      call c_f_pointer(p, y, [out_of(model), model%rows])
    end if
  end subroutine

  ! The model's output width.
  integer(c_int64_t) function out_of(model) result(out)
    type(fsdp_model), intent(in) :: model
    integer(c_int64_t) :: in, numel
    integer :: ierr
    ierr = c_model_get_sizes(model%ptr, in, out, numel)
    if (ierr /= FSDP_SUCCESS) out = 0
  end function

  ! An array's leading extent must be the model's in (input) or out (output width).
  integer function check_rows(model, caller, what, extent, input) result(ierr)
    type(fsdp_model), intent(in) :: model
    character(len=*), intent(in) :: caller, what
    integer(c_int64_t), intent(in) :: extent
    logical, intent(in) :: input
    integer(c_int64_t) :: in, out, numel, want
    character(len=128) :: msg
    ierr = c_model_get_sizes(model%ptr, in, out, numel)
    if (ierr /= FSDP_SUCCESS) return
    want = merge(in, out, input)
    if (extent /= want) then
      write (msg, '(a,a,i0,a,a,a,i0)') what, '''s first extent is ', extent, ', the model''s ', &
        trim(merge('in ', 'out', input)), ' is ', want
      ierr = raise(FSDP_ERR_ARG, caller, trim(msg))
    end if
  end function

  ! An array's batch extent must be the last forward's.
  integer function check_batch(model, caller, what, extent) result(ierr)
    type(fsdp_model), intent(in) :: model
    character(len=*), intent(in) :: caller, what
    integer(c_int64_t), intent(in) :: extent
    character(len=128) :: msg
    ierr = FSDP_SUCCESS
    if (model%rows < 0 .or. extent == model%rows) return
    write (msg, '(a,a,i0,a,i0)') what, ' has ', extent, ' samples, the last forward had ', model%rows
    ierr = raise(FSDP_ERR_ARG, caller, trim(msg))
  end function

  ! Not collective: the MSE loss of the last forward against target(out, n) on
  ! this rank; dy => its gradient times scale (out, n), for fsdp_model_backward.
  subroutine model_loss_mse(model, target, scale, loss, dy, ierr)
    type(fsdp_model), intent(in) :: model
    real(c_float), intent(in), target, contiguous :: target(:, :)
    real(c_double), intent(in) :: scale
    real(c_double), intent(out) :: loss
    real(c_float), pointer, intent(out) :: dy(:, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    dy => null()
    loss = 0
    ierr = check_rows(model, 'fsdp_model_loss', 'target', size(target, 1, kind=c_int64_t), .false.)
    if (ierr == FSDP_SUCCESS) ierr = check_batch(model, 'fsdp_model_loss', 'target', size(target, 2, kind=c_int64_t))
    if (ierr /= FSDP_SUCCESS) return
    ierr = named('fsdp_model_loss', c_model_loss(model%ptr, 0_c_int, c_loc(target), scale, loss, p))
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, dy, shape(target, kind=c_int64_t))
  end subroutine

  ! Cross-entropy with labels(n) in [0, out), as C's; a GPT's are ctx per
  ! sample, labels(ctx * n) in [0, vocab), position by position.
  subroutine model_loss_ce(model, labels, scale, loss, dy, ierr)
    type(fsdp_model), intent(in) :: model
    integer(fsdp_int64), intent(in), target, contiguous :: labels(:)
    real(c_double), intent(in) :: scale
    real(c_double), intent(out) :: loss
    real(c_float), pointer, intent(out) :: dy(:, :)
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    integer(c_int64_t) :: ctx, vocab, per, classes, k
    character(len=128) :: msg
    dy => null()
    loss = 0
    ierr = c_model_get_tokens(model%ptr, ctx, vocab)
    if (ierr /= FSDP_SUCCESS) return
    per = max(1_c_int64_t, ctx)
    if (mod(size(labels, kind=c_int64_t), per) /= 0) then
      write (msg, '(a,i0,a,i0,a)') 'labels has ', size(labels), ' elements: a GPT takes ', per, ' per sample'
      ierr = raise(FSDP_ERR_ARG, 'fsdp_model_loss', trim(msg))
      return
    end if
    ierr = check_batch(model, 'fsdp_model_loss', 'labels', size(labels, kind=c_int64_t) / per)
    if (ierr /= FSDP_SUCCESS) return
    ! Checked here, so that a bad label is named by its Fortran index (C's
    ! message counts rows from 0).
    classes = merge(vocab, out_of(model), ctx > 0)
    do k = 1, size(labels, kind=c_int64_t)
      if (labels(k) < 0 .or. labels(k) >= classes) then
        write (msg, '(a,i0,a,i0,a,i0,a)') 'labels(', k, ') is ', labels(k), ', not in [0, ', classes, ')'
        ierr = raise(FSDP_ERR_ARG, 'fsdp_model_loss', trim(msg))
        return
      end if
    end do
    ierr = c_model_loss(model%ptr, 1_c_int, c_loc(labels), scale, loss, p)
    if (ierr == FSDP_SUCCESS) call c_f_pointer(p, dy, [out_of(model), size(labels, kind=c_int64_t) / per])
  end subroutine

  ! Collective: backward of the last forward from dy(out, n).
  subroutine fsdp_model_backward(model, dy, ierr)
    type(fsdp_model), intent(in) :: model
    real(c_float), intent(in), target, contiguous :: dy(:, :)
    integer, intent(out) :: ierr
    ierr = check_rows(model, 'fsdp_model_backward', 'dy', size(dy, 1, kind=c_int64_t), .false.)
    if (ierr == FSDP_SUCCESS) ierr = check_batch(model, 'fsdp_model_backward', 'dy', size(dy, 2, kind=c_int64_t))
    if (ierr /= FSDP_SUCCESS) return
    ierr = named('fsdp_model_backward', c_model_backward(model%ptr, c_loc(dy)))
  end subroutine

  ! One training step on this rank's batch: zero the gradients, forward,
  ! the loss (this rank's, returned), backward, the optimizer's step.
  subroutine model_train_step_mse(model, opt, x, target, loss, ierr)
    type(fsdp_model), intent(inout) :: model
    type(fsdp_optimizer), intent(in) :: opt
    real(c_float), intent(in), target, contiguous :: x(:, :)
    real(c_float), intent(in), target, contiguous :: target(:, :)
    real(c_double), intent(out) :: loss
    integer, intent(out) :: ierr
    real(c_float), pointer :: y(:, :), dy(:, :)
    loss = 0
    ierr = zero_grad_of(model)
    if (ierr == FSDP_SUCCESS) call fsdp_model_forward(model, x, y, ierr)
    if (ierr == FSDP_SUCCESS) call model_loss_mse(model, target, 1.0_c_double, loss, dy, ierr)
    if (ierr == FSDP_SUCCESS) call fsdp_model_backward(model, dy, ierr)
    if (ierr == FSDP_SUCCESS) call fsdp_optimizer_step(opt, ierr)
  end subroutine

  subroutine model_train_step_ce(model, opt, x, labels, loss, ierr)
    type(fsdp_model), intent(inout) :: model
    type(fsdp_optimizer), intent(in) :: opt
    real(c_float), intent(in), target, contiguous :: x(:, :)
    integer(fsdp_int64), intent(in), target, contiguous :: labels(:)
    real(c_double), intent(out) :: loss
    integer, intent(out) :: ierr
    real(c_float), pointer :: y(:, :), dy(:, :)
    loss = 0
    ierr = zero_grad_of(model)
    if (ierr == FSDP_SUCCESS) call fsdp_model_forward(model, x, y, ierr)
    if (ierr == FSDP_SUCCESS) call model_loss_ce(model, labels, 1.0_c_double, loss, dy, ierr)
    if (ierr == FSDP_SUCCESS) call fsdp_model_backward(model, dy, ierr)
    if (ierr == FSDP_SUCCESS) call fsdp_optimizer_step(opt, ierr)
  end subroutine

  integer function zero_grad_of(model) result(ierr)
    type(fsdp_model), intent(in) :: model
    type(c_ptr) :: ctx
    ierr = c_model_get_context(model%ptr, ctx)
    if (ierr == FSDP_SUCCESS) ierr = c_context_zero_grad(ctx)
  end function

  !> Inference: y(out, n) = the model applied to x(in, n), copied into the program's array.
  !! A forward (fsdp_model_forward) whose output is copied out, so y outlives the next forward.  Host contexts only:
  !! on a CUDA context the output is device memory, and fsdp_model_forward gives a pointer to it.
  !! @collective Collective on the model's context's communicator: every rank calls it, each with its own samples
  !! (n may differ across ranks).  A rank alone waits for the others in the first all-gather.
  !! @param[in,out] model  the model, set up
  !! @param[in] x          the inputs, x(in, n): n samples as columns; contiguous
  !! @param[out] y         the outputs, y(out, n)
  !! @param[out] ierr      FSDP_SUCCESS or the error
  !! @retval FSDP_ERR_ARG          x's first extent is not the model's in, y's is not its out, or y and x have
  !!                               different numbers of columns
  !! @retval FSDP_ERR_STATE        the model is not set up, or a unit is not sharded
  !! @retval FSDP_ERR_UNSUPPORTED  the model's context runs on a GPU (-fsdp_device cuda)
  !! @retval FSDP_ERR_MEM          the buffers for n samples cannot be allocated
  !! @retval FSDP_ERR_MPI          an MPI call failed
  !! @see FSDPModelForward, FSDPModelGetSizes
  subroutine fsdp_model_predict(model, x, y, ierr)
    type(fsdp_model), intent(inout) :: model
    real(c_float), intent(in), target, contiguous :: x(:, :)
    real(c_float), intent(out) :: y(:, :)
    integer, intent(out) :: ierr
    real(c_float), pointer :: out(:, :)
    character(len=128) :: msg
    ierr = check_rows(model, 'fsdp_model_predict', 'y', size(y, 1, kind=c_int64_t), .false.)
    if (ierr /= FSDP_SUCCESS) return
    if (size(y, 2) /= size(x, 2)) then
      write (msg, '(a,i0,a,i0,a)') 'y has ', size(y, 2), ' columns and x ', size(x, 2), ': they must agree'
      ierr = raise(FSDP_ERR_ARG, 'fsdp_model_predict', trim(msg))
      return
    end if
    ierr = on_host(model, 'fsdp_model_predict')
    if (ierr == FSDP_SUCCESS) call fsdp_model_forward(model, x, out, ierr)
    if (ierr == FSDP_SUCCESS) y = out
  end subroutine

  ! The model's output is in host memory (not on a CUDA context's GPU).
  integer function on_host(model, caller) result(ierr)
    type(fsdp_model), intent(in) :: model
    character(len=*), intent(in) :: caller
    type(c_ptr) :: ctx
    integer(c_int) :: device
    ierr = c_model_get_context(model%ptr, ctx)
    if (ierr == FSDP_SUCCESS) ierr = c_context_get_device(ctx, device)
    if (ierr == FSDP_SUCCESS .and. device /= FSDP_DEVICE_HOST) &
      ierr = raise(FSDP_ERR_UNSUPPORTED, caller, 'the model runs on a GPU (-fsdp_device cuda) and its output is '// &
                   'device memory: use fsdp_model_forward, whose y points there')
  end function

  subroutine fsdp_model_view(model, ierr)
    type(fsdp_model), intent(in) :: model
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_view', c_model_view(model%ptr, c_null_ptr))
  end subroutine

  subroutine fsdp_model_destroy(model, ierr)
    type(fsdp_model), intent(inout) :: model
    integer, intent(out) :: ierr
    ierr = named('fsdp_model_destroy', c_model_destroy(model%ptr))
  end subroutine

  ! ---------------------------------------------------------------- the planner (doc/fsdp-plan.md)

  ! Collective on comm: its ranks find their nodes.
  subroutine plan_create_int(comm, plan, ierr)
    integer, intent(in) :: comm
    type(fsdp_plan), intent(out) :: plan
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_create', c_plan_create(int(comm, c_int), plan%ptr))
  end subroutine

#ifdef FSDP_HAVE_MPI_F08
  subroutine plan_create_f08(comm, plan, ierr)
    type(MPI_Comm), intent(in) :: comm
    type(fsdp_plan), intent(out) :: plan
    integer, intent(out) :: ierr
    call plan_create_int(comm%MPI_VAL, plan, ierr)
  end subroutine
#endif

  subroutine fsdp_plan_set_model(plan, spec, ierr)
    type(fsdp_plan), intent(in) :: plan
    character(len=*), intent(in) :: spec
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_model', c_plan_set_model(plan%ptr, cstr(spec)))
  end subroutine

  subroutine fsdp_plan_set_job(plan, nodes, ranks_per_node, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(in) :: nodes, ranks_per_node
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_job', c_plan_set_job(plan%ptr, int(nodes, c_int), int(ranks_per_node, c_int)))
  end subroutine

  subroutine fsdp_plan_set_topology(plan, source, ierr)
    type(fsdp_plan), intent(in) :: plan
    character(len=*), intent(in) :: source
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_topology', c_plan_set_topology(plan%ptr, cstr(source)))
  end subroutine

  subroutine fsdp_plan_set_batch(plan, batch, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer(fsdp_int64), intent(in) :: batch
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_batch', c_plan_set_batch(plan%ptr, batch))
  end subroutine

  ! bytes per rank; 0: no budget.  A negative value is an error (it would wrap as a size).
  subroutine fsdp_plan_set_memory_budget(plan, bytes, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer(fsdp_int64), intent(in) :: bytes
    integer, intent(out) :: ierr
    if (bytes < 0) then
      ierr = raise(FSDP_ERR_ARG, 'fsdp_plan_set_memory_budget', 'the budget is negative')
      return
    end if
    ierr = named('fsdp_plan_set_memory_budget', c_plan_set_memory_budget(plan%ptr, int(bytes, c_size_t)))
  end subroutine

  subroutine fsdp_plan_set_optimizer(plan, type, momentum, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(in) :: type
    double precision, intent(in) :: momentum
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_optimizer', c_plan_set_optimizer(plan%ptr, int(type, c_int), real(momentum, c_double)))
  end subroutine

  subroutine fsdp_plan_set_rates(plan, flops, intra, inter, latency, ierr)
    type(fsdp_plan), intent(in) :: plan
    double precision, intent(in) :: flops, intra, inter, latency
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_rates', c_plan_set_rates(plan%ptr, real(flops, c_double), real(intra, c_double), &
                                                         real(inter, c_double), real(latency, c_double)))
  end subroutine

  subroutine fsdp_plan_get_rates(plan, flops, intra, inter, latency, ierr)
    type(fsdp_plan), intent(in) :: plan
    double precision, intent(out) :: flops, intra, inter, latency
    integer, intent(out) :: ierr
    real(c_double) :: r(4)
    ierr = named('fsdp_plan_get_rates', c_plan_get_rates(plan%ptr, r(1), r(2), r(3), r(4)))
    flops = r(1)
    intra = r(2)
    inter = r(3)
    latency = r(4)
  end subroutine

  subroutine fsdp_plan_set_from_options(plan, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_from_options', c_plan_set_from_options(plan%ptr))
  end subroutine

  ! Collective on the planner's communicator.
  subroutine fsdp_plan_probe(plan, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_probe', c_plan_probe(plan%ptr))
  end subroutine

  subroutine fsdp_plan_set_up(plan, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_set_up', c_plan_set_up(plan%ptr))
  end subroutine

  subroutine fsdp_plan_get_num_candidates(plan, n, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(out) :: n, ierr
    integer(c_int) :: m
    ierr = named('fsdp_plan_get_num_candidates', c_plan_get_num_candidates(plan%ptr, m))
    n = m
  end subroutine

  ! i counts from 0, as in C: 0 is the best.
  subroutine fsdp_plan_get_candidate(plan, i, candidate, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(in) :: i
    type(fsdp_plan_candidate), intent(out) :: candidate
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_get_candidate', c_plan_get_candidate(plan%ptr, int(i, c_int), candidate))
  end subroutine

  ! index: the chosen candidate (0), or -1 with FSDP_ERR_MEM when nothing fits; options: its options line,
  ! blank-padded (one longer than len(options) is cut: give 256 characters or more).
  subroutine fsdp_plan_get_choice(plan, index, options, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(out) :: index
    character(len=*), intent(out) :: options
    integer, intent(out) :: ierr
    character(kind=c_char) :: buf(len(options) + 1)
    integer(c_int) :: k
    integer :: i
    buf = c_null_char
    ierr = named('fsdp_plan_get_choice', c_plan_get_choice(plan%ptr, k, buf, int(size(buf), c_size_t)))
    index = k
    options = ''
    do i = 1, len(options)
      if (buf(i) == c_null_char) exit
      options(i:i) = buf(i)
    end do
  end subroutine

  ! Collective on the planner's communicator; prints to standard output.
  subroutine fsdp_plan_view(plan, ierr)
    type(fsdp_plan), intent(in) :: plan
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_view', c_plan_view(plan%ptr, c_null_ptr))
  end subroutine

  subroutine fsdp_plan_destroy(plan, ierr)
    type(fsdp_plan), intent(inout) :: plan
    integer, intent(out) :: ierr
    ierr = named('fsdp_plan_destroy', c_plan_destroy(plan%ptr))
  end subroutine

end module fsdp
