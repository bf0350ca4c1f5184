! fsdpf.h: for Fortran programs preprocessed by cpp (.F90): #include "fsdpf.h".
! FSDPCallA(call) runs a libfsdp call whose last argument is ierr and, on an
! error, prints the traceback with this file and line and aborts the job:
! a program's top level, as PETSc's PetscCallA.  Inside procedures that
! return errors, test ierr and return instead.
#ifndef FSDPF_H
#define FSDPF_H
#define FSDPCallA(func) call func; if (ierr /= 0) call fsdp_abort_on_error(ierr, __LINE__, __FILE__)
#endif
