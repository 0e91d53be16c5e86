/* linearize.h: ordering a lowered kernel's uops into the linear loop IR (eng_stmt list). */
#ifndef ENG_LINEARIZE_H
#define ENG_LINEARIZE_H

#include "kernel.h"

/* Fill ir->stmts, ir->nparallel, ir->group and the flop/byte estimates. t->parallelism guides which
 * loop is run in parallel and how many loops are merged into it; with t->reduce_group, a kernel
 * without a parallel loop runs as one work-group, and so does each iteration of an untiled
 * reduction kernel with too few of them (see eng_target_groups_rows). */
eng_status eng_linearize(eng_kernel_ir *ir, const bk_target *t, char *err, size_t errlen);

/* Whether a reduction kernel with `rows` parallel iterations and `red` reduced elements per
 * iteration should run one work-group per iteration on t: so few rows that their groups' threads
 * are at most twice what the device wants (with more, one thread per row of a register-tiled
 * kernel, which reuses loaded values, is faster), and a reduction long enough to keep every
 * thread of the group busy. */
bool eng_target_groups_rows(const bk_target *t, int64_t rows, int64_t red);

#endif
