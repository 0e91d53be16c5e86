/* clamp.c: reduce loops of a sum cut to where its terms can be nonzero (clamp.h). Only ever
 * leaves out terms that are exactly zero by construction (a padded zero times the rest), so
 * the sum of the terms kept is the sum of all of them; the one difference is a non-finite
 * factor against padding (0 * inf), which the cut leaves out as the unpadded sum does. */
#include "clamp.h"

#define BOX_DEPTH 64
#define MAX_CONJ 32
#define FACTOR_DEPTH 32
#define SHARE_MAX_COMBOS 65536

/* Box of n's nonzero elements in its own coordinates (lo/hi filled for every dim): through
 * the ops that keep a zero a zero, down to the pads that made them. */
static bool box_rec(const eng_node *n, int64_t *lo, int64_t *hi, int depth)
{
	for (int d = 0; d < n->ndim; d++)
		lo[d] = 0, hi[d] = n->shape[d];
	if (depth > BOX_DEPTH || n->nsrc < 1 || !n->src[0])
		return false;
	const eng_node *s = n->src[0];
	switch (n->op) {
	case ENG_OP_CONTIGUOUS:
	case ENG_OP_DETACH:
	case ENG_OP_COPY:
	case ENG_OP_CAST:
		if (s->ndim != n->ndim)
			return false;
		return box_rec(s, lo, hi, depth + 1);
	case ENG_OP_PAD: {
		int64_t slo[ENG_MAX_DIMS], shi[ENG_MAX_DIMS];
		bool any = box_rec(s, slo, shi, depth + 1);
		for (int d = 0; d < n->ndim; d++) {
			int64_t before = n->arg.pairs[d][0];
			lo[d] = slo[d] + before;
			hi[d] = shi[d] + before;
			any |= before > 0 || n->arg.pairs[d][1] > 0;
		}
		return any;
	}
	default:
		return false;
	}
}

bool eng_zero_box(const eng_node *n, int64_t *lo, int64_t *hi) { return box_rec(n, lo, hi, 0); }

eng_uop *eng_zero_box_cond(eng_uops *u, const eng_node *n, eng_uop *const *idx)
{
	int64_t lo[ENG_MAX_DIMS], hi[ENG_MAX_DIMS];
	if (!eng_zero_box(n, lo, hi))
		return NULL;
	eng_uop *cond = u_bool(u, true);
	for (int d = 0; d < n->ndim; d++) {
		if (lo[d] > 0)
			cond = u_and(u, cond, u_lt(u, u_int_const(u, lo[d] - 1), idx[d]));
		if (hi[d] < n->shape[d])
			cond = u_and(u, cond, u_lt(u, idx[d], u_int_const(u, hi[d])));
	}
	return u_is_true(cond) ? NULL : cond;
}

typedef struct conjs {
	const eng_uop *c[MAX_CONJ];
	int n;
} conjs;

/* The integer comparisons a bool is the conjunction of (others are left out: each one kept is
 * still necessary for the bool to be true). */
static void add_conj(conjs *cs, const eng_uop *c)
{
	if (c->kind != U_ALU)
		return;
	if (c->op == ENG_OP_AND && c->dtype == ENG_BOOL) {
		add_conj(cs, c->src[0]);
		add_conj(cs, c->src[1]);
	} else if (c->op == ENG_OP_CMPLT && c->src[0]->dtype == ENG_I64 && c->src[1]->dtype == ENG_I64 &&
		   cs->n < MAX_CONJ) {
		for (int i = 0; i < cs->n; i++)
			if (cs->c[i] == c)
				return;
		cs->c[cs->n++] = c;
	}
}

static bool is_zero(const eng_uop *x)
{
	if (x->kind != U_CONST)
		return false;
	return eng_dtype_is_float((eng_dtype)x->dtype) ? x->arg.c.f == 0.0 : x->arg.c.i == 0;
}

/* Conditions necessary for x to be nonzero: those of each factor of a product (and of a cast
 * or negation's operand), a guarded load's guard, a zero-else select's condition, the facts
 * about loads of zero-bordered buffers. */
static void nonzero_conds(const eng_uop *x, const eng_zero_fact *facts, int nfacts, conjs *cs, int depth)
{
	if (depth > FACTOR_DEPTH)
		return;
	for (int i = 0; i < nfacts; i++)
		if (facts[i].value == x)
			add_conj(cs, facts[i].cond);
	if (x->kind == U_LOAD && x->nsrc > 1 && x->src[1])
		add_conj(cs, x->src[1]);
	if (x->kind != U_ALU)
		return;
	switch (x->op) {
	case ENG_OP_MUL:
		nonzero_conds(x->src[0], facts, nfacts, cs, depth + 1);
		nonzero_conds(x->src[1], facts, nfacts, cs, depth + 1);
		break;
	case ENG_OP_CAST:
	case ENG_OP_NEG:
		nonzero_conds(x->src[0], facts, nfacts, cs, depth + 1);
		break;
	case ENG_OP_WHERE:
		if (is_zero(x->src[2])) {
			add_conj(cs, x->src[0]);
			nonzero_conds(x->src[1], facts, nfacts, cs, depth + 1);
		}
		break;
	default:
		break;
	}
}

static eng_uop *imax(eng_uops *u, eng_uop *a, eng_uop *b) { return u_where(u, ENG_I64, u_lt(u, a, b), b, a); }
static eng_uop *imin(eng_uops *u, eng_uop *a, eng_uop *b) { return u_where(u, ENG_I64, u_lt(u, a, b), a, b); }

void eng_phase_clamp(eng_kernel_ir *ir, eng_phase *ph, uint64_t outer, const eng_zero_fact *facts, int nfacts)
{
	for (int k = 0; k < ENG_MAX_DIMS; k++)
		ph->rlo[k] = ph->rhi[k] = NULL;
	if (ph->op != ENG_OP_RSUM || !ph->value)
		return;
	eng_uops *u = ir->uops;
	conjs cs = {.n = 0};
	nonzero_conds(ph->value, facts, nfacts, &cs, 0);
	uint64_t before = outer; /* the variables of the loops outside loop k */
	for (int k = 0; k < ph->nred; before |= 1ull << ph->red[k], k++) {
		const int r = ph->red[k];
		const eng_loop *lp = &ir->loops[r];
		if (lp->kind != L_REDUCE || lp->unroll || lp->n < 2)
			continue;
		eng_uop *lo = NULL, *hi = NULL;
		for (int i = 0; i < cs.n; i++) {
			/* a < b, i.e. d = b - a >= 1, with d = coef * r + rest */
			eng_uop *d = u_add(u, cs.c[i]->src[1], u_mul_const(u, cs.c[i]->src[0], -1));
			int64_t coef;
			if (!u_linear_in_var(d, r, &coef) || (coef != 1 && coef != -1))
				continue;
			eng_uop *rest = u_add(u, d, u_mul_const(u, u_var(u, r, lp->n), -coef));
			if (rest->deps & ~before)
				continue;
			if (coef == 1) { /* r >= 1 - rest */
				eng_uop *b = u_add_const(u, u_mul_const(u, rest, -1), 1);
				if (b->vmax > 0)
					lo = lo ? imax(u, lo, b) : b;
			} else if (rest->vmin < lp->n) { /* r <= rest - 1 */
				hi = hi ? imin(u, hi, rest) : rest;
			}
		}
		if (lo && lo->vmin < 0)
			lo = imax(u, lo, u_int_const(u, 0));
		if (hi && hi->vmax > lp->n)
			hi = imin(u, hi, u_int_const(u, lp->n));
		ph->rlo[k] = lo;
		ph->rhi[k] = hi;
	}
}

/* x's value with the loop variables at vals; false for what is not integer index maths. */
static bool eval(const eng_uop *x, const int64_t *vals, int64_t *out, int depth)
{
	if (depth > FACTOR_DEPTH)
		return false;
	if (x->kind == U_CONST) {
		*out = x->arg.c.i;
		return x->dtype == ENG_I64 || x->dtype == ENG_BOOL;
	}
	if (x->kind == U_VAR) {
		*out = vals[x->arg.var];
		return true;
	}
	if (x->kind != U_ALU || (x->dtype != ENG_I64 && x->dtype != ENG_BOOL))
		return false;
	int64_t a[3] = {0};
	for (int i = 0; i < x->nsrc; i++)
		if (!eval(x->src[i], vals, &a[i], depth + 1))
			return false;
	switch (x->op) {
	case ENG_OP_ADD: *out = (int64_t)((uint64_t)a[0] + (uint64_t)a[1]); return true;
	case ENG_OP_SUB: *out = (int64_t)((uint64_t)a[0] - (uint64_t)a[1]); return true;
	case ENG_OP_MUL: *out = (int64_t)((uint64_t)a[0] * (uint64_t)a[1]); return true;
	case ENG_OP_NEG: *out = (int64_t)(0 - (uint64_t)a[0]); return true;
	case ENG_OP_IDIV: *out = a[1] == 0 || a[1] == -1 ? (a[1] ? (int64_t)(0 - (uint64_t)a[0]) : 0) : a[0] / a[1]; return true;
	case ENG_OP_MOD: *out = a[1] == 0 || a[1] == -1 ? 0 : a[0] % a[1]; return true;
	case ENG_OP_MAX: *out = a[0] > a[1] ? a[0] : a[1]; return true;
	case ENG_OP_CMPLT: *out = a[0] < a[1]; return true;
	case ENG_OP_AND: *out = a[0] & a[1]; return true;
	case ENG_OP_WHERE: *out = a[0] ? a[1] : a[2]; return true;
	default: return false;
	}
}

double eng_clamp_share(const eng_kernel_ir *ir, const eng_uop *lo, const eng_uop *hi, int64_t n)
{
	uint64_t vars = (lo ? lo->deps : 0) | (hi ? hi->deps : 0);
	int v[64], nv = 0;
	int64_t combos = 1, vals[ENG_MAX_LOOPS] = {0};
	for (int i = 0; i < ir->nloops && i < 64; i++)
		if ((vars >> i) & 1) {
			if (ir->loops[i].n < 1 || combos > SHARE_MAX_COMBOS / ir->loops[i].n)
				return 1.0;
			combos *= ir->loops[i].n;
			v[nv++] = i;
		}
	if (n < 1)
		return 1.0;
	double runs = 0;
	for (int64_t c = 0; c < combos; c++) {
		for (int64_t i = 0, rest = c; i < nv; rest /= ir->loops[v[i]].n, i++) /* c's digits */
			vals[v[i]] = rest % ir->loops[v[i]].n;
		int64_t a = 0, b = n;
		if ((lo && !eval(lo, vals, &a, 0)) || (hi && !eval(hi, vals, &b, 0)))
			return 1.0;
		a = a < 0 ? 0 : a;
		b = b > n ? n : b;
		runs += b > a ? (double)(b - a) : 0.0;
	}
	return runs / ((double)combos * (double)n);
}
