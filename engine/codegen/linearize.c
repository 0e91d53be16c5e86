/* linearize.c: orders a lowered kernel into the loop IR: the loop nest (output loops that
 * phases depend on, then phases, then the remaining output loops with the stores), with
 * every uop defined once, in the outermost loop where its inputs exist (hoisting); decides
 * the parallel loop, work-groups, and the split of long reductions to few rows. */
#include "linearize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clamp.h"

typedef struct block {
	int var;      /* loop var, -1 for the kernel body */
	int inst;     /* instance id */
	int point;    /* statement index where definitions for this block go; -1 = append */
	double trips; /* iterations of this block's body, all enclosing loops included */
	bool merged;  /* its loop is merged into the parallel one (see eng_stmt.merged) */
} block;

typedef struct lin {
	eng_kernel_ir *ir;
	block blocks[ENG_MAX_LOOPS + 2];
	int nblocks;
	int next_inst;
	int dbody; /* block depth of the innermost loop phases depend on */
	int acc_at[ENG_MAX_PHASES]; /* block depth where each phase's accumulator is declared */
	bool packed, rpacked; /* S_PACK, S_RPACK emitted */
	uint8_t *open; /* open[inst] */
	int capopen;
	eng_status st;
	char *err;
	size_t errlen;
} lin;

static eng_status lfail(lin *l, eng_status s, const char *msg)
{
	if (!l->st) {
		l->st = s;
		snprintf(l->err, l->errlen, "%s", msg);
	}
	return s;
}

static void insert_stmt(lin *l, int at, const eng_stmt *s)
{
	eng_kernel_ir *ir = l->ir;
	if (ir->nstmts == ir->capstmts) {
		int nc = ir->capstmts ? ir->capstmts * 2 : 256;
		eng_stmt *ns = realloc(ir->stmts, nc * sizeof(*ns));
		if (!ns) {
			lfail(l, ENG_ENOMEM, "out of memory linearizing");
			return;
		}
		ir->stmts = ns;
		ir->capstmts = nc;
	}
	if (at < 0 || at > ir->nstmts)
		at = ir->nstmts;
	memmove(&ir->stmts[at + 1], &ir->stmts[at], (ir->nstmts - at) * sizeof(eng_stmt));
	ir->stmts[at] = *s;
	ir->nstmts++;
	for (int b = 0; b < l->nblocks; b++)
		if (l->blocks[b].point >= at)
			l->blocks[b].point++;
}

static void emit(lin *l, eng_stmt s) { insert_stmt(l, -1, &s); }

static bool is_open(lin *l, int inst) { return inst > 0 && inst < l->capopen && l->open[inst]; }

static void open_block(lin *l, int var, double n)
{
	if (l->next_inst + 1 >= l->capopen) {
		int nc = l->capopen ? l->capopen * 2 : 256;
		uint8_t *o = realloc(l->open, nc);
		if (!o) {
			lfail(l, ENG_ENOMEM, "out of memory linearizing");
			return;
		}
		memset(o + l->capopen, 0, nc - l->capopen);
		l->open = o;
		l->capopen = nc;
	}
	block *parent = l->nblocks ? &l->blocks[l->nblocks - 1] : NULL;
	if (parent)
		parent->point = l->ir->nstmts - 1; /* the LOOP just emitted */
	block *b = &l->blocks[l->nblocks++];
	b->var = var;
	b->inst = ++l->next_inst;
	b->point = -1;
	b->merged = false;
	b->trips = (parent ? parent->trips : 1.0) * (double)(n > 0 ? n : 0);
	l->open[b->inst] = 1;
}

static void close_block(lin *l)
{
	block *b = &l->blocks[--l->nblocks];
	l->open[b->inst] = 0;
	if (l->nblocks)
		l->blocks[l->nblocks - 1].point = -1;
}

static void loop_div(lin *l, int var, bool parallel, bool merged, int64_t div)
{
	eng_stmt s = {.kind = S_LOOP, .var = var, .parallel = parallel, .merged = merged, .div = div};
	emit(l, s);
	open_block(l, var, l->ir->loops[var].n);
	if (l->nblocks)
		l->blocks[l->nblocks - 1].merged = merged;
}

static void loop(lin *l, int var, bool parallel, bool unroll, uint32_t simd_accs)
{
	eng_stmt s = {.kind = S_LOOP, .var = var, .parallel = parallel, .unroll = unroll, .simd_accs = simd_accs, .div = 1};
	emit(l, s);
	open_block(l, var, (double)l->ir->loops[var].n);
}

static void need(lin *l, eng_uop *x);

/* The variables of the open loops. */
static uint64_t open_vars(const lin *l)
{
	uint64_t open = 0;
	for (int b = 1; b < l->nblocks; b++)
		if (l->blocks[b].var >= 0)
			open |= 1ull << l->blocks[b].var;
	return open;
}

/* Reduce loop k of phases p..q-1, cut to [lo, hi) where the phase's terms can be nonzero
 * (clamp.c) when it is the nest's only phase, the kernel neither splits its reductions nor runs
 * them over a work-group's threads, and the bounds' variables are open here; else whole. */
static void reduce_loop(lin *l, int p, int q, int k, uint32_t simd_accs)
{
	const eng_kernel_ir *ir = l->ir;
	const eng_phase *ph = &ir->phases[p];
	int var = ph->red[k];
	eng_uop *lo = ph->rlo[k], *hi = ph->rhi[k];
	uint64_t deps = (lo ? lo->deps : 0) | (hi ? hi->deps : 0);
	if (!lo && !hi) {
		loop(l, var, false, ir->loops[var].unroll, simd_accs);
		return;
	}
	if (q != p + 1 || ir->split > 1 || ir->group > 1 || (deps & ~open_vars(l))) {
		loop(l, var, false, ir->loops[var].unroll, simd_accs);
		return;
	}
	need(l, lo);
	need(l, hi);
	emit(l, (eng_stmt){.kind = S_LOOP, .var = var, .simd_accs = simd_accs, .div = 1, .lo = lo, .hi = hi});
	open_block(l, var, (double)ir->loops[var].n * eng_clamp_share(ir, lo, hi, ir->loops[var].n));
}

static void end(lin *l)
{
	emit(l, (eng_stmt){.kind = S_END, .merged = l->nblocks ? l->blocks[l->nblocks - 1].merged : false});
	close_block(l);
}

/* Copy the packed operand's panel (eng_pack), and the narrow operand's block of rows (eng_rpack),
 * as far out as each one's start allows: at the first point where every loop the start depends
 * on is open, so it is copied as few times as it can be. */
static void pack(lin *l)
{
	const eng_kernel_ir *ir = l->ir;
	uint64_t open = open_vars(l);
	if (ir->pack.buf >= 0 && !l->packed && !(ir->pack.base->deps & ~open)) {
		need(l, ir->pack.base);
		emit(l, (eng_stmt){.kind = S_PACK, .u = ir->pack.base});
		l->packed = true;
	}
	if (ir->rpack.buf >= 0 && !l->rpacked && !((ir->rpack.base->deps | ir->rpack.slot->deps) & ~open)) {
		need(l, ir->rpack.base);
		emit(l, (eng_stmt){.kind = S_RPACK, .u = ir->rpack.base, .idx = ir->rpack.slot});
		l->rpacked = true;
	}
}

/* The output element's row-major offset, from the loops over its dims (without the tile loops:
 * the tile's first element). */
static eng_uop *out_index(const eng_kernel_ir *ir, bool tiles)
{
	eng_uops *u = ir->uops;
	int64_t st[ENG_MAX_DIMS];
	eng_contiguous_strides(ir->ndim, ir->shape, st);
	eng_uop *idx = u_int_const(u, 0);
	for (int d = 0; d < ir->ndim; d++) {
		eng_uop *x = u_int_const(u, 0);
		for (int v = 0; v < ir->nloops; v++)
			if (ir->loops[v].dim == d &&
			    (ir->loops[v].kind == L_OUTER || (tiles && ir->loops[v].kind == L_TILE)))
				x = u_add(u, x, u_mul_const(u, u_var(u, v, ir->loops[v].n), ir->loops[v].mul));
		idx = u_add(u, idx, u_mul_const(u, x, st[d]));
	}
	return idx;
}

static bool trivial(const eng_uop *x) { return x->kind == U_CONST || x->kind == U_VAR || x->kind == U_ACC; }

static bool counts_as_flop(const eng_uop *x)
{
	return x->kind == U_ALU && x->dtype != ENG_I64 && x->op != ENG_OP_CAST && x->op != ENG_OP_BITCAST;
}

static void need(lin *l, eng_uop *x)
{
	if (l->st || !x || trivial(x) || is_open(l, x->defined_at))
		return;
	for (int i = 0; i < x->nsrc; i++)
		if (x->src[i])
			need(l, x->src[i]);
	/* home: innermost open block whose var the value depends on */
	int home = 0;
	for (int b = l->nblocks - 1; b > 0; b--)
		if (l->blocks[b].var >= 0 && ((x->deps >> l->blocks[b].var) & 1)) {
			home = b;
			break;
		}
	uint64_t missing = x->deps;
	for (int b = 1; b < l->nblocks; b++)
		if (l->blocks[b].var >= 0)
			missing &= ~(1ull << l->blocks[b].var);
	if (missing) {
		lfail(l, ENG_ESTATE, "internal: value used outside the loop of its variable");
		return;
	}
	for (int p = 0; p < l->ir->nphases; p++) /* after the accumulators' loops */
		if (((x->accdeps >> p) & 1) && home < l->acc_at[p])
			home = l->acc_at[p];
	if (home >= l->nblocks) {
		lfail(l, ENG_ESTATE, "internal: value read outside the loop of its accumulator");
		return;
	}
	block *h = &l->blocks[home];
	eng_stmt s = {.kind = S_DEF, .u = x};
	insert_stmt(l, h->point, &s);
	x->defined_at = h->inst;
	if (counts_as_flop(x))
		l->ir->flops += h->trips;
}

/* Whether phase p has phases nested in its loops. */
static bool has_children(const eng_kernel_ir *ir, int p)
{
	for (int q = 0; q < ir->nphases; q++)
		if (ir->phases[q].parent == p)
			return true;
	return false;
}

/* Whether phase q joins the loop nest of phases `group` (phase p first, see eng_linearize). */
static bool joins_nest(const eng_kernel_ir *ir, int p, int q, uint32_t group)
{
	const eng_phase *a = &ir->phases[p], *b = &ir->phases[q];
	return b->parent < 0 && b->nred == a->nred && a->nred > 0 && !memcmp(b->red, a->red, sizeof(int) * a->nred) &&
	       !(b->value->accdeps & group) && !has_children(ir, p) && !has_children(ir, q);
}

/* Phases p..q-1 (bits group) in one loop nest: their accumulators, the reduce loops with the
 * phases nested in them (those whose parent p is, in order: then q is p + 1), and the updates.
 * The innermost loop reduces in vector lanes, or the outer part of a split axis (plan_split),
 * whose inner part is unrolled inside it; a loop with phases nested in it does not. */
static void emit_phase(lin *l, int p, int q, uint32_t group, const int *tiles, int nt)
{
	eng_kernel_ir *ir = l->ir;
	eng_phase *ph = &ir->phases[p];
	bool outer = has_children(ir, p);
	for (int k = p; k < q; k++) {
		l->acc_at[k] = l->nblocks - 1;
		emit(l, (eng_stmt){.kind = S_ACC_INIT, .acc = k});
	}
	if (ir->rpack.buf >= 0 && ir->kbvar >= 0 && ir->nstores == 1) {
		/* the output tile the block's partial sums will be added to, fetched while it runs */
		eng_uops *u = ir->uops;
		eng_uop *at = out_index(ir, false);
		eng_uop *cond = u_lt(u, u_int_const(u, 0), u_var(u, ir->kbvar, ir->loops[ir->kbvar].n));
		need(l, at);
		need(l, cond);
		emit(l, (eng_stmt){.kind = S_PREFETCH, .buf = ir->stores[0].buf, .idx = at, .cond = cond});
	}
	int simd_k = ph->nred - 1 - (ph->nred > 1 && ir->loops[ph->red[ph->nred - 1]].unroll);
	for (int k = 0; k < ph->nred; k++)
		reduce_loop(l, p, q, k, (k == simd_k && nt == 0 && !outer) ? group : 0);
	for (int c = 0; c < p && !l->st; c++)
		if (ir->phases[c].parent == p)
			emit_phase(l, c, c + 1, 1u << c, tiles, nt);
	for (int k = 0; k < nt; k++)
		loop(l, tiles[k], false, true, 0);
	for (int k = p; k < q; k++)
		need(l, ir->phases[k].value);
	for (int k = p; k < q; k++) {
		emit(l, (eng_stmt){.kind = S_ACC_UPD, .acc = k, .u = ir->phases[k].value});
		ir->flops += l->blocks[l->nblocks - 1].trips;
	}
	for (int k = 0; k < nt + ph->nred; k++)
		end(l);
}

static int pick_parallel(const eng_kernel_ir *ir, const int *loops, int n, int nthreads)
{
	int best = -1;
	for (int i = 0; i < n; i++) {
		if (ir->loops[loops[i]].n >= nthreads)
			return i;
		if (best < 0 || ir->loops[loops[i]].n > ir->loops[loops[best]].n)
			best = i;
	}
	return best;
}

static void move_front(int *loops, int i)
{
	int v = loops[i];
	memmove(&loops[1], &loops[0], i * sizeof(int));
	loops[0] = v;
}

/* Each thread of a group gets at least this many elements of a grouped row's reduction. */
#define GROUP_ROW_MIN_PER_THREAD 16

bool eng_target_groups_rows(const bk_target *t, int64_t rows, int64_t red)
{
	return t->reduce_group > 1 && rows > 1 && rows * t->reduce_group <= 2 * (int64_t)t->parallelism &&
	       red >= (int64_t)GROUP_ROW_MIN_PER_THREAD * t->reduce_group;
}

/* A split reduction's chunk reduces at least this many elements of a row (256 KiB of float32,
 * ~20us on one core): below that, waking the pool's threads costs about what it saves. A
 * work-group's chunk (a GPU's) at least SPLIT_MIN_PER_ITEM per thread of the group. */
#define SPLIT_MIN_CHUNK 65536
#define SPLIT_MIN_PER_ITEM 256
/* At most this many work-groups (rows x chunks): <name>_fin, one work-group, reads the
 * partials a few per thread (each a memory latency on a GPU) before its tree. */
#define SPLIT_MAX_GROUPS 256
/* Work-groups wanted per group's worth of the target's parallelism: smaller chunks stay in a
 * core's cache while a group's work-items stride through them one after another (PoCL: a 2^24
 * sum in 20-30 ms instead of 48), and a GPU gets several groups per compute unit. */
#define SPLIT_GROUP_FACTOR 4

/* The chunks each row's reductions are split into (see eng_kernel_ir.split), or 0: on a target
 * that keeps partials (t->split_scratch), a kernel with `rows` parallel iterations holding all its
 * output loops (all_rows), untiled and unblocked, whose phases read no other phase's result and
 * are not bool, with a reduction of `red` elements per row, and fewer rows than the target
 * wants: threads (the CPU), or groups of ir->group threads when the kernel runs as work-groups
 * (a target with groups splits no other kernel). As many chunks as make up what the target
 * wants, each of at least the minimum above and of each phase's longest reduce loop (which the
 * renderer splits). */
static int64_t split_ways(const eng_kernel_ir *ir, const bk_target *t, int64_t rows, bool all_rows, int64_t red)
{
	if (t->split_scratch <= 0 || !all_rows || ir->nphases < 1 || ir->tiledim[0] >= 0 || ir->tiledim[1] >= 0 ||
	    ir->kbvar >= 0 || ir->mivar >= 0 || ir->pack.buf >= 0 || (t->reduce_group > 1 && ir->group <= 1))
		return 0;
	int64_t want = ir->group > 1 ? SPLIT_GROUP_FACTOR * (int64_t)t->parallelism / ir->group : t->parallelism;
	if (ir->group > 1 && want > SPLIT_MAX_GROUPS)
		want = SPLIT_MAX_GROUPS;
	int64_t min_chunk = ir->group > 1 ? (int64_t)ir->group * SPLIT_MIN_PER_ITEM : SPLIT_MIN_CHUNK;
	if (rows >= want)
		return 0;
	int64_t s = (want + rows - 1) / rows;
	if (s > red / min_chunk)
		s = red / min_chunk;
	for (int p = 0; p < ir->nphases; p++) {
		const eng_phase *ph = &ir->phases[p];
		if (ph->nred < 1 || ph->value->accdeps || ph->dtype == ENG_BOOL)
			return 0;
		int64_t longest = 0; /* the loop a chunk takes a share of: every chunk gets some */
		for (int k = 0; k < ph->nred; k++)
			longest = ir->loops[ph->red[k]].n > longest ? ir->loops[ph->red[k]].n : longest;
		s = longest < s ? longest : s;
	}
	if (s < 2 || rows * s * ir->nphases * ENG_SPLIT_SLOT > t->split_scratch)
		return 0;
	return s;
}

eng_status eng_linearize(eng_kernel_ir *ir, const bk_target *t, char *err, size_t errlen)
{
	int nthreads = t->parallelism;
	lin L = {.ir = ir, .err = err, .errlen = errlen};
	lin *l = &L;
	eng_uops *u = ir->uops;
	uint32_t D = 0;
	for (int p = 0; p < ir->nphases; p++)
		D |= ir->phases[p].dims;
	int dl[ENG_MAX_DIMS], el[ENG_MAX_DIMS], nd = 0, ne = 0;
	int tiles[2], nt = 0;
	for (int v = 0; v < ir->nloops; v++) {
		const eng_loop *lp = &ir->loops[v];
		if (lp->kind == L_TILE)
			nt++;
		if (lp->kind != L_OUTER || lp->n <= 1 || v == ir->mivar)
			continue;
		if ((D >> lp->dim) & 1)
			dl[nd++] = v;
		else
			el[ne++] = v;
	}
	/* tile loops innermost, the wide one (vector lanes) last */
	if (ir->tiledim[1] >= 0)
		tiles[0] = ir->tilevar[1];
	if (ir->tiledim[0] >= 0)
		tiles[ir->tiledim[1] >= 0] = ir->tilevar[0];
	if (nthreads < 1)
		nthreads = 1;
	/* cache blocking (plan.c's plan_blocks): a block of rows loops innermost of the output
	 * loops, never parallel or merged */
	int ndp = nd;
	if (ir->mivar >= 0 && ir->loops[ir->mivar].n > 1)
		dl[nd++] = ir->mivar;
	bool par_in_d = ndp > 0;
	int pi = par_in_d ? pick_parallel(ir, dl, ndp, nthreads) : pick_parallel(ir, el, ne, nthreads);
	if (pi >= 0)
		move_front(par_in_d ? dl : el, pi);
	ir->nparallel = pi >= 0 ? ir->loops[par_in_d ? dl[0] : el[0]].n : 1;
	/* too few iterations for the device: merge the loops nested right inside the parallel one
	 * into it (they open and close together, so nothing runs between them) */
	int nmerge = 0;
	const int *pl = par_in_d ? dl : el;
	int npl = par_in_d ? ndp : ne;
	while (pi >= 0 && nmerge + 1 < npl && ir->nparallel < nthreads) {
		nmerge++;
		ir->nparallel *= ir->loops[pl[nmerge]].n;
	}
	/* work-groups: the kernel without a parallel loop is one; untiled reductions with too few
	 * rows run one per row */
	int64_t red = 0;
	for (int p = 0; p < ir->nphases; p++) {
		int64_t r = 1;
		for (int k = 0; k < ir->phases[p].nred; k++)
			r *= ir->loops[ir->phases[p].red[k]].n;
		red = r > red ? r : red;
	}
	ir->group = 0;
	if (t->reduce_group > 1 && ir->nparallel <= 1)
		ir->group = t->reduce_group;
	else if (par_in_d && ir->tiledim[0] < 0 && eng_target_groups_rows(t, ir->nparallel, red))
		ir->group = t->reduce_group;
	/* a long reduction to few rows: its chunks are the parallel iterations (every output loop
	 * must be the parallel one or merged into it, and nothing but stores follow the phases) */
	bool all_rows = ne == 0 && (ndp == 0 || nmerge + 1 == ndp);
	ir->split = split_ways(ir, t, ndp ? ir->nparallel : 1, all_rows, red);
	if (ir->split > 1)
		ir->nparallel = (ndp ? ir->nparallel : 1) * ir->split;
	int64_t divs[ENG_MAX_DIMS + 1];
	divs[nmerge] = 1;
	for (int i = nmerge - 1; i >= 0; i--)
		divs[i] = divs[i + 1] * ir->loops[pl[i + 1]].n;
	ir->flops = 0;
	ir->nstmts = 0;

	open_block(l, -1, 1);
	/* a blocked reduction's block loop: outside the parallel loop, so a thread copies a packed
	 * panel that does not move with the parallel loop once per block for its whole share of it
	 * (each output element is still one thread's: its blocks add up in order) */
	int kb_at = ir->kbvar < 0 ? -2 : -1;
	if (kb_at == -1)
		loop(l, ir->kbvar, false, false, 0);
	for (int i = 0; i < nd; i++) {
		if (!(par_in_d && i > 0 && i <= nmerge)) /* not between merged loops */
			pack(l);
		if (par_in_d && i <= nmerge && nmerge)
			loop_div(l, dl[i], i == 0, i > 0, divs[i]);
		else
			loop(l, dl[i], par_in_d && i == 0, false, 0);
	}
	pack(l);
	if ((ir->pack.buf >= 0 && !l->packed) || (ir->rpack.buf >= 0 && !l->rpacked))
		lfail(l, ENG_ESTATE, "internal: a packed panel's start depends on a loop inside the reduction");
	/* the narrow operand's blocks are kept per parallel iteration: it must be their loop's */
	if (ir->rpack.buf >= 0 && (!par_in_d || pi < 0 || nmerge || ir->split > 1 || dl[0] != ir->rpack.slot->arg.var))
		lfail(l, ENG_ESTATE, "internal: a packed block of rows outside the parallel loop of its blocks");
	l->dbody = l->nblocks - 1;
	for (int p = 0; p < ir->nphases; p++)
		l->acc_at[p] = l->dbody;
	for (int p = 0, q; p < ir->nphases && !l->st; p = q) {
		q = p + 1;
		if (ir->phases[p].parent >= 0)
			continue; /* emitted inside its parent's loop */
		/* phases p..q-1 run in one loop nest: at the top, looping over the same variables
		 * (lower.c's shared_loops), none reading another's accumulator, none with phases
		 * nested in it */
		uint32_t group = 1u << p;
		while (q < ir->nphases && joins_nest(ir, p, q, group))
			group |= 1u << q++;
		emit_phase(l, p, q, group, tiles, nt);
	}
	for (int i = 0; i < ne; i++)
		if (!par_in_d && i <= nmerge && nmerge)
			loop_div(l, el[i], i == 0, i > 0, divs[i]);
		else {
			loop(l, el[i], !par_in_d && i == 0, false, 0);
			/* the outer part of a split output axis (plan_split): its iterations are lanes */
			if (ir->vsplit > 1 && ir->loops[el[i]].dim == ir->vsplit_dim && !(!par_in_d && i == 0))
				ir->stmts[ir->nstmts - 1].simd = true;
		}
	for (int k = 0; k < nt; k++)
		loop(l, tiles[k], false, true, 0);
	eng_uop *idx = out_index(ir, true);
	/* every value first, then the stores: an in-place store must not run before another
	 * value of the same element has read the old contents */
	need(l, idx);
	for (int s = 0; s < ir->nstores && !l->st; s++) {
		need(l, ir->stores[s].value);
		if (ir->stores[s].cond)
			need(l, ir->stores[s].cond);
	}
	for (int s = 0; s < ir->nstores && !l->st; s++)
		emit(l, (eng_stmt){.kind = S_STORE, .buf = ir->stores[s].buf, .u = ir->stores[s].value, .idx = idx,
				   .cond = ir->stores[s].cond});
	while (l->nblocks > 1 && !l->st)
		end(l);
	close_block(l);
	ir->bytes = 0;
	for (int i = 0; i < ir->nbufs; i++)
		ir->bytes += (double)ir->bufs[i].numel * (double)eng_dtype_size(ir->bufs[i].dtype);
	if (eng_uops_failed(u))
		lfail(l, ENG_ENOMEM, "out of memory linearizing");
	free(l->open);
	return l->st;
}
