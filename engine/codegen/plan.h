/* plan.h: the lowering's optimisation planners (plan.c), called by eng_lower between its first
 * lowering of a kernel and the second: each reads the lowered kernel and sets its tiles, blocks,
 * packed operand or split axis (fields of eng_kernel_ir), and appends its choice to opts. */
#ifndef ENG_PLAN_H
#define ENG_PLAN_H

#include <stddef.h>

#include "kernel.h"

/* The bytes a packed panel may take on t (it lives on the kernel thread's stack): an eighth of
 * L2, at most 128 KiB; the planners and a search's choice (choice.c) both keep to it. */
int64_t eng_plan_panel_max(const bk_target *t);
/* Output dims a uop depends on, through outer and tile loop vars. */
uint32_t eng_plan_dims_of(const eng_kernel_ir *ir, uint64_t deps);
/* Whether a kernel is one float32 sum on a CPU (caches stated; packed panels live on the kernel
 * thread's stack: no GPU work-groups or vector targets) with every output loop inside its
 * dims: what packing a panel needs (plan_packed, plan_blocks, and a search's choice). */
bool eng_plan_packable(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t);
/* ... and stores the sum as it is, so partial sums of a blocked reduction can go through the
 * output: what cache blocking needs. */
bool eng_plan_blockable(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t);
/* Register tiles for kernels with reductions (tiledim, tile). */
void eng_plan_tiles(eng_kernel_ir *ir, const bk_target *t, char *opts, size_t len);
/* A sum of products over several reduced axes with a packed operand (a convolution): tiles,
 * pack.node, and a block of the outermost reduced axis where needed; false if not planned. */
bool eng_plan_packed(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t, char *opts,
		     size_t len);
/* Cache blocking and packing of a matmul-shaped kernel (kblock, kfull, mblock, pack.node;
 * mrows, rpack.node). */
void eng_plan_blocks(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t, char *opts,
		     size_t len);
/* A CPU target's register tile for float32 sums of products, from its stated registers
 * (bk_target.vector_bytes, vector_regs): lanes, the float32 lanes of one vector; wide, the wide
 * tile's lanes, two vectors (two FMA chains per row, each reading the panel once per reduction
 * step); rows, the narrow tile's most rows, whose accumulators (acc: wide / lanes * rows
 * vectors) take three quarters of the registers, the rest left for the panel's vectors, a
 * broadcast and the compiler's temporaries. AVX-512 (32 x 64 B): 32 x 12, 24 accumulators;
 * AVX2 (16 x 32 B): 16 x 6, 12; NEON (32 x 16 B): 8 x 12, 24. A target that states no registers
 * (a GPU's C-family dialects never read this) gets AVX-512's. The rows are also the tile a
 * blocked matmul's rows are packed in (plan_row_pack), so that a tile's rows at one reduction
 * step are adjacent. */
typedef struct eng_regtile {
	int64_t lanes, wide, rows, acc;
} eng_regtile;
eng_regtile eng_regtile_of(const bk_target *t);
/* The operand a blocked matmul's narrow tile's rows read (ir: first lowered, tiledim set),
 * if it can be packed in blocks of `rows` rows (eng_rpack): blocks dividing the dim, at least one
 * per thread, which are the kernel's parallel loop (no output dim before theirs but of size
 * one), the only load that moves with the rows. Else NULL. */
const eng_node *eng_plan_row_pack_operand(const eng_kernel_ir *ir, const bk_target *t, int64_t rows);
/* An innermost axis read as i / c split into (i / c, i % c) (vsplit, vsplit_n, vsplit_dim). */
void eng_plan_split(eng_kernel_ir *ir, const bk_target *t, char *opts, size_t len);

#endif
