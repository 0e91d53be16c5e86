/* choice.h: a kernel's optimisation choices as one record (tiles, cache blocking, packing,
 * work-groups) that a search can force on the lowering instead of the planners' heuristics. */
#ifndef ENG_CHOICE_H
#define ENG_CHOICE_H

#include "kernel.h"

/* What lower.c's planners (plan_tiles, plan_blocks) and the target's work-group size decide for
 * one kernel. tiledim[0]/tile[0]: the wide tile (vector lanes) on an output dim, tiledim[1]/
 * tile[1]: the narrow tile (register reuse); -1 / 1 when none. kblock: the reduction in blocks
 * of kblock (0: unblocked); mblock: the narrow tile's dim in blocks of mblock tiles (1: none);
 * pack: copy the wide operand's panel per block (needs kblock). group: the work-group size the
 * kernel is linearized for (-1: the target's, 0: none; a power of two otherwise). */
typedef struct eng_kernel_choice {
	int tiledim[2];
	int64_t tile[2];
	int64_t kblock, mblock;
	bool pack;
	int group;
} eng_kernel_choice;

/* The choice of no tiles, no blocking and the target's work-groups. */
eng_kernel_choice eng_choice_none(void);

/* The choice a lowered kernel carries (its tiles, blocks, packing; group -1). */
eng_kernel_choice eng_choice_of(const eng_kernel_ir *ir);

/* Whether two choices are the same. */
bool eng_choice_equal(const eng_kernel_choice *a, const eng_kernel_choice *b);

/* Apply c to ir after its first, untiled lowering (lower.c, instead of the planners): sets
 * ir's tiles and blocking, and *want_pack when c packs (the caller finds the operand). ENG_OK,
 * or ENG_EINVAL with a message in err when c does not fit the kernel (a tile that does not
 * divide its dim or is on a dim no reduction depends on, blocking of a kernel that cannot be
 * blocked, ...): a choice found for another kernel or a stale one must not lower. opts gets a
 * text summary for DEBUG. */
eng_status eng_choice_apply(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const eng_kernel_choice *c,
			    bool *want_pack, char *opts, size_t len, char *err, size_t errlen);

/* A short text of c ("wide d1x8 narrow d0x4 kblock 64 mblock 2 pack group 0"). */
void eng_choice_format(const eng_kernel_choice *c, char *out, size_t len);

#endif
