/* kernel.h: one kernel as the scheduler builds it and the renderers consume it: buffers,
 * loops, reduction phases, stores, and the linear statement list (the loop IR). */
#ifndef ENG_KERNEL_H
#define ENG_KERNEL_H

#include "backends/backend.h"
#include "uop.h"

#define ENG_MAX_LOOPS 64
#define ENG_MAX_PHASES 32
#define ENG_MAX_KERNEL_BUFS 64
#define ENG_MAX_STORES 16
#define ENG_SPLIT_SLOT 8 /* bytes of a split reduction's partial result (any compute type) */

/* What kernels are built for: bk_target (backends/backend.h), the device's stated facts. */

/* Whether a wide tile of w lanes can be vectors of at most max lanes: OpenCL's 2, 4, 8, 16. */
static inline bool eng_vector_lanes_ok(int64_t w, int max)
{
	return (w == 2 || w == 4 || w == 8 || w == 16) && w <= max;
}

/* KBLOCK: the outer half of a reduction split for the caches (its blocks run one after the
 * other around the output loops; partial sums go through the output buffer). */
typedef enum eng_loop_kind { L_OUTER, L_REDUCE, L_TILE, L_KBLOCK } eng_loop_kind;

/* Loop variable var (index in loops[]): n iterations; OUTER and TILE belong to output dim, where
 * the variable counts in steps of mul elements. */
typedef struct eng_loop {
	int64_t n;
	int64_t mul;
	uint8_t kind;
	int8_t dim;
	bool unroll; /* L_REDUCE: the inner part of a split reduce axis (plan.c's plan_split) */
} eng_loop;

/* A reduction computed inside the kernel: acc = op over the phase's reduce loops of value. */
typedef struct eng_phase {
	eng_op op; /* RSUM, RMAX, RPROD */
	eng_dtype dtype;
	eng_uop *value;
	int nred;
	int red[ENG_MAX_DIMS]; /* loop vars of the reduced axes */
	const eng_node *node;  /* the reduce node */
	eng_uop *key[ENG_MAX_DIMS + 1]; /* outer index + validity, to share equal phases */
	const eng_node *candidate; /* what to realize instead, if this phase must not fuse */
	uint32_t dims; /* output dims its value depends on */
	/* not inside another reduction's value: its loops may serve a later reduction over the same
	 * loop sizes (lower.c's shared_loops), run in one nest with it (linearize.c) */
	bool top;
	/* nested: it runs inside the reduce loops of parent (and of parent's own parents), whose
	 * loop vars are nest, once per their iteration; 0 and -1 at the top */
	uint64_t nest;
	int parent;
	/* a sum: per reduce loop (as red), the bounds [rlo, rhi) outside which every term is zero
	 * (clamp.c), in the variables of the loops outside it; NULL: 0 / the loop's size */
	eng_uop *rlo[ENG_MAX_DIMS], *rhi[ENG_MAX_DIMS];
} eng_phase;

typedef struct eng_kernel_buf {
	const eng_node *node; /* the node whose buffer this is */
	eng_dtype dtype;
	int64_t numel;
	bool output;
} eng_kernel_buf;

typedef struct eng_kstore {
	int buf;
	eng_uop *value;
	eng_uop *cond; /* stored only where true (a block's overhanging rows); NULL: always */
} eng_kstore;

/* S_PACK: copy the packed operand's panel (ir->pack) into the kernel's local buffer; S_RPACK:
 * copy the narrow operand's block (ir->rpack) into the call's scratch; S_PREFETCH: prefetch
 * the output tile a blocked reduction's partial sums are added to. */
typedef enum eng_stmt_kind { S_LOOP, S_END, S_DEF, S_ACC_INIT, S_ACC_UPD, S_STORE, S_PACK, S_RPACK, S_PREFETCH } eng_stmt_kind;

/* The pseudo-buffer indices of loads from a packed panel (bufs[ENG_PACK_BUF] describes it) and
 * from the narrow operand's packed block (bufs[ENG_RPACK_BUF]). */
#define ENG_PACK_BUF ENG_MAX_KERNEL_BUFS
#define ENG_RPACK_BUF (ENG_MAX_KERNEL_BUFS + 1)

/* An operand of a sum of products read with a stride along the wide tile (plan.c's plan_blocks,
 * plan_packed): for each block of the reduction and wide tile, its panel (the reduction loops'
 * steps x the tile's lanes) is copied once into a local buffer, contiguous, and read from there
 * by every row. The panel spans nr reduction loops, outermost first, of rn[i] steps each (rows
 * is their product); element (r_0 .. r_nr-1, j) of the panel is
 * buf[base + sum_i r_i * rstride[i] + j * cstride], stored at
 * ((r_0 * rn[1] + r_1) * rn[2] + ...) * cols + j. */
typedef struct eng_pack {
	const eng_node *node; /* planned: the operand (NULL: none) */
	int buf;              /* its buffer, -1 until lowered */
	eng_dtype dtype;
	eng_uop *base;
	int nr;
	int64_t rn[ENG_MAX_DIMS], rstride[ENG_MAX_DIMS];
	int64_t rows, cols, cstride;
} eng_pack;

/* The narrow tile's operand of a blocked matmul-shaped sum (plan_blocks on a CPU): for each
 * block of the reduction and each block of rows (the parallel loop's iteration p), its rows x
 * kc block is copied into the scratch of the call running p (tiles * rows_t * kc elements, the
 * kernel's scratch: a call runs its iterations one after another, and the calls a launch's
 * thread runs, one after another, share that thread's; nothing in it outlives the iteration
 * that wrote it), tile by tile, so that the tile's rows at one reduction step are adjacent:
 * element (row, k) of the block, row = t * rows_t + r, is buf[base + row * rstride + k * kstride],
 * stored at (t * kc + k) * rows_t + r; rows past `rows` (a last tile that overhangs the block)
 * are zero. */
typedef struct eng_rpack {
	const eng_node *node; /* planned: the operand (NULL: none) */
	int buf;              /* its buffer, -1 until lowered */
	eng_dtype dtype;
	eng_uop *base, *slot; /* the block's start in buf; the parallel iteration p (its loop) */
	int64_t tiles, rows_t, rows, kc, rstride, kstride;
} eng_rpack;

typedef struct eng_stmt {
	uint8_t kind;
	bool parallel; /* S_LOOP: iterate [start, end) given at launch */
	bool unroll;   /* S_LOOP: a tile loop, or the inner part of a split axis */
	bool simd;     /* S_LOOP: the outer part of a split output axis: its iterations are vector lanes */
	uint32_t simd_accs; /* S_LOOP: phases whose scalar accumulators the loop reduces into (bits) */
	/* S_LOOP/S_END: merged into the parallel loop above it (no loop of its own: its variable
	 * is (p / div) % n of the parallel index p); S_LOOP parallel: div is the product of the
	 * merged loops' sizes (1 if none), its own variable p / div */
	bool merged;
	int64_t div;
	int var;       /* S_LOOP */
	int acc;       /* S_ACC_INIT, S_ACC_UPD: phase */
	int buf;       /* S_STORE */
	eng_uop *u;    /* S_DEF: the value; S_ACC_UPD, S_STORE: the value stored; S_PACK: base */
	eng_uop *idx;  /* S_STORE: element index; S_RPACK: the slot (parallel iteration) */
	eng_uop *cond; /* S_STORE: stored only where true (NULL: always); S_PREFETCH: when */
	eng_uop *lo, *hi; /* S_LOOP: iterate [lo, hi) of its range (a clamped sum's); NULL: 0, n */
} eng_stmt;

typedef struct eng_kernel_ir {
	eng_uops *uops;
	int nbufs;
	eng_kernel_buf bufs[ENG_MAX_KERNEL_BUFS + 2]; /* the last two: ENG_PACK_BUF, ENG_RPACK_BUF */
	int ndim;
	int64_t shape[ENG_MAX_DIMS]; /* output shape shared by all stores */
	int nloops;
	eng_loop loops[ENG_MAX_LOOPS];
	int nphases;
	eng_phase phases[ENG_MAX_PHASES];
	int nstores;
	eng_kstore stores[ENG_MAX_STORES];
	int tiledim[2];   /* output dims tiled, -1 if none */
	int64_t tile[2];  /* tile sizes (1 if none) */
	int tilevar[2];   /* loop vars of the tile loops */
	/* cache blocking (plan_blocks in plan.c): the reduction split into blocks of kblock
	 * (loop kbvar outside the output loops), the narrow tile's dim split into blocks of mblock
	 * tiles (inner loop mivar, innermost of the output loops); 0 / -1 if none */
	int64_t kblock, kfull;
	int64_t mblock;
	int kbvar, mivar;
	/* > 0: blocks of mrows rows of the narrow tile's dim, each of mblock tiles of which the
	 * last may overhang it (mblock * tile >= mrows): rows past the block are computed from the
	 * zero rows of its packed block (rpack) and not stored. 0: mblock * tile rows a block */
	int64_t mrows;
	/* split (plan_split): the innermost axis, read as i / vsplit by some operand, looped as
	 * (i / vsplit, i % vsplit), the inner part unrolled and the outer one vectorized; an
	 * output axis (vsplit_dim, through the narrow tile) or a reduction's innermost axis of
	 * vsplit_n steps (vsplit_dim -1). vsplit 0: none */
	int64_t vsplit, vsplit_n;
	int vsplit_dim;
	eng_pack pack;
	eng_rpack rpack;
	int64_t scratch; /* bytes of scratch each call of the kernel uses (rpack), 0 if none */
	int nstmts, capstmts;
	eng_stmt *stmts;
	int64_t nparallel; /* iterations of the parallel loop (1 if none) */
	/* > 1: each parallel iteration (or the whole kernel, without a parallel loop) runs as one
	 * work-group of this many threads: reductions are split over them when untiled, and each
	 * output element is stored by one of them. 0: one thread per iteration. */
	int group;
	/* > 1: a split reduction (too few rows for the device's threads, a long reduction): the
	 * parallel loop runs over rows x split chunks, each chunk of a row reducing its share of
	 * every phase's longest reduce loop into a partial result; the rest of the kernel (the
	 * partials combined in chunk order, then the stores) runs once after all chunks, in the
	 * same launch. nparallel counts rows x split; each phase keeps nparallel partials of
	 * ENG_SPLIT_SLOT bytes in the launch's scratch. 0: not split. */
	int64_t split;
	double flops, bytes;
	bool aliased; /* an output buffer is also read: no restrict */
	char name[96];
	char opts[256];
} eng_kernel_ir;

void eng_kernel_ir_free(eng_kernel_ir *ir);
/* Print the IR (statements and uops) to f, for DEBUG=5. */
void eng_kernel_ir_dump(const eng_kernel_ir *ir, void *f);

#endif
