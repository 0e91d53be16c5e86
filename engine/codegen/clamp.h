/* clamp.h: a sum's reduce loops run only where its terms can be nonzero. A term that is a
 * product with a zero-padded value (a pad fused as a guard, or a stored buffer whose border a
 * pad made zero: the padded gradient a convolution's input gradient reads) is zero wherever
 * the pad's bound fails; where that bound is linear in a reduce loop's variable, the loop's
 * range is cut to it (a convolution's kernel rows that fall in the padding are not looped). */
#ifndef ENG_CLAMP_H
#define ENG_CLAMP_H

#include "kernel.h"

/* Of a buffer's value (node n, stored): per dim, [lo, hi) outside which every element is zero.
 * False when nothing is known (the whole shape). */
bool eng_zero_box(const eng_node *n, int64_t *lo, int64_t *hi);

/* The condition true wherever stored node n read at idx (one uop per dim) may be nonzero, or
 * NULL when nothing is known. */
eng_uop *eng_zero_box_cond(eng_uops *u, const eng_node *n, eng_uop *const *idx);

/* A value known to be zero wherever cond is false (a load of a stored zero-bordered buffer). */
typedef struct eng_zero_fact {
	const eng_uop *value;
	eng_uop *cond;
} eng_zero_fact;

/* Set ph->rlo / ph->rhi: for each of the sum ph's reduce loops, the bounds where its value can
 * be nonzero (from guards, zero-else selects and facts[0..nfacts) on the factors of its value),
 * in terms of loop variables outside that loop (`outer`: the output loops' and enclosing
 * phases' variables); NULL where nothing restricts it. */
void eng_phase_clamp(eng_kernel_ir *ir, eng_phase *ph, uint64_t outer, const eng_zero_fact *facts, int nfacts);

/* The share of a clamped loop's n iterations that runs, averaged over the variables its bounds
 * depend on (1.0 when there are too many combinations to count): for the flop estimate. */
double eng_clamp_share(const eng_kernel_ir *ir, const eng_uop *lo, const eng_uop *hi, int64_t n);

#endif
