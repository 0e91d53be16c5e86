/* lower.c: turns the graph under a kernel's output nodes into uops. Movement ops become
 * index maths, unstored reductions become phases (loops whose accumulators the rest of the
 * kernel reads), and stored nodes become loads. Decides tiles, then linearizes. */
#include "lower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clamp.h"
#include "linearize.h"
#include "plan.h"

#define MAXPATH 4096
#define MAXZERO 64 /* loads of zero-bordered buffers remembered per kernel */
#define MAXMERGE 64 /* reductions per kernel whose merge of axes is remembered */

typedef struct memo_entry {
	const eng_node *n;
	uint64_t h;
	eng_uop *idx[ENG_MAX_DIMS];
	eng_uop *valid;
	eng_uop *r;
} memo_entry;

typedef struct lctx {
	eng_kernel_ir *ir;
	const eng_lower_opts *o;
	const eng_node *const *roots;
	int nroots;
	const eng_node *path[MAXPATH];
	int npath;
	int phase_path[ENG_MAX_PHASES]; /* path depth of each phase being lowered */
	/* of each phase being lowered: its reduce loop vars; those and the vars of the loops it
	 * runs inside (nested) */
	uint64_t phase_red[ENG_MAX_PHASES], phase_chain[ENG_MAX_PHASES];
	int nphase_stack;
	const eng_node *first_nest; /* the first nested phase's store candidate */
	const eng_node *must_store;
	eng_status st;
	char *err;
	size_t errlen;
	bool tiled;
	int stamp;
	memo_entry *memo;
	size_t memo_cap, memo_n;
	eng_uop *outidx[ENG_MAX_DIMS]; /* output index expression per dim */
	int cur_red[ENG_MAX_DIMS]; /* loop vars of the reduction whose value is being lowered */
	int ncur_red;
	int blockvar;   /* the narrow tile's dim's outer loop, when in blocks of rows (-1: none) */
	eng_uop *rowok; /* a row of a block that overhangs its rows is one of them (NULL: all are) */
	/* reductions whose innermost axes were tried as one loop, and how many merged (0: none) */
	const eng_node *merge_node[MAXMERGE];
	int merge_n[MAXMERGE];
	int nmerge;
	/* loads of stored buffers with a zero border, and where they can be nonzero (clamp.h) */
	eng_zero_fact zero[MAXZERO];
	int nzero;
} lctx;

static eng_status fail(lctx *c, eng_status s, const char *msg)
{
	if (c->st == ENG_OK) {
		c->st = s;
		snprintf(c->err, c->errlen, "%s", msg);
	}
	return s;
}

static int buf_slot(lctx *c, const eng_node *n, bool output)
{
	eng_kernel_ir *ir = c->ir;
	for (int i = 0; i < ir->nbufs; i++)
		if (ir->bufs[i].node == n && ir->bufs[i].output == output)
			return i;
	if (ir->nbufs == ENG_MAX_KERNEL_BUFS) {
		fail(c, ENG_ERANGE, "kernel reads more than 64 buffers");
		return 0;
	}
	ir->bufs[ir->nbufs] = (eng_kernel_buf){.node = n, .dtype = n->dtype, .numel = eng_node_numel(n), .output = output};
	return ir->nbufs++;
}

static eng_uop *flat_index(eng_uops *u, int ndim, const int64_t *shape, eng_uop *const *idx)
{
	int64_t st[ENG_MAX_DIMS];
	eng_contiguous_strides(ndim, shape, st);
	eng_uop *acc = u_int_const(u, 0);
	for (int d = 0; d < ndim; d++)
		acc = u_add(u, acc, u_mul_const(u, idx[d], st[d]));
	return acc;
}

/* The source index of a reshape from sshape (sn dims) to dshape (dn dims) at idx. Size-1 axes
 * are dropped, then the rest is cut into the smallest groups of adjacent axes whose sizes
 * multiply to the same number on both sides (a split, a merge or a one-to-one axis): each
 * group's flat index is taken apart on its own, so div/mod only appear where axes really
 * split or merge, and never across a group (e.g. a flipped or permuted axis next to them). */
static void reshape_index(eng_uops *u, int sn, const int64_t *sshape, int dn, const int64_t *dshape,
			  eng_uop *const *idx, eng_uop **si)
{
	int a[ENG_MAX_DIMS], b[ENG_MAX_DIMS], na = 0, nb = 0;
	for (int d = 0; d < sn; d++) {
		si[d] = u_int_const(u, 0);
		if (sshape[d] == 0)
			na = nb = -1; /* empty: nothing is ever read */
		else if (sshape[d] > 1 && na >= 0)
			a[na++] = d;
	}
	for (int d = 0; d < dn && na >= 0; d++)
		if (dshape[d] > 1)
			b[nb++] = d;
	for (int ia = 0, ib = 0; na > 0 && ia < na;) {
		int ga = ia, gb = ib;
		if (ib >= nb)
			return; /* sizes disagree: cannot happen for a valid reshape */
		int64_t pa = sshape[a[ia++]], pb = dshape[b[ib++]];
		while (pa != pb) {
			if (pa < pb && ia < na)
				pa *= sshape[a[ia++]];
			else if (pb < pa && ib < nb)
				pb *= dshape[b[ib++]];
			else
				return;
		}
		if (ia - ga == 1 && ib - gb == 1) {
			si[a[ga]] = idx[b[gb]];
			continue;
		}
		eng_uop *flat = u_int_const(u, 0);
		int64_t st = 1;
		for (int k = ib - 1; k >= gb; k--) {
			flat = u_add(u, flat, u_mul_const(u, idx[b[k]], st));
			st *= dshape[b[k]];
		}
		st = 1;
		for (int k = ia - 1; k >= ga; k--) {
			eng_uop *q = u_div_const(u, flat, st);
			si[a[k]] = k == ga ? q : u_mod_const(u, q, sshape[a[k]]);
			st *= sshape[a[k]];
		}
	}
}

static eng_uop *lower(lctx *c, const eng_node *n, eng_uop *const *idx, eng_uop *valid);

/* Whether n's value reads a reduction over target (under_reduce: n is inside one), looking at
 * most *budget nodes deep; stored nodes end the search. */
static bool reduces_over(lctx *c, const eng_node *n, const eng_node *target, bool under_reduce, int *budget)
{
	if (--*budget < 0)
		return false;
	if (n == target)
		return under_reduce;
	if (n->buf || (c->o->is_stored && c->o->is_stored(c->o->arg, n)))
		return false;
	under_reduce |= eng_op_kind_of(n->op) == ENG_KIND_REDUCE;
	for (int k = 0; k < n->nsrc; k++)
		if (reduces_over(c, n->src[k], target, under_reduce, budget))
			return true;
	return false;
}

/* Whether parent, besides reading child, reads a reduction over r (an argmax or softmax of a
 * matmul: z == max(z)). Storing parent would need r stored as well (nested in that reduction's
 * loop), so r is the better store: one kernel instead of two. */
static bool rereduces(lctx *c, const eng_node *parent, const eng_node *child, const eng_node *r)
{
	int budget = 256;
	for (int k = 0; k < parent->nsrc; k++)
		if (parent->src[k] != child && reduces_over(c, parent->src[k], r, false, &budget))
			return true;
	return false;
}

/* Pick what to store instead of an unfusable reduce at path depth `at`: climb from it
 * towards the enclosing phase (or root) until the parent is an EXPAND or reads another
 * reduction of it, then step down past movement ops. */
static const eng_node *store_candidate(lctx *c, int at, int stop)
{
	int i = at;
	while (i - 1 > stop && c->path[i - 1]->op != ENG_OP_EXPAND && !rereduces(c, c->path[i - 1], c->path[i], c->path[at]))
		i--;
	while (i < at && eng_op_kind_of(c->path[i]->op) == ENG_KIND_MOVEMENT)
		i++;
	return c->path[i];
}

/* The accumulator of phase p at the current tile position. */
static eng_uop *acc_ref(lctx *c, int p, eng_dtype dt)
{
	eng_kernel_ir *ir = c->ir;
	eng_uop *t[2];
	for (int k = 0; k < 2; k++)
		t[k] = ir->tiledim[k] >= 0 ? u_var(ir->uops, ir->tilevar[k], ir->tile[k]) : u_int_const(ir->uops, 0);
	/* accumulators are laid out [narrow][wide]: the wide tile loop is innermost */
	return u_acc(ir->uops, p, dt, t[1], t[0]);
}

/* Whether x is loop variable var, or it cast to an integer type that holds all its values. */
static bool is_var(const eng_uop *x, int var)
{
	if (x->kind == U_ALU && x->op == ENG_OP_CAST && eng_dtype_is_int((eng_dtype)x->dtype) &&
	    x->vmin == x->src[0]->vmin && x->vmax == x->src[0]->vmax)
		x = x->src[0];
	return x->kind == U_VAR && x->arg.var == var;
}

/* If a sum's value over reduce variable var is zero unless var equals an integer value that
 * does not depend on var (cast(var == j) * y, where(var == j, y, 0), cast(var == j): a one_hot
 * or gather feeding a sum), return j: the sum is then its value at var = j (0 where j is out of
 * range). For float y the product drops y's inf and NaN at the other positions. */
static eng_uop *gather_index(const eng_uop *x, int var)
{
	const eng_uop *eq = NULL;
	if (x->kind != U_ALU)
		return NULL;
	if (x->op == ENG_OP_WHERE && u_is_const(x->src[2]) && !x->src[2]->arg.c.i)
		eq = x->src[0];
	for (int k = 0; k < (x->op == ENG_OP_MUL ? 2 : x->op == ENG_OP_CAST ? 1 : 0) && !eq; k++) {
		const eng_uop *f = x->op == ENG_OP_MUL ? x->src[k] : x;
		if (f->kind == U_ALU && f->op == ENG_OP_CAST && f->src[0]->dtype == ENG_BOOL)
			eq = f->src[0];
	}
	if (!eq || eq->kind != U_ALU || eq->op != ENG_OP_CMPEQ)
		return NULL;
	for (int k = 0; k < 2; k++) {
		eng_uop *j = eq->src[1 - k];
		if (is_var(eq->src[k], var) && !((j->deps >> var) & 1) && eng_dtype_is_int((eng_dtype)j->dtype))
			return j;
	}
	return NULL;
}

/* Whether reduce node n's index idx is in bounds on every axis it does not reduce, whatever
 * the validity it is lowered under. */
static bool outer_in_bounds(const eng_node *n, eng_uop *const *idx)
{
	for (int d = 0; d < n->ndim; d++)
		if (!((n->arg.axes >> d) & 1) && (idx[d]->vmin < 0 || idx[d]->vmax >= n->shape[d]))
			return false;
	return true;
}

/* The axis a sum reduces, when it is a sum over exactly one axis longer than 1 (a candidate
 * for gather_index); else -1. */
static int gather_axis(const eng_node *n)
{
	int axis = -1, nred = 0;
	for (int d = 0; d < n->ndim; d++)
		if (((n->arg.axes >> d) & 1) && n->src[0]->shape[d] > 1)
			axis = d, nred++;
	return n->op == ENG_OP_RSUM && nred == 1 ? axis : -1;
}

/* Forget what lowering a reduction's value on trial left behind (loops from nloops, phases from
 * nphases, and the memo, whose entries may hold them). */
static void trial_rollback(lctx *c, int nloops, int nphases)
{
	c->ir->nloops = nloops;
	c->ir->nphases = nphases;
	c->nzero = 0;
	if (c->memo)
		memset(c->memo, 0, sizeof(*c->memo) * c->memo_cap);
	c->memo_n = 0;
}

/* The reduced axes of a reduction that loop (source size other than 1), as groups each run by one loop:
 * the innermost `merge` of them one group when merge >= 2 (mergeable_axes: only axes of size
 * 1 between them), the others one each. */
typedef struct rgroups {
	int n;
	int first[ENG_MAX_DIMS], last[ENG_MAX_DIMS]; /* outermost and innermost axis of group i */
	int64_t size[ENG_MAX_DIMS];
	bool merged; /* the last group has two or more axes */
} rgroups;

/* How many of n's innermost looping reduced axes could run as one loop: a run of them with only
 * axes of size 1 between (0 if fewer than two, or the source is empty). Whether their index then
 * reads as one is found by lowering (split_again). */
static int mergeable_axes(const eng_node *n)
{
	const eng_node *s = n->src[0];
	int m = 0;
	bool run = true;
	for (int d = n->ndim - 1; d >= 0; d--) {
		if (s->shape[d] == 0)
			return 0;
		if (s->shape[d] == 1 || !run)
			continue;
		if ((n->arg.axes >> d) & 1)
			m++;
		else
			run = false;
	}
	return m >= 2 ? m : 0;
}

static void reduce_groups(const eng_node *n, int merge, rgroups *g)
{
	const eng_node *s = n->src[0];
	int axes[ENG_MAX_DIMS], na = 0;
	for (int d = 0; d < n->ndim; d++)
		if (((n->arg.axes >> d) & 1) && s->shape[d] != 1)
			axes[na++] = d;
	const int keep = merge >= 2 && merge <= na ? na - merge : na; /* axes looped alone */
	g->n = 0;
	for (int i = 0; i < keep; i++, g->n++) {
		g->first[g->n] = g->last[g->n] = axes[i];
		g->size[g->n] = s->shape[axes[i]];
	}
	g->merged = keep < na;
	if (g->merged) {
		g->first[g->n] = axes[keep];
		g->last[g->n] = axes[na - 1];
		g->size[g->n] = 1;
		for (int i = keep; i < na; i++)
			g->size[g->n] *= s->shape[axes[i]];
		g->n++;
	}
}

/* Index of each axis of group i from its loop's value e: e / (inner sizes) % size, innermost
 * e % size (axes of size 1 inside are left as set). *mvars gets e's loop vars for a merged
 * group. */
static void group_index(eng_uops *u, const eng_node *s, const rgroups *g, int i, eng_uop *e, eng_uop **ridx,
			uint64_t *mvars)
{
	int64_t inner = 1;
	for (int d = g->last[i]; d >= g->first[i]; d--) {
		if (s->shape[d] == 1)
			continue;
		eng_uop *q = u_div_const(u, e, inner);
		ridx[d] = d == g->first[i] ? q : u_mod_const(u, q, s->shape[d]);
		inner *= s->shape[d];
	}
	if (g->merged && i == g->n - 1)
		*mvars = e->deps;
}

/* Whether x (or a value it reads) divides or takes the remainder of an index that depends on
 * loop vars `vars`. */
static bool divides_vars(eng_uop *x, uint64_t vars, int stamp)
{
	if (!x || x->stamp == stamp || !(x->deps & vars))
		return false;
	x->stamp = stamp;
	if (x->kind == U_ALU && (x->op == ENG_OP_IDIV || x->op == ENG_OP_MOD) && (x->src[0]->deps & vars))
		return true;
	for (int i = 0; i < x->nsrc; i++)
		if (divides_vars(x->src[i], vars, stamp))
			return true;
	return false;
}

/* After lowering a reduction with merged axes: whether some operand still reads them apart (a
 * window, a permuted or padded view), in its value or a reduction nested in it, so that they
 * must loop one by one. */
static bool split_again(lctx *c, const eng_phase *ph, int nphases0, uint64_t mvars)
{
	const int stamp = ++c->stamp;
	if (divides_vars(ph->value, mvars, stamp))
		return true;
	for (int p = nphases0; p < c->ir->nphases; p++)
		if (divides_vars(c->ir->phases[p].value, mvars, stamp))
			return true;
	return false;
}

/* The merge found for reduction n by an earlier pass (-1: none yet), so that every pass over
 * the kernel loops its axes alike; merge_record keeps it (when there is room: else n is tried
 * again). */
static int merge_decided(const lctx *c, const eng_node *n)
{
	for (int i = 0; i < c->nmerge; i++)
		if (c->merge_node[i] == n)
			return c->merge_n[i];
	return -1;
}

static void merge_record(lctx *c, const eng_node *n, int merge)
{
	if (c->nmerge < MAXMERGE) {
		c->merge_node[c->nmerge] = n;
		c->merge_n[c->nmerge++] = merge;
	}
}

/* An earlier reduction whose loops reduction n can run in (its index in phases, or -1): both
 * outside any other reduction's value, looping over axes (groups g) of the same sizes in the same order.
 * Sharing the variables makes equal loads and values of the two one uop each, and linearize.c
 * runs the two in one loop nest where neither reads the other (the sums of a batchnorm's
 * gradient). Not for GPU work-groups (each reduction's loop is split over the threads on its
 * own) nor cache-blocked kernels. */
static int shared_loops(const lctx *c, const rgroups *g)
{
	const eng_kernel_ir *ir = c->ir;
	if (c->nphase_stack || c->o->target.reduce_group > 1 || ir->kblock > 0)
		return -1;
	const int64_t *sizes = g->size;
	const int ns = g->n;
	for (int p = 0; p < ir->nphases && ns > 0; p++) {
		const eng_phase *q = &ir->phases[p];
		int k = 0, a = 0; /* q's loop k runs axis a (a split axis: two loops) */
		bool same = q->top;
		for (; k < q->nred && a < ns && same; k++, a++) {
			const eng_loop *lp = &ir->loops[q->red[k]];
			int64_t n = lp->n;
			if (k + 1 < q->nred && ir->loops[q->red[k + 1]].unroll)
				n *= ir->loops[q->red[++k]].n;
			same = lp->kind == L_REDUCE && n == sizes[a];
		}
		if (same && k == q->nred && a == ns)
			return p;
	}
	return -1;
}

/* A reduction whose index depends on reduce loop vars `outer` of the phases being lowered runs
 * nested in the innermost of them, once per iteration of its loops and of the loops it runs in
 * itself: if outer is all of those vars, they are returned; else 0 (nested, it would be
 * computed again for every value of the others: it must be stored). */
static uint64_t nest_vars(const lctx *c, uint64_t outer)
{
	for (int k = c->nphase_stack - 1; k >= 0; k--)
		if (c->phase_red[k] & outer)
			return c->phase_chain[k] == outer ? outer : 0;
	return 0;
}

static eng_uop *lower_reduce(lctx *c, const eng_node *n, eng_uop *const *idx, eng_uop *valid)
{
	eng_kernel_ir *ir = c->ir;
	eng_uops *u = ir->uops;
	uint64_t reduce_vars = 0, deps = valid ? valid->deps : 0;
	for (int v = 0; v < ir->nloops; v++)
		if (ir->loops[v].kind == L_REDUCE || ir->loops[v].kind == L_KBLOCK)
			reduce_vars |= 1ull << v;
	for (int d = 0; d < n->ndim; d++)
		deps |= idx[d]->deps;
	int stop = c->nphase_stack ? c->phase_path[c->nphase_stack - 1] : 0;
	if (!(deps & reduce_vars) && valid && outer_in_bounds(n, idx)) {
		/* under a pad's validity: where it is false the pad discards this value, and with
		 * its outer index in bounds the reduction may run there unguarded. It then no longer
		 * depends on the padded dims, so each reduction of a cat or stack runs once per row
		 * instead of once per output element. */
		valid = NULL;
		deps = 0;
		for (int d = 0; d < n->ndim; d++)
			if (!((n->arg.axes >> d) & 1))
				deps |= idx[d]->deps;
	}
	const bool nested = (deps & reduce_vars) != 0;
	const uint64_t nest = nested ? nest_vars(c, deps & reduce_vars) : 0;
	const int gaxis = gather_axis(n);
	if (nested && !nest && gaxis < 0) {
		/* Its value changes inside another phase's loop: it cannot be an accumulator of
		 * this kernel. Store the largest unexpanded piece around it instead. */
		c->must_store = store_candidate(c, c->npath - 1, stop);
		c->st = ENG_ESTATE;
		return u_int_const(u, 0);
	}
	/* share an existing phase with the same outer index */
	eng_uop *key[ENG_MAX_DIMS + 1]; /* a reduced axis (size 1) reads no index */
	for (int d = 0; d < n->ndim; d++)
		key[d] = (n->arg.axes >> d) & 1 ? u_int_const(u, 0) : idx[d];
	key[n->ndim] = valid;
	for (int p = 0; p < ir->nphases && (!nested || nest); p++) {
		eng_phase *ph = &ir->phases[p];
		if (ph->node == n && !memcmp(ph->key, key, sizeof(eng_uop *) * (n->ndim + 1)))
			return acc_ref(c, p, n->dtype);
	}
	if (ir->nphases == ENG_MAX_PHASES || c->nphase_stack == ENG_MAX_PHASES) {
		fail(c, ENG_ERANGE, "kernel needs more than 32 reductions");
		return u_int_const(u, 0);
	}
	eng_phase ph = {.op = n->op, .dtype = n->dtype, .node = n, .nest = nest, .parent = -1};
	memcpy(ph.key, key, sizeof(key));
	ph.candidate = store_candidate(c, c->npath - 1, stop);
	if (nest && !c->first_nest)
		c->first_nest = ph.candidate;
	eng_uop *ridx[ENG_MAX_DIMS];
	const eng_node *s = n->src[0];
	const int nloops0 = ir->nloops, nphases0 = ir->nphases;
	const eng_node *first_nest0 = c->first_nest;
	const int kbvar0 = ir->kbvar;
	int merge = merge_decided(c, n);
	const bool trying = merge < 0;
	if (trying)
		merge = mergeable_axes(n);
	ph.top = c->nphase_stack == 0;
	uint64_t red = 0;
	for (;;) {
		rgroups g;
		uint64_t mvars = 0; /* the loop vars of the merged group */
		reduce_groups(n, merge, &g);
		const int share = shared_loops(c, &g);
		for (int d = 0; d < n->ndim; d++)
			if (!((n->arg.axes >> d) & 1) || s->shape[d] == 1)
				ridx[d] = (n->arg.axes >> d) & 1 ? u_int_const(u, 0) : idx[d];
		ph.nred = 0;
		if (share >= 0) {
			const eng_phase *q = &ir->phases[share];
			for (int k = 0, i = 0; i < g.n; i++) {
				const eng_loop *lo = &ir->loops[q->red[k]];
				eng_uop *e = u_var(u, q->red[k], lo->n);
				if (k + 1 < q->nred && ir->loops[q->red[k + 1]].unroll) { /* a split axis */
					int64_t c = ir->loops[q->red[k + 1]].n;
					e = u_add(u, u_mul_const(u, e, c), u_var(u, q->red[k + 1], c));
					k++;
				}
				k++;
				group_index(u, s, &g, i, e, ridx, &mvars);
			}
			ph.nred = q->nred;
			memcpy(ph.red, q->red, sizeof(ph.red));
		}
		/* the outermost group that loops is the one blocked for the caches, the innermost the
		 * one split (plan_split) */
		for (int i = 0; i < g.n && share < 0; i++) {
			if (ir->nloops == ENG_MAX_LOOPS) {
				fail(c, ENG_ERANGE, "kernel needs more than 64 loops");
				return u_int_const(u, 0);
			}
			const int64_t size = g.size[i];
			if (ir->kblock > 0 && ir->kbvar < 0 && i == 0 && size == ir->kfull) {
				/* blocked for the caches (plan_blocks): kb * kblock + k */
				if (ir->nloops + 2 > ENG_MAX_LOOPS) {
					fail(c, ENG_ERANGE, "kernel needs more than 64 loops");
					return u_int_const(u, 0);
				}
				int kb = ir->nloops++, k = ir->nloops++;
				ir->loops[kb] = (eng_loop){.n = ir->kfull / ir->kblock, .kind = L_KBLOCK, .dim = -1};
				ir->loops[k] = (eng_loop){.n = ir->kblock, .kind = L_REDUCE, .dim = -1};
				eng_uops_set_var_rank(u, k, 1);
				ir->kbvar = kb;
				ph.red[ph.nred++] = k;
				group_index(u, s, &g, i,
					    u_add(u, u_mul_const(u, u_var(u, kb, ir->loops[kb].n), ir->kblock),
						  u_var(u, k, ir->kblock)),
					    ridx, &mvars);
				continue;
			}
			if (ir->vsplit > 1 && ir->vsplit_dim < 0 && i == g.n - 1 && size == ir->vsplit_n &&
			    g.n < ENG_MAX_DIMS && ir->nloops + 2 <= ENG_MAX_LOOPS) {
				/* split (plan_split): i / c loops outside, i % c inside, unrolled */
				int64_t cs = ir->vsplit;
				int o = ir->nloops++, in = ir->nloops++;
				ir->loops[o] = (eng_loop){.n = size / cs, .kind = L_REDUCE, .dim = -1};
				ir->loops[in] = (eng_loop){.n = cs, .kind = L_REDUCE, .dim = -1, .unroll = true};
				eng_uops_set_var_rank(u, o, 1);
				eng_uops_set_var_rank(u, in, 1);
				ph.red[ph.nred++] = o;
				ph.red[ph.nred++] = in;
				group_index(u, s, &g, i, u_add(u, u_mul_const(u, u_var(u, o, size / cs), cs), u_var(u, in, cs)),
					    ridx, &mvars);
				continue;
			}
			int v = ir->nloops++;
			ir->loops[v] = (eng_loop){.n = size, .kind = L_REDUCE, .dim = -1};
			eng_uops_set_var_rank(u, v, 1);
			ph.red[ph.nred++] = v;
			group_index(u, s, &g, i, size == 0 ? u_int_const(u, 0) : u_var(u, v, size), ridx, &mvars);
		}
		red = 0;
		for (int k = 0; k < ph.nred; k++)
			red |= 1ull << ph.red[k];
		c->phase_red[c->nphase_stack] = red;
		c->phase_chain[c->nphase_stack] = red | nest;
		c->phase_path[c->nphase_stack++] = c->npath - 1;
		int saved_red[ENG_MAX_DIMS], nsaved = c->ncur_red;
		memcpy(saved_red, c->cur_red, sizeof(saved_red));
		memcpy(c->cur_red, ph.red, sizeof(ph.red));
		c->ncur_red = ph.nred;
		ph.value = lower(c, s, ridx, valid);
		memcpy(c->cur_red, saved_red, sizeof(saved_red));
		c->ncur_red = nsaved;
		if (!trying || merge < 2 || c->st || !split_again(c, &ph, nphases0, mvars))
			break;
		/* the merged axes' index was not put back together: some operand reads them apart
		 * (a window, a permuted view), so they loop as before, one fewer merged each try */
		c->nphase_stack--;
		trial_rollback(c, nloops0, nphases0);
		c->first_nest = first_nest0;
		ir->kbvar = kbvar0;
		merge = merge > 2 ? merge - 1 : 0;
	}
	if (trying)
		merge_record(c, n, merge);
	eng_uop *j = gaxis >= 0 && !c->st ? gather_index(ph.value, ph.red[0]) : NULL;
	for (int p = nphases0; p < ir->nphases && j; p++)
		if (ir->phases[p].nest & red)
			j = NULL; /* phases nested in its loop: the loop stays */
	if (j) {
		/* a one_hot or gather summed: its value at j, no loop (so it fuses even nested).
		 * Phases its value made (j itself may be an argmax) do not depend on the loop (they
		 * would have been stored): they stay, and the loop stays unused by any phase. */
		c->nphase_stack--;
		if (ir->nphases == nphases0)
			trial_rollback(c, nloops0, nphases0);
		/* read at j clamped into range (j's own lowering stays as it was, under the same
		 * validity), the value kept where j is in range */
		int64_t last = s->shape[gaxis] - 1;
		eng_uop *j64 = j->dtype == ENG_I64 ? j : u_alu(u, ENG_OP_CAST, ENG_I64, j, NULL, NULL);
		eng_uop *lo = u_lt(u, j64, u_int_const(u, 0)), *hi = u_lt(u, u_int_const(u, last), j64);
		eng_uop *in = u_and(u, u_lt(u, u_int_const(u, -1), j64), u_lt(u, j64, u_int_const(u, last + 1)));
		ridx[gaxis] = u_where(u, ENG_I64, lo, u_int_const(u, 0), u_where(u, ENG_I64, hi, u_int_const(u, last), j64));
		eng_uop *val = lower(c, s, ridx, valid);
		return u_where(u, n->dtype, in, val, u_const(u, n->dtype, (eng_const_value){.i = 0}));
	}
	c->nphase_stack--;
	if (nested && !nest) { /* no gather after all: store, as above */
		trial_rollback(c, nloops0, nphases0);
		c->first_nest = first_nest0;
		if (c->st == ENG_OK || c->st == ENG_ESTATE) {
			c->must_store = ph.candidate;
			c->st = ENG_ESTATE;
		}
		return u_int_const(u, 0);
	}
	if (c->st)
		return u_int_const(u, 0);
	uint64_t outer = nest;
	for (int v = 0; v < ir->nloops; v++)
		if (ir->loops[v].kind == L_OUTER)
			outer |= 1ull << v;
	eng_phase_clamp(ir, &ph, outer, c->zero, c->nzero);
	int p = ir->nphases++;
	ir->phases[p] = ph;
	return acc_ref(c, p, n->dtype);
}

/* Broadcast guard: a computed value that an expand broadcasts into a reduction is computed
 * again for every element of the broadcast (a convolution's input chain once per output
 * channel, a matmul's left side once per column). Where that value costs more than
 * BCAST_COST_MAX ALU ops per element and the broadcast repeats it BCAST_REPEAT_MIN times or
 * more, it is stored instead: one write and a load per use against the ops times the repeats
 * (a QDQ model's quantize-dequantize chain of ~20 ops before each convolution ran 5-10x slower
 * than the float model; an activation like GELU before a matmul is the other case). */
#define BCAST_COST_MAX 16
#define BCAST_REPEAT_MIN 4

/* ALU ops (not index arithmetic) in the value x, loads' indices not counted, up to most. */
static int value_cost(eng_uop *x, int stamp, int most)
{
	if (!x || x->stamp == stamp || x->kind == U_LOAD)
		return 0;
	x->stamp = stamp;
	int n = x->kind == U_ALU && x->dtype != ENG_I64;
	for (int i = 0; i < x->nsrc && n <= most; i++)
		n += value_cost(x->src[i], stamp, most - n);
	return n;
}

static void broadcast_guard(lctx *c, const eng_node *n, eng_uop *val)
{
	if (c->st || !c->nphase_stack || n->op != ENG_OP_EXPAND)
		return;
	int64_t repeat = 1;
	for (int d = 0; d < n->ndim; d++)
		if (n->src[0]->shape[d] != n->shape[d])
			repeat *= n->shape[d];
	/* the computed value under the expand's movements */
	const eng_node *m = n->src[0];
	while (eng_op_kind_of(m->op) == ENG_KIND_MOVEMENT && !m->buf && !(c->o->is_stored && c->o->is_stored(c->o->arg, m)))
		m = m->src[0];
	eng_op_kind k = eng_op_kind_of(m->op);
	if (repeat < BCAST_REPEAT_MIN || m->buf || (c->o->is_stored && c->o->is_stored(c->o->arg, m)) ||
	    (k != ENG_KIND_UNARY && k != ENG_KIND_BINARY && k != ENG_KIND_TERNARY) ||
	    value_cost(val, ++c->stamp, BCAST_COST_MAX) <= BCAST_COST_MAX)
		return;
	c->must_store = m;
	c->st = ENG_ESTATE;
}

static eng_uop *lower_movement(lctx *c, const eng_node *n, eng_uop *const *idx, eng_uop *valid)
{
	eng_uops *u = c->ir->uops;
	const eng_node *s = n->src[0];
	eng_uop *si[ENG_MAX_DIMS];
	eng_uop *cond = NULL;
	switch (n->op) {
	case ENG_OP_RESHAPE:
		reshape_index(u, s->ndim, s->shape, n->ndim, n->shape, idx, si);
		break;
	case ENG_OP_PERMUTE:
		for (int d = 0; d < n->ndim; d++)
			si[(int)n->arg.perm[d]] = idx[d];
		break;
	case ENG_OP_EXPAND:
		for (int d = 0; d < n->ndim; d++)
			si[d] = s->shape[d] == n->shape[d] ? idx[d] : u_int_const(u, 0);
		break;
	case ENG_OP_SHRINK:
		for (int d = 0; d < n->ndim; d++)
			si[d] = u_add_const(u, idx[d], n->arg.pairs[d][0]);
		break;
	case ENG_OP_FLIP:
		for (int d = 0; d < n->ndim; d++)
			si[d] = (n->arg.axes >> d) & 1 ? u_add(u, u_int_const(u, n->shape[d] - 1), u_mul_const(u, idx[d], -1)) : idx[d];
		break;
	case ENG_OP_PAD:
		cond = u_bool(u, true);
		for (int d = 0; d < n->ndim; d++) {
			int64_t lo = n->arg.pairs[d][0];
			si[d] = u_add_const(u, idx[d], -lo);
			if (!lo && !n->arg.pairs[d][1])
				continue;
			/* lo <= idx < lo + size */
			eng_uop *ge = u_lt(u, u_int_const(u, lo - 1), idx[d]);
			eng_uop *lt = u_lt(u, idx[d], u_int_const(u, lo + s->shape[d]));
			cond = u_and(u, cond, u_and(u, ge, lt));
		}
		break;
	default:
		fail(c, ENG_EINVAL, "unknown movement op");
		return u_int_const(u, 0);
	}
	if (!cond) {
		eng_uop *r = lower(c, s, si, valid);
		broadcast_guard(c, n, r);
		return c->st == ENG_ESTATE ? u_int_const(u, 0) : r;
	}
	eng_uop *v2 = valid ? u_and(u, valid, cond) : cond;
	eng_uop *val = lower(c, s, si, v2);
	return u_where(u, n->dtype, cond, val, u_const(u, n->dtype, (eng_const_value){.i = 0}));
}

/* The load of a sum of products' operand planned for packing (eng_pack) at idx: from the packed
 * panel, if idx is linear in the reduction's loop variables and the wide tile's, and the panel's
 * start depends on none of them nor on the rows (else NULL: a plain load). */
static eng_uop *pack_load(lctx *c, int slot, const eng_node *n, eng_uop *idx)
{
	eng_kernel_ir *ir = c->ir;
	eng_uops *u = ir->uops;
	int64_t cw, ck[ENG_MAX_DIMS];
	if (!c->ncur_red || ir->tiledim[0] < 0 || !u_linear_in_var(idx, ir->tilevar[0], &cw))
		return NULL;
	eng_uop *w = u_var(u, ir->tilevar[0], ir->tile[0]);
	eng_uop *base = u_add(u, idx, u_mul_const(u, w, -cw)), *at = u_int_const(u, 0);
	uint64_t inner = 1ull << ir->tilevar[0];
	int64_t rows = 1;
	for (int i = 0; i < c->ncur_red; i++) {
		int v = c->cur_red[i];
		if (!u_linear_in_var(idx, v, &ck[i]))
			return NULL;
		eng_uop *k = u_var(u, v, ir->loops[v].n);
		base = u_add(u, base, u_mul_const(u, k, -ck[i]));
		at = u_add(u, u_mul_const(u, at, ir->loops[v].n), k);
		inner |= 1ull << v;
		rows *= ir->loops[v].n;
	}
	if (ir->tiledim[1] >= 0)
		inner |= 1ull << ir->tilevar[1];
	if (ir->mivar >= 0)
		inner |= 1ull << ir->mivar;
	if ((base->deps & inner) || (ir->pack.buf >= 0 && (ir->pack.buf != slot || ir->pack.base != base)))
		return NULL;
	ir->pack.buf = slot;
	ir->pack.dtype = n->dtype;
	ir->pack.base = base;
	ir->pack.nr = c->ncur_red;
	for (int i = 0; i < c->ncur_red; i++) {
		ir->pack.rn[i] = ir->loops[c->cur_red[i]].n;
		ir->pack.rstride[i] = ck[i];
	}
	ir->pack.rows = rows;
	ir->pack.cols = ir->tile[0];
	ir->pack.cstride = cw;
	ir->bufs[ENG_PACK_BUF] = (eng_kernel_buf){.dtype = n->dtype, .numel = rows * ir->tile[0]};
	return u_load(u, ENG_PACK_BUF, n->dtype, u_add(u, u_mul_const(u, at, ir->tile[0]), w), NULL);
}

/* The load of a blocked matmul's narrow operand planned for packing (eng_rpack) at idx: from its
 * packed block in scratch, if idx is linear in the narrow tile's row, its tile in the block and
 * the one reduction loop, and the block's start depends on none of them nor on the wide tile
 * (else NULL: a plain load). */
static eng_uop *rpack_load(lctx *c, int slot, const eng_node *n, eng_uop *idx)
{
	eng_kernel_ir *ir = c->ir;
	eng_uops *u = ir->uops;
	int64_t cr, cm, ck;
	if (c->ncur_red != 1 || ir->tiledim[1] < 0 || ir->mivar < 0 || c->blockvar < 0)
		return NULL;
	int rv = ir->tilevar[1], mv = ir->mivar, kv = c->cur_red[0];
	int64_t rt = ir->tile[1], tiles = ir->loops[mv].n, kc = ir->loops[kv].n;
	if (!u_linear_in_var(idx, rv, &cr) || !u_linear_in_var(idx, mv, &cm) || !u_linear_in_var(idx, kv, &ck) ||
	    cm != cr * rt)
		return NULL;
	eng_uop *r = u_var(u, rv, rt), *m = u_var(u, mv, tiles), *k = u_var(u, kv, kc);
	eng_uop *base = u_add(u, idx, u_mul_const(u, r, -cr));
	base = u_add(u, u_add(u, base, u_mul_const(u, m, -cm)), u_mul_const(u, k, -ck));
	uint64_t inner = (1ull << rv) | (1ull << mv) | (1ull << kv);
	if (ir->tiledim[0] >= 0)
		inner |= 1ull << ir->tilevar[0];
	if ((base->deps & inner) || (ir->rpack.buf >= 0 && (ir->rpack.buf != slot || ir->rpack.base != base)))
		return NULL;
	int64_t per = tiles * rt * kc;
	ir->rpack.buf = slot;
	ir->rpack.dtype = n->dtype;
	ir->rpack.base = base;
	ir->rpack.slot = u_var(u, c->blockvar, ir->loops[c->blockvar].n);
	ir->rpack.tiles = tiles;
	ir->rpack.rows_t = rt;
	ir->rpack.rows = ir->mrows > 0 ? ir->mrows : tiles * rt;
	ir->rpack.kc = kc;
	ir->rpack.rstride = cr;
	ir->rpack.kstride = ck;
	ir->bufs[ENG_RPACK_BUF] = (eng_kernel_buf){.dtype = n->dtype, .numel = per};
	ir->scratch = per * (int64_t)eng_dtype_size(n->dtype); /* one block: see eng_rpack */
	eng_uop *at = u_add(u, u_mul_const(u, u_add(u, u_mul_const(u, m, kc), k), rt), r);
	return u_load(u, ENG_RPACK_BUF, n->dtype, at, NULL);
}

static eng_uop *lower_node(lctx *c, const eng_node *n, eng_uop *const *idx, eng_uop *valid, bool as_root)
{
	eng_kernel_ir *ir = c->ir;
	eng_uops *u = ir->uops;
	bool stored = n->buf || (c->o->is_stored && c->o->is_stored(c->o->arg, n));
	if (stored && !as_root) {
		int slot = buf_slot(c, n, false);
		eng_uop *at = flat_index(u, n->ndim, n->shape, idx), *p = NULL;
		if (n == ir->pack.node && u_is_true(valid))
			p = pack_load(c, slot, n, at);
		if (n == ir->rpack.node && u_is_true(valid))
			p = rpack_load(c, slot, n, at);
		if (!p)
			p = u_load(u, slot, n->dtype, at, valid);
		if (c->nphase_stack && c->nzero < MAXZERO) {
			eng_uop *zc = eng_zero_box_cond(u, n, idx);
			if (zc)
				c->zero[c->nzero++] = (eng_zero_fact){.value = p, .cond = zc};
		}
		return p;
	}
	eng_uop *a[3] = {0};
	switch (eng_op_kind_of(n->op)) {
	case ENG_KIND_LEAF:
		if (n->op == ENG_OP_CONST)
			return u_const(u, n->dtype, n->arg.c);
		if (n->op == ENG_OP_INDEX)
			return n->dtype == ENG_I64 ? idx[n->arg.axis] : u_alu(u, ENG_OP_CAST, n->dtype, idx[n->arg.axis], NULL, NULL);
		fail(c, ENG_ESTATE, "buffer node without storage");
		return u_int_const(u, 0);
	case ENG_KIND_UNARY:
	case ENG_KIND_BINARY:
	case ENG_KIND_TERNARY:
		for (int i = 0; i < n->nsrc; i++)
			a[i] = lower(c, n->src[i], idx, valid);
		return u_alu(u, n->op, n->dtype, a[0], a[1], a[2]);
	case ENG_KIND_REDUCE:
		return lower_reduce(c, n, idx, valid);
	case ENG_KIND_MOVEMENT:
		return lower_movement(c, n, idx, valid);
	case ENG_KIND_BUFFEROP:
		if (n->op == ENG_OP_ASSIGN)
			return lower(c, n->src[1], idx, valid);
		return lower(c, n->src[0], idx, valid); /* CONTIGUOUS, COPY, DETACH: the value */
	default:
		fail(c, ENG_EINVAL, "unknown op kind");
		return u_int_const(u, 0);
	}
}

/* Memo of lowered (node, index, validity): a value shared by many users is lowered once, so
 * graphs that reuse values do not blow up exponentially. */
static uint64_t memo_hash(const eng_node *n, eng_uop *const *idx, const eng_uop *valid)
{
	uint64_t h = (uintptr_t)n * 0x9e3779b97f4a7c15ull;
	for (int d = 0; d < n->ndim; d++)
		h = (h ^ idx[d]->id) * 0xff51afd7ed558ccdull;
	return (h ^ (valid ? valid->id : 0)) * 0xc4ceb9fe1a85ec53ull;
}

static memo_entry *memo_find(lctx *c, const eng_node *n, eng_uop *const *idx, const eng_uop *valid, uint64_t h)
{
	if (!c->memo_cap)
		return NULL;
	for (size_t i = h & (c->memo_cap - 1);; i = (i + 1) & (c->memo_cap - 1)) {
		memo_entry *e = &c->memo[i];
		if (!e->n)
			return e;
		if (e->h == h && e->n == n && e->valid == valid && !memcmp(e->idx, idx, sizeof(eng_uop *) * n->ndim))
			return e;
	}
}

static void memo_put(lctx *c, const eng_node *n, eng_uop *const *idx, eng_uop *valid, uint64_t h, eng_uop *r)
{
	if ((c->memo_n + 1) * 2 > c->memo_cap) {
		size_t nc = c->memo_cap ? c->memo_cap * 2 : 256;
		memo_entry *nm = calloc(nc, sizeof(*nm));
		if (!nm)
			return; /* no memo: slower, still correct */
		memo_entry *old = c->memo;
		size_t oc = c->memo_cap;
		c->memo = nm;
		c->memo_cap = nc;
		c->memo_n = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].n) {
				*memo_find(c, old[i].n, old[i].idx, old[i].valid, old[i].h) = old[i];
				c->memo_n++;
			}
		free(old);
	}
	memo_entry *e = memo_find(c, n, idx, valid, h);
	if (!e->n)
		c->memo_n++;
	e->n = n;
	e->h = h;
	e->valid = valid;
	memcpy(e->idx, idx, sizeof(eng_uop *) * n->ndim);
	e->r = r;
}

static eng_uop *lower(lctx *c, const eng_node *n, eng_uop *const *idx, eng_uop *valid)
{
	if (c->st)
		return c->ir->uops ? u_int_const(c->ir->uops, 0) : NULL;
	if (c->npath == MAXPATH) {
		fail(c, ENG_ERANGE, "graph too deep for one kernel");
		return u_int_const(c->ir->uops, 0);
	}
	uint64_t h = memo_hash(n, idx, valid);
	memo_entry *e = memo_find(c, n, idx, valid, h);
	if (e && e->n)
		return e->r;
	c->path[c->npath++] = n;
	eng_uop *r = lower_node(c, n, idx, valid, false);
	c->npath--;
	if (!c->st)
		memo_put(c, n, idx, valid, h, r);
	return r;
}

/* Does x load node `target` at an index other than `at`? */
static bool reads_elsewhere(lctx *c, eng_uop *x, const eng_node *target, eng_uop *at, int stamp)
{
	if (!x || x->stamp == stamp)
		return false;
	x->stamp = stamp;
	if (x->kind == U_LOAD && c->ir->bufs[x->arg.buf].node == target && x->src[0] != at)
		return true;
	for (int i = 0; i < x->nsrc; i++)
		if (reads_elsewhere(c, x->src[i], target, at, stamp))
			return true;
	return false;
}

/* Set up output loops (with tiles if planned) and lower every root. */
static eng_status lower_all(lctx *c)
{
	eng_kernel_ir *ir = c->ir;
	eng_uops *u = ir->uops;
	const eng_node *r0 = c->roots[0];
	ir->ndim = r0->ndim;
	memcpy(ir->shape, r0->shape, sizeof(ir->shape));
	ir->nloops = 0;
	c->blockvar = -1;
	c->rowok = NULL;
	c->tiled = ir->tile[0] > 1 || ir->tile[1] > 1;
	for (int d = 0; d < r0->ndim; d++) {
		int64_t n = r0->shape[d];
		int64_t t = 1;
		for (int k = 0; k < 2; k++)
			if (ir->tiledim[k] == d)
				t = ir->tile[k];
		/* the narrow tile's dim in blocks of mblock tiles (plan_blocks): an inner loop over them;
		 * blocks of mrows rows when the last tile overhangs a block */
		int64_t mb = ir->mblock > 1 && ir->tiledim[1] == d ? ir->mblock : 1;
		int64_t blk = mb > 1 && ir->mrows > 0 ? ir->mrows : t * mb;
		int v = ir->nloops++;
		ir->loops[v] = (eng_loop){.n = n / blk, .mul = blk, .kind = L_OUTER, .dim = (int8_t)d};
		eng_uop *x = u_mul_const(u, u_var(u, v, n / blk), blk), *in = u_int_const(u, 0);
		if (mb > 1) {
			int mv = ir->nloops++;
			ir->loops[mv] = (eng_loop){.n = mb, .mul = t, .kind = L_OUTER, .dim = (int8_t)d};
			ir->mivar = mv;
			c->blockvar = v;
			in = u_mul_const(u, u_var(u, mv, mb), t);
		}
		if (t > 1) {
			int tv = ir->nloops++;
			ir->loops[tv] = (eng_loop){.n = t, .mul = 1, .kind = L_TILE, .dim = (int8_t)d};
			eng_uops_set_var_rank(u, tv, ir->tiledim[0] == d ? 3 : 2);
			for (int k = 0; k < 2; k++)
				if (ir->tiledim[k] == d)
					ir->tilevar[k] = tv;
			in = u_add(u, in, u_var(u, tv, t));
		}
		if (blk != t * mb)
			c->rowok = u_lt(u, in, u_int_const(u, blk));
		c->outidx[d] = u_add(u, x, in);
	}
	for (int i = 0; i < c->nroots; i++) {
		const eng_node *r = c->roots[i];
		c->npath = 0;
		c->path[c->npath++] = r;
		eng_uop *v = lower_node(c, r, c->outidx, NULL, true);
		c->npath = 0;
		if (c->st)
			return c->st;
		if (ir->nstores == ENG_MAX_STORES)
			return fail(c, ENG_ERANGE, "too many outputs in one kernel");
		int slot = buf_slot(c, r, true);
		if (ir->kbvar >= 0 && c->nroots == 1) {
			/* blocked reduction: each block adds the sum the blocks before it stored */
			eng_uop *kb = u_var(u, ir->kbvar, ir->loops[ir->kbvar].n);
			eng_uop *at = flat_index(u, r->ndim, r->shape, c->outidx);
			eng_uop *later = u_lt(u, u_int_const(u, 0), kb);
			eng_uop *prev = u_load(u, slot, r->dtype, at, c->rowok ? u_and(u, later, c->rowok) : later);
			v = u_alu(u, ENG_OP_ADD, r->dtype, v, prev, NULL);
		}
		ir->stores[ir->nstores++] = (eng_kstore){.buf = slot, .value = v, .cond = c->rowok};
	}
	/* in place: values may read an assign's target only at the element being written */
	eng_uop *at = flat_index(u, c->roots[0]->ndim, c->roots[0]->shape, c->outidx);
	for (int i = 0; i < c->nroots; i++) {
		const eng_node *r = c->roots[i];
		if (r->op != ENG_OP_ASSIGN)
			continue;
		for (int k = 0; k < ir->nstores; k++)
			if (reads_elsewhere(c, ir->stores[k].value, r->src[0], at, ++c->stamp)) {
				c->must_store = r->src[1];
				return c->st = ENG_ESTATE;
			}
	}
	if (eng_uops_failed(u))
		return fail(c, ENG_ENOMEM, "out of memory lowering a kernel");
	for (int p = 0; p < ir->nphases; p++) {
		uint64_t deps = ir->phases[p].key[ir->phases[p].node->ndim] ? ir->phases[p].key[ir->phases[p].node->ndim]->deps : 0;
		for (int d = 0; d < ir->phases[p].node->ndim; d++)
			deps |= ir->phases[p].key[d]->deps;
		ir->phases[p].dims = eng_plan_dims_of(ir, deps);
		/* a nested phase's parent: the first after it (phases come after those inside
		 * them) that owns one of its loops */
		for (int q = p + 1; q < ir->nphases && ir->phases[p].nest && ir->phases[p].parent < 0; q++)
			for (int k = 0; k < ir->phases[q].nred; k++)
				if ((ir->phases[p].nest >> ir->phases[q].red[k]) & 1)
					ir->phases[p].parent = q;
	}
	return ENG_OK;
}

static void reset_ir(eng_kernel_ir *ir)
{
	eng_uops_destroy(ir->uops);
	ir->uops = eng_uops_create();
	ir->nbufs = ir->nphases = ir->nstores = ir->nloops = 0;
}

/* Cost guard: a phase that depends on fewer output dims than the kernel's phases together
 * would be recomputed for every value of the others; store it instead. The last such phase
 * first: phases come after the phases inside them, so storing an argmax takes the max inside it
 * along (stored first, the max would be a kernel of its own). */
static const eng_node *cost_guard(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots)
{
	uint32_t all = 0;
	for (int p = 0; p < ir->nphases; p++)
		all |= ir->phases[p].dims;
	for (int p = ir->nphases - 1; p >= 0; p--) {
		uint32_t missing = all & ~ir->phases[p].dims;
		int64_t extra = 1;
		for (int d = 0; d < ir->ndim; d++)
			if ((missing >> d) & 1)
				extra *= ir->shape[d];
		if (extra > 1) {
			const eng_node *cand = ir->phases[p].candidate;
			for (int i = 0; i < nroots; i++)
				if (cand == roots[i])
					cand = ir->phases[p].node;
			return cand;
		}
	}
	return NULL;
}

/* Nested phases whose iterations, all loops around them included, are at most this many run
 * fused whatever the device's parallelism (a kernel launch costs more). */
#define NEST_SMALL_WORK (1 << 16)

/* Whether a nested phase reads an operand with a stride along its innermost loop (a matmul's
 * right side): stored, that operand is read along the loop around it in vector lanes under
 * register tiles, which nested phases do not get (measured 20x at 256^3). */
static bool nest_strided(eng_uop *x, int v, int stamp)
{
	if (x->stamp == stamp || !((x->deps >> v) & 1))
		return false;
	x->stamp = stamp;
	int64_t co;
	if (x->kind == U_LOAD && ((x->src[0]->deps >> v) & 1))
		return !u_linear_in_var(x->src[0], v, &co) || co != 1;
	for (int i = 0; i < x->nsrc; i++)
		if (x->src[i] && nest_strided(x->src[i], v, stamp))
			return true;
	return false;
}

/* Nest guard: whether a nested phase must not fuse: where the cost guard stores a phase
 * (guarded), where another phase of the kernel computes the same reduction (each would compute
 * it again), where it reads with a stride (nest_strided), or where, on more than
 * NEST_SMALL_WORK iterations, the kernel's rows (and their work-groups' threads) are fewer than
 * the device's parallel iterations and than the inner results the stored version would compute
 * in parallel. Then the first nested phase lowering started is stored, whichever it is: what the
 * kernel stored before phases nested, so the stored set grows as it did then (storing the
 * offending one can split a kernel where that did not; eng_lower does the same where lowering
 * stops on something else after a phase nested). NULL if none must. */
static const eng_node *nest_guard(lctx *c, const bk_target *t, bool guarded)
{
	const eng_kernel_ir *ir = c->ir;
	uint32_t all = 0;
	for (int p = 0; p < ir->nphases; p++)
		all |= ir->phases[p].dims;
	double rows = 1;
	for (int d = 0; d < ir->ndim; d++)
		if ((all >> d) & 1)
			rows *= (double)ir->shape[d];
	const double cap = rows * (t->reduce_group > 1 ? t->reduce_group : 1);
	bool bad = guarded;
	for (int p = 0; p < ir->nphases; p++) {
		const eng_phase *ph = &ir->phases[p];
		if (!ph->nest)
			continue;
		bool dup = false;
		for (int q = 0; q < ir->nphases && !dup; q++)
			dup = q != p && ir->phases[q].node == ph->node;
		double inner = rows, work;
		for (int v = 0; v < ir->nloops; v++)
			if ((ph->nest >> v) & 1)
				inner *= (double)ir->loops[v].n;
		work = inner;
		for (int k = 0; k < ph->nred; k++)
			work *= (double)ir->loops[ph->red[k]].n;
		double want = inner < t->parallelism ? inner : (double)t->parallelism;
		bool strided = ph->nred > 0 && nest_strided(ph->value, ph->red[ph->nred - 1], ++c->stamp);
		bad |= dup || strided || (work > NEST_SMALL_WORK && cap < want);
	}
	return bad ? c->first_nest : NULL;
}

/* Whether a phase of the kernel is nested (such kernels get no tiles). */
static bool has_nested(const eng_kernel_ir *ir)
{
	for (int p = 0; p < ir->nphases; p++)
		if (ir->phases[p].nest)
			return true;
	return false;
}

eng_status eng_lower(const eng_node *const *roots, int nroots, const eng_lower_opts *o,
		     eng_kernel_ir *ir, const eng_node **must_store, char *err, size_t errlen)
{
	lctx *c = calloc(1, sizeof(*c));
	*must_store = NULL;
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return ENG_ENOMEM;
	}
	c->ir = ir;
	c->o = o;
	c->roots = roots;
	c->nroots = nroots;
	c->err = err;
	c->errlen = errlen;
	ir->tiledim[0] = ir->tiledim[1] = -1;
	ir->tile[0] = ir->tile[1] = 1;
	ir->kblock = ir->kfull = ir->mblock = 0;
	ir->kbvar = ir->mivar = -1;
	ir->vsplit = ir->vsplit_n = 0;
	ir->vsplit_dim = -1;
	ir->pack = (eng_pack){.buf = -1};
	ir->rpack = (eng_rpack){.buf = -1};
	ir->mrows = ir->scratch = 0;
	ir->opts[0] = 0;
	reset_ir(ir);
	eng_status s = ir->uops ? lower_all(c) : ENG_ENOMEM;
	if ((s == ENG_ERANGE || (s == ENG_ESTATE && c->must_store)) && c->first_nest) {
		/* lowering stopped after a phase nested (on a reduction that cannot nest, or too
		 * big: loops, phases, buffers): the first nested one is stored, as before nesting */
		c->must_store = c->first_nest;
		s = ENG_ESTATE;
	}
	if (s == ENG_ESTATE && c->must_store) {
		*must_store = c->must_store;
		goto done;
	}
	if (s)
		goto done;
	const eng_node *g = cost_guard(ir, roots, nroots);
	const eng_node *ng = nest_guard(c, &o->target, g != NULL);
	if (ng)
		g = ng;
	if (g) {
		*must_store = g;
		s = ENG_ESTATE;
		goto done;
	}
	if (o->optimize && !has_nested(ir)) {
		char opts[256] = "";
		if (o->force) { /* a search's choice (choice.c) instead of the planners */
			if ((s = eng_choice_apply(ir, roots, nroots, o->force, &o->target, opts,
						  sizeof(opts), err, errlen)))
				goto done;
		} else {
			eng_plan_tiles(ir, &o->target, opts, sizeof(opts));
			if (!eng_plan_packed(ir, roots, nroots, &o->target, opts, sizeof(opts)))
				eng_plan_blocks(ir, roots, nroots, &o->target, opts, sizeof(opts));
		}
		eng_plan_split(ir, &o->target, opts, sizeof(opts));
		/* twice at most: blocks of rows whose last tile overhangs must read the rows through
		 * their packed block (eng_rpack); if that could not be lowered, no blocks nor narrow
		 * tile (never a read past the operand) */
		for (int pass = 0; pass < 2 && (ir->tiledim[0] >= 0 || ir->vsplit > 1); pass++) {
			if (pass) {
				if (!ir->mrows || ir->rpack.buf >= 0)
					break;
				ir->kblock = ir->kfull = ir->mblock = ir->mrows = 0;
				ir->pack.node = ir->rpack.node = NULL;
				ir->tiledim[1] = -1, ir->tile[1] = 1;
				snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts), " (unblocked)");
			}
			int64_t t0 = ir->tile[0], t1 = ir->tile[1];
			int d0 = ir->tiledim[0], d1 = ir->tiledim[1];
			reset_ir(ir);
			free(c->memo);
			c->memo = NULL;
			c->memo_cap = c->memo_n = 0;
			ir->tile[0] = t0, ir->tile[1] = t1, ir->tiledim[0] = d0, ir->tiledim[1] = d1;
			ir->kbvar = ir->mivar = -1;
			ir->pack.buf = ir->rpack.buf = -1;
			ir->scratch = 0;
			c->st = ENG_OK;
			s = ir->uops ? lower_all(c) : ENG_ENOMEM;
			if (s)
				goto done;
			snprintf(ir->opts, sizeof(ir->opts), "%s", opts);
		}
	}
	for (int i = 0; i < nroots; i++)
		ir->aliased |= roots[i]->op == ENG_OP_ASSIGN;
	s = eng_linearize(ir, &o->target, err, errlen);
done:
	free(c->memo);
	free(c);
	return s;
}

int eng_lower_inputs(const eng_kernel_ir *ir, const eng_node **out, int max)
{
	int n = 0;
	for (int i = 0; i < ir->nbufs && n < max; i++)
		if (!ir->bufs[i].output)
			out[n++] = ir->bufs[i].node;
	return n;
}

void eng_kernel_ir_free(eng_kernel_ir *ir)
{
	if (!ir)
		return;
	eng_uops_destroy(ir->uops);
	free(ir->stmts);
	ir->uops = NULL;
	ir->stmts = NULL;
}
