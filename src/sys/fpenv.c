/* The caller's floating-point environment, kept from what libfsdp calls.
   Libraries below libfsdp raise floating-point exceptions as a matter of
   course (libxml2, which hwloc's XML export loads, computes 0/0 and 1/0 to
   make its NaN and infinities when it starts), and a program built with
   gfortran's -ffpe-trap (or feenableexcept) dies of SIGFPE there, or, without
   traps, reports flags it never raised.  Around such a call libfsdp holds
   the environment: FSDPFPEnter_Private saves it, clears the flags and masks
   every trap (feholdexcept); FSDPFPLeave_Private puts back the saved one
   (fesetenv), the caller's flags, traps and rounding as they were, and
   drops whatever was raised in between. */
#include "fsdpimpl.h"

void FSDPFPEnter_Private(fenv_t *saved)
{
  /* feholdexcept fails only where traps cannot be masked (not on x86 or
     Arm); then the call below runs in the caller's environment, as before. */
  (void)feholdexcept(saved);
}

void FSDPFPLeave_Private(const fenv_t *saved) { (void)fesetenv(saved); }
