/* choice.h: a kernel's optimisation choices as one record (tiles, cache blocking, packing,
 * work-groups) that a search can force on the lowering instead of the planners' heuristics. */
#ifndef ENG_CHOICE_H
#define ENG_CHOICE_H

#include "kernel.h"

/* What the planners (plan.c: plan_tiles, plan_packed, plan_blocks) and the target's work-group size decide for
 * one kernel. tiledim[0]/tile[0]: the wide tile (vector lanes) on an output dim, tiledim[1]/
 * tile[1]: the narrow tile (register reuse); -1 / 1 when none. kblock: the reduction in blocks
 * of kblock on its outermost reduced axis (0: unblocked); mblock: the narrow tile's dim in blocks
 * of mblock tiles (1: none; needs kblock); pack: the input buffer (index in the kernel's bufs)
 * whose panel along the wide tile is copied contiguous per block (-1: none; where the lowering
 * cannot pack it, it is read in place). group: the work-group size the kernel is linearized for
 * (-1: the target's, 0: none; a power of two otherwise). rpack: the input buffer read by the
 * narrow tile's rows, packed per block of rows into scratch (-1: none; eng_rpack); mrows: with
 * it, blocks of mrows rows whose last tile overhangs them (0: mblock tiles a block). */
typedef struct eng_kernel_choice {
	int tiledim[2];
	int64_t tile[2];
	int64_t kblock, mblock;
	int pack;
	int group;
	int64_t mrows;
	int rpack;
} eng_kernel_choice;

/* The choice of no tiles, no blocking and the target's work-groups. */
eng_kernel_choice eng_choice_none(void);

/* The choice a lowered kernel carries (its tiles, blocks, packing; group -1). */
eng_kernel_choice eng_choice_of(const eng_kernel_ir *ir);

/* Whether two choices are the same. */
bool eng_choice_equal(const eng_kernel_choice *a, const eng_kernel_choice *b);

/* Apply c to ir after its first, untiled lowering on target t (lower.c, instead of the
 * planners): sets ir's tiles, blocking and packed operand. ENG_OK, or ENG_EINVAL with a message
 * in err when c does not fit the kernel (a tile that does not divide its dim or is on a dim no
 * reduction depends on, blocking or packing of a kernel that cannot have it, a panel over the
 * stack's budget, ...): a choice found for another kernel or a stale one must not lower. opts
 * gets a text summary for DEBUG. */
eng_status eng_choice_apply(eng_kernel_ir *ir, const eng_node *const *roots, int nroots,
			    const eng_kernel_choice *c, const bk_target *t, char *opts, size_t len,
			    char *err, size_t errlen);

/* A short text of c ("wide d1x8 narrow d0x4 kblock 64 mblock 2 pack group 0"). */
void eng_choice_format(const eng_kernel_choice *c, char *out, size_t len);

#endif
