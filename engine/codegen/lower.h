/* lower.h: lowering a group of graph nodes (the outputs of one kernel) into a kernel's
 * uops: index maths through movement ops, reductions as in-kernel phases, stores. */
#ifndef ENG_LOWER_H
#define ENG_LOWER_H

#include "choice.h"
#include "kernel.h"

/* Tells the lowering which nodes are (or will be, by earlier kernels) stored in buffers. */
typedef bool (*eng_is_stored_fn)(void *arg, const eng_node *n);

typedef struct eng_lower_opts {
	eng_is_stored_fn is_stored;
	void *arg;
	bool optimize; /* choose tiles (upcasting) for reduction kernels */
	bk_target target; /* to pick a parallel loop that feeds the device, and work-groups */
	/* With optimize: these tiles and blocks instead of the planners' (a search's choice; its
	 * group is the caller's to put in target). One that does not fit fails with ENG_EINVAL. */
	const eng_kernel_choice *force;
} eng_lower_opts;

/* Lower roots (equal shapes) into ir (zeroed by the caller; freed with eng_kernel_ir_free).
 * Returns ENG_OK, or ENG_ESTATE with *must_store set to a node that has to be stored in a
 * buffer of its own for the kernel to be valid or cheap (the scheduler then retries), or
 * another status (with err) on failure. On success ir holds the linear statement list. */
eng_status eng_lower(const eng_node *const *roots, int nroots, const eng_lower_opts *o,
		     eng_kernel_ir *ir, const eng_node **must_store, char *err, size_t errlen);

/* The kernel's stored nodes other than its roots (inputs), after a successful lowering. */
int eng_lower_inputs(const eng_kernel_ir *ir, const eng_node **out, int max);

#endif
