/* schedule.h: turns the nodes to realize into an ordered list of kernels: decides which
 * nodes get buffers (the fusion boundaries), groups same-shaped outputs, orders kernels. */
#ifndef ENG_SCHEDULE_H
#define ENG_SCHEDULE_H

#include "core/context.h"
#include "codegen/kernel.h"

typedef struct eng_sched_item {
	const eng_node *roots[ENG_MAX_STORES];
	int nroots;
	eng_kernel_ir ir;
	int ndeps;
	int *deps; /* items that must run first */
} eng_sched_item;

typedef struct eng_schedule {
	eng_sched_item *items; /* in run order */
	int n;
	const eng_node **empty; /* nodes of zero elements: buffers only, no kernel */
	int nempty;
} eng_schedule;

/* Build the schedule for nodes (duplicates and realized nodes are ignored) on the target par:
 * output loops are merged into the parallel one until it has par->par iterations; kernels run
 * as work-groups where the target has them (see eng_linearize). On failure the context error
 * is set and *out is empty. */
eng_status eng_schedule_build_on(eng_ctx *ctx, const bk_target *par, eng_node *const *nodes, int n,
				 eng_schedule *out);
void eng_schedule_free(eng_schedule *s);

#endif
