/* kernel.h: one kernel as the scheduler builds it and the renderers consume it: buffers,
 * loops, reduction phases, stores, and the linear statement list (the loop IR). */
#ifndef ENG_KERNEL_H
#define ENG_KERNEL_H

#include "uop.h"

#define ENG_MAX_LOOPS 64
#define ENG_MAX_PHASES 32
#define ENG_MAX_KERNEL_BUFS 64
#define ENG_MAX_STORES 16

/* What kernels are built for: par parallel iterations per kernel wanted (the CPU: its
 * threads; a GPU: thousands of work-items); group, the threads of one work-group that can
 * split a reduction between them, combining partial results in local memory (0: none); vector,
 * the float vector lanes the renderer uses for a wide tile of 2, 4, 8 or 16 (0: none); l1, l2,
 * one core's data cache bytes, to block long reductions for them (0: no blocking). */
typedef struct eng_target {
	int par;
	int group;
	int vector;
	int64_t l1, l2;
} eng_target;

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
	/* nested: it runs inside the reduce loops of parent (and of parent's own parents), whose
	 * loop vars are nest, once per their iteration; 0 and -1 at the top */
	uint64_t nest;
	int parent;
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
} eng_kstore;

/* S_PACK: copy the packed operand's panel (ir->pack) into the kernel's local buffer. */
typedef enum eng_stmt_kind { S_LOOP, S_END, S_DEF, S_ACC_INIT, S_ACC_UPD, S_STORE, S_PACK } eng_stmt_kind;

/* The pseudo-buffer index of loads from a packed panel (bufs[ENG_PACK_BUF] describes it). */
#define ENG_PACK_BUF ENG_MAX_KERNEL_BUFS

/* An operand of a cache-blocked reduction read with a stride (lower.c's plan_blocks): for each
 * block of the reduction and wide tile, its panel (rows reduction steps x cols tile lanes) is
 * copied once into a local buffer, contiguous, and read from there by every row of the block.
 * Element (i, j) of the panel is buf[base + i * rstride + j * cstride]. */
typedef struct eng_pack {
	const eng_node *node; /* planned: the operand (NULL: none) */
	int buf;              /* its buffer, -1 until lowered */
	eng_dtype dtype;
	eng_uop *base;
	int64_t rows, cols, rstride, cstride;
} eng_pack;

typedef struct eng_stmt {
	uint8_t kind;
	bool parallel; /* S_LOOP: iterate [start, end) given at launch */
	bool unroll;   /* S_LOOP: a tile loop */
	int simd_acc;  /* S_LOOP: phase whose scalar accumulator the loop reduces into, or -1 */
	/* S_LOOP/S_END: merged into the parallel loop above it (no loop of its own: its variable
	 * is (p / div) % n of the parallel index p); S_LOOP parallel: div is the product of the
	 * merged loops' sizes (1 if none), its own variable p / div */
	bool merged;
	int64_t div;
	int var;       /* S_LOOP */
	int acc;       /* S_ACC_INIT, S_ACC_UPD: phase */
	int buf;       /* S_STORE */
	eng_uop *u;    /* S_DEF: the value; S_ACC_UPD, S_STORE: the value stored; S_PACK: base */
	eng_uop *idx;  /* S_STORE: element index */
} eng_stmt;

typedef struct eng_kernel_ir {
	eng_uops *uops;
	int nbufs;
	eng_kernel_buf bufs[ENG_MAX_KERNEL_BUFS + 1]; /* the last: ENG_PACK_BUF */
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
	/* cache blocking (plan_blocks in lower.c): the reduction split into blocks of kblock
	 * (loop kbvar outside the output loops), the narrow tile's dim split into blocks of mblock
	 * tiles (inner loop mivar, innermost of the output loops); 0 / -1 if none */
	int64_t kblock, kfull;
	int64_t mblock;
	int kbvar, mivar;
	int kvar; /* the reduction's loop inside the blocks */
	eng_pack pack;
	int nstmts, capstmts;
	eng_stmt *stmts;
	int64_t nparallel; /* iterations of the parallel loop (1 if none) */
	/* > 1: each parallel iteration (or the whole kernel, without a parallel loop) runs as one
	 * work-group of this many threads: reductions are split over them when untiled, and each
	 * output element is stored by one of them. 0: one thread per iteration. */
	int group;
	double flops, bytes;
	bool aliased; /* an output buffer is also read: no restrict */
	char name[96];
	char opts[256];
} eng_kernel_ir;

void eng_kernel_ir_free(eng_kernel_ir *ir);
/* Print the IR (statements and uops) to f, for DEBUG=5. */
void eng_kernel_ir_dump(const eng_kernel_ir *ir, void *f);

#endif
