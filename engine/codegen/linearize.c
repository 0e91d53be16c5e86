/* linearize.c: orders a lowered kernel into the loop IR: the loop nest (output loops that
 * phases depend on, then phases, then the remaining output loops with the stores), with
 * every uop defined once, in the outermost loop where its inputs exist (hoisting). */
#include "linearize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	bool packed; /* S_PACK emitted */
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

static void open_block(lin *l, int var, int64_t n)
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
	eng_stmt s = {.kind = S_LOOP, .var = var, .parallel = parallel, .simd_acc = -1, .merged = merged, .div = div};
	emit(l, s);
	open_block(l, var, l->ir->loops[var].n);
	if (l->nblocks)
		l->blocks[l->nblocks - 1].merged = merged;
}

static void loop(lin *l, int var, bool parallel, bool unroll, int simd_acc)
{
	eng_stmt s = {.kind = S_LOOP, .var = var, .parallel = parallel, .unroll = unroll, .simd_acc = simd_acc, .div = 1};
	emit(l, s);
	open_block(l, var, l->ir->loops[var].n);
}

static void end(lin *l)
{
	emit(l, (eng_stmt){.kind = S_END, .merged = l->nblocks ? l->blocks[l->nblocks - 1].merged : false});
	close_block(l);
}

static void need(lin *l, eng_uop *x);

/* Copy a blocked reduction's packed operand panel (once: before the loop over a block's rows). */
static void pack(lin *l)
{
	if (l->ir->pack.buf < 0 || l->packed)
		return;
	need(l, l->ir->pack.base);
	emit(l, (eng_stmt){.kind = S_PACK, .u = l->ir->pack.base});
	l->packed = true;
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

/* Phase p: its accumulator, its reduce loops with the phases nested in them (those whose
 * parent it is, in order), and its update. */
static void emit_phase(lin *l, int p, const int *tiles, int nt)
{
	eng_kernel_ir *ir = l->ir;
	eng_phase *ph = &ir->phases[p];
	bool outer = false;
	for (int q = 0; q < p; q++)
		outer |= ir->phases[q].parent == p;
	l->acc_at[p] = l->nblocks - 1;
	emit(l, (eng_stmt){.kind = S_ACC_INIT, .acc = p});
	for (int k = 0; k < ph->nred; k++)
		loop(l, ph->red[k], false, false, (k == ph->nred - 1 && nt == 0 && !outer) ? p : -1);
	for (int q = 0; q < p && !l->st; q++)
		if (ir->phases[q].parent == p)
			emit_phase(l, q, tiles, nt);
	for (int k = 0; k < nt; k++)
		loop(l, tiles[k], false, true, -1);
	need(l, ph->value);
	emit(l, (eng_stmt){.kind = S_ACC_UPD, .acc = p, .u = ph->value});
	ir->flops += l->blocks[l->nblocks - 1].trips;
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

bool eng_target_groups_rows(const eng_target *t, int64_t rows, int64_t red)
{
	return t->group > 1 && rows > 1 && rows * t->group <= 2 * (int64_t)t->par &&
	       red >= (int64_t)GROUP_ROW_MIN_PER_THREAD * t->group;
}

eng_status eng_linearize(eng_kernel_ir *ir, const eng_target *t, char *err, size_t errlen)
{
	int nthreads = t->par;
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
	/* cache blocking (lower.c's plan_blocks): a block of rows loops innermost of the output
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
	if (t->group > 1 && ir->nparallel <= 1)
		ir->group = t->group;
	else if (par_in_d && ir->tiledim[0] < 0 && eng_target_groups_rows(t, ir->nparallel, red))
		ir->group = t->group;
	int64_t divs[ENG_MAX_DIMS + 1];
	divs[nmerge] = 1;
	for (int i = nmerge - 1; i >= 0; i--)
		divs[i] = divs[i + 1] * ir->loops[pl[i + 1]].n;
	ir->flops = 0;
	ir->nstmts = 0;

	open_block(l, -1, 1);
	/* a blocked reduction's block loop: inside the parallel loop (each output element is one
	 * thread's), around the other output loops */
	int kb_at = ir->kbvar < 0 ? -2 : par_in_d && pi >= 0 ? nmerge : -1;
	if (kb_at == -1)
		loop(l, ir->kbvar, false, false, -1);
	for (int i = 0; i < nd; i++) {
		if (dl[i] == ir->mivar)
			pack(l);
		if (par_in_d && i <= nmerge && nmerge)
			loop_div(l, dl[i], i == 0, i > 0, divs[i]);
		else
			loop(l, dl[i], par_in_d && i == 0, false, -1);
		if (i == kb_at)
			loop(l, ir->kbvar, false, false, -1);
	}
	pack(l);
	l->dbody = l->nblocks - 1;
	for (int p = 0; p < ir->nphases; p++)
		l->acc_at[p] = l->dbody;
	for (int p = 0; p < ir->nphases && !l->st; p++)
		if (ir->phases[p].parent < 0)
			emit_phase(l, p, tiles, nt);
	for (int i = 0; i < ne; i++)
		if (!par_in_d && i <= nmerge && nmerge)
			loop_div(l, el[i], i == 0, i > 0, divs[i]);
		else
			loop(l, el[i], !par_in_d && i == 0, false, -1);
	for (int k = 0; k < nt; k++)
		loop(l, tiles[k], false, true, -1);
	/* store index: row-major offset of the output element */
	int64_t st[ENG_MAX_DIMS];
	eng_contiguous_strides(ir->ndim, ir->shape, st);
	eng_uop *idx = u_int_const(u, 0);
	for (int d = 0; d < ir->ndim; d++) {
		eng_uop *x = u_int_const(u, 0);
		for (int v = 0; v < ir->nloops; v++) {
			if (ir->loops[v].dim != d)
				continue;
			if (ir->loops[v].kind == L_OUTER || ir->loops[v].kind == L_TILE)
				x = u_add(u, x, u_mul_const(u, u_var(u, v, ir->loops[v].n), ir->loops[v].mul));
		}
		idx = u_add(u, idx, u_mul_const(u, x, st[d]));
	}
	/* every value first, then the stores: an in-place store must not run before another
	 * value of the same element has read the old contents */
	need(l, idx);
	for (int s = 0; s < ir->nstores && !l->st; s++)
		need(l, ir->stores[s].value);
	for (int s = 0; s < ir->nstores && !l->st; s++)
		emit(l, (eng_stmt){.kind = S_STORE, .buf = ir->stores[s].buf, .u = ir->stores[s].value, .idx = idx});
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
