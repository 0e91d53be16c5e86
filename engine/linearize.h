/* linearize.h: ordering a lowered kernel's uops into the linear loop IR (eng_stmt list). */
#ifndef ENG_LINEARIZE_H
#define ENG_LINEARIZE_H

#include "kernel.h"

/* Fill ir->stmts, ir->nparallel and the flop/byte estimates. nthreads guides which loop is
 * run in parallel. */
eng_status eng_linearize(eng_kernel_ir *ir, int nthreads, char *err, size_t errlen);

#endif
