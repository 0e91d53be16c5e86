/* plan.h: the lowering's optimisation planners (plan.c), called by eng_lower between its first
 * lowering of a kernel and the second: each reads the lowered kernel and sets its tiles, blocks,
 * packed operand or split axis (fields of eng_kernel_ir), and appends its choice to opts. */
#ifndef ENG_PLAN_H
#define ENG_PLAN_H

#include <stddef.h>

#include "choice.h"
#include "kernel.h"

/* Output dims a uop depends on, through outer and tile loop vars. */
uint32_t eng_plan_dims_of(const eng_kernel_ir *ir, uint64_t deps);
/* Whether a kernel is one float32 sum on a CPU (caches stated; packed panels live on the kernel
 * thread's stack: no GPU work-groups or vector targets) with every output loop inside its
 * dims: what packing a panel needs (plan_packed, plan_blocks, and a search's choice). */
bool eng_plan_packable(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const eng_target *t);
/* ... and stores the sum as it is, so partial sums of a blocked reduction can go through the
 * output: what cache blocking needs. */
bool eng_plan_blockable(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const eng_target *t);
/* Register tiles for kernels with reductions (tiledim, tile). */
void eng_plan_tiles(eng_kernel_ir *ir, const eng_target *t, char *opts, size_t len);
/* A sum of products over several reduced axes with a packed operand (a convolution): tiles,
 * pack.node, and a block of the outermost reduced axis where needed; false if not planned. */
bool eng_plan_packed(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const eng_target *t, char *opts,
		     size_t len);
/* Cache blocking and packing of a matmul-shaped kernel (kblock, kfull, mblock, pack.node;
 * mrows, rpack.node). */
void eng_plan_blocks(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const eng_target *t, char *opts,
		     size_t len);
/* The narrow tile's rows where a blocked matmul's rows are packed (plan.c's plan_row_pack): 24
 * accumulators of the 32-wide tile's two vectors, in AVX-512's 32 registers with the two panel
 * vectors and a broadcast (8 rows keep 16 and leave the FMA ports idle part of the time); packed
 * so that a tile's rows at one reduction step are adjacent. */
#define ENG_RPACK_ROWS 12
/* The operand a blocked matmul's narrow tile's rows read (ir: first lowered, tiledim set),
 * if it can be packed in blocks of `rows` rows (eng_rpack): blocks dividing the dim, at least one
 * per thread, which are the kernel's parallel loop (no output dim before theirs but of size
 * one), the only load that moves with the rows. Else NULL. */
const eng_node *eng_plan_row_pack_operand(const eng_kernel_ir *ir, const eng_target *t, int64_t rows);
/* An innermost axis read as i / c split into (i / c, i % c) (vsplit, vsplit_n, vsplit_dim). */
void eng_plan_split(eng_kernel_ir *ir, const eng_target *t, char *opts, size_t len);

#endif
