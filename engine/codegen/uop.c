/* uop.c: hash-consed kernel uops with bounds tracking and symbolic simplification of the
 * int64 index arithmetic that movement ops produce (linear forms, div/mod by constants). */
#include "uop.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK 512

typedef struct chunk {
	struct chunk *next;
	size_t used;
	eng_uop items[CHUNK];
} chunk;

struct eng_uops {
	uint8_t var_rank[64]; /* loop nesting rank of each variable, for term order */
	chunk *chunks;
	eng_uop **tab;
	size_t ntab, count;
	uint32_t next_id;
	bool failed;
	eng_uop dummy;
};

eng_uops *eng_uops_create(void)
{
	eng_uops *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->ntab = 1024;
	u->tab = calloc(u->ntab, sizeof(*u->tab));
	if (!u->tab) {
		free(u);
		return NULL;
	}
	u->dummy.kind = U_CONST;
	u->dummy.dtype = ENG_I64;
	return u;
}

void eng_uops_destroy(eng_uops *u)
{
	if (!u)
		return;
	for (chunk *c = u->chunks, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(u->tab);
	free(u);
}

bool eng_uops_failed(const eng_uops *u) { return u->failed; }

static uint64_t hmix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

static uint64_t key_hash(const eng_uop *k)
{
	uint64_t h = hmix(k->kind, k->op);
	h = hmix(h, k->dtype);
	for (int i = 0; i < k->nsrc; i++)
		h = hmix(h, k->src[i] ? k->src[i]->id : 0);
	return hmix(h, (uint64_t)k->arg.c.i);
}

static bool key_eq(const eng_uop *a, const eng_uop *b)
{
	if (a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->nsrc != b->nsrc ||
	    a->arg.c.i != b->arg.c.i)
		return false;
	for (int i = 0; i < a->nsrc; i++)
		if (a->src[i] != b->src[i])
			return false;
	return true;
}

static void grow(eng_uops *u)
{
	size_t n = u->ntab * 2;
	eng_uop **t = calloc(n, sizeof(*t));
	if (!t)
		return;
	for (size_t i = 0; i < u->ntab; i++)
		for (eng_uop *x = u->tab[i], *nx; x; x = nx) {
			nx = x->next;
			x->next = t[x->hash & (n - 1)];
			t[x->hash & (n - 1)] = x;
		}
	free(u->tab);
	u->tab = t;
	u->ntab = n;
}

/* Intern k (kind/op/dtype/src/arg filled; bounds filled by the caller). */
static eng_uop *intern(eng_uops *u, const eng_uop *k)
{
	if (u->failed)
		return &u->dummy;
	uint64_t h = key_hash(k);
	for (eng_uop *x = u->tab[h & (u->ntab - 1)]; x; x = x->next)
		if (x->hash == h && key_eq(x, k))
			return x;
	if (!u->chunks || u->chunks->used == CHUNK) {
		chunk *c = malloc(sizeof(*c));
		if (!c) {
			u->failed = true;
			return &u->dummy;
		}
		c->used = 0;
		c->next = u->chunks;
		u->chunks = c;
	}
	eng_uop *x = &u->chunks->items[u->chunks->used++];
	*x = *k;
	x->hash = h;
	x->id = ++u->next_id;
	x->stamp = 0;
	x->defined_at = 0;
	x->deps = 0;
	x->accdeps = 0;
	for (int i = 0; i < x->nsrc; i++)
		if (x->src[i]) {
			x->deps |= x->src[i]->deps;
			x->accdeps |= x->src[i]->accdeps;
		}
	if (u->count + 1 > u->ntab)
		grow(u);
	x->next = u->tab[h & (u->ntab - 1)];
	u->tab[h & (u->ntab - 1)] = x;
	u->count++;
	return x;
}

static void full_range(eng_uop *k)
{
	switch (k->dtype) {
	case ENG_BOOL:
		k->vmin = 0, k->vmax = 1;
		break;
	case ENG_U8:
		k->vmin = 0, k->vmax = 255;
		break;
	case ENG_I32:
		k->vmin = INT32_MIN, k->vmax = INT32_MAX;
		break;
	default:
		k->vmin = INT64_MIN, k->vmax = INT64_MAX;
		break;
	}
}

eng_uop *u_const(eng_uops *u, eng_dtype dt, eng_const_value c)
{
	eng_uop k = {.kind = U_CONST, .dtype = dt};
	k.arg.c = c;
	if (eng_dtype_is_float(dt))
		full_range(&k);
	else
		k.vmin = k.vmax = c.i;
	return intern(u, &k);
}

eng_uop *u_int_const(eng_uops *u, int64_t v) { return u_const(u, ENG_I64, (eng_const_value){.i = v}); }
eng_uop *u_bool(eng_uops *u, bool v) { return u_const(u, ENG_BOOL, (eng_const_value){.i = v}); }

eng_uop *u_var(eng_uops *u, int var, int64_t n)
{
	if (n <= 1)
		return u_int_const(u, 0);
	eng_uop k = {.kind = U_VAR, .dtype = ENG_I64, .vmin = 0, .vmax = n - 1};
	k.arg.var = var;
	eng_uop *x = intern(u, &k);
	x->deps |= 1ull << var;
	return x;
}

eng_uop *u_load(eng_uops *u, int buf, eng_dtype dt, eng_uop *idx, eng_uop *valid)
{
	if (valid && u_is_const(valid) && !valid->arg.c.i) /* never read: the value is masked */
		return u_const(u, dt, (eng_const_value){.i = 0});
	eng_uop k = {.kind = U_LOAD, .dtype = dt, .nsrc = valid && !u_is_true(valid) ? 2 : 1};
	k.src[0] = idx;
	k.src[1] = k.nsrc == 2 ? valid : NULL;
	k.arg.buf = buf;
	full_range(&k);
	return intern(u, &k);
}

eng_uop *u_acc(eng_uops *u, int phase, eng_dtype dt, eng_uop *ta, eng_uop *tb)
{
	eng_uop k = {.kind = U_ACC, .dtype = dt, .nsrc = 2};
	k.src[0] = ta;
	k.src[1] = tb;
	k.arg.acc = phase;
	full_range(&k);
	eng_uop *x = intern(u, &k);
	x->accdeps |= 1ull << phase;
	return x;
}

/* ---- saturating helpers for bounds ---- */

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return a > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return (a > 0) == (b > 0) ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t fdiv(int64_t a, int64_t c) /* floor division, c > 0 */
{
	int64_t q = a / c;
	return (a % c && a < 0) ? q - 1 : q;
}

/* ---- raw ALU construction with constant folding of integer/bool ops ---- */

static bool fold_int(eng_op op, int64_t a, int64_t b, int64_t *out)
{
	switch (op) {
	case ENG_OP_ADD: *out = (int64_t)((uint64_t)a + (uint64_t)b); return true;
	case ENG_OP_SUB: *out = (int64_t)((uint64_t)a - (uint64_t)b); return true;
	case ENG_OP_MUL: *out = (int64_t)((uint64_t)a * (uint64_t)b); return true;
	case ENG_OP_IDIV: *out = b == 0 || (a == INT64_MIN && b == -1) ? (b ? a : 0) : a / b; return true;
	case ENG_OP_MOD: *out = b == 0 || b == -1 ? 0 : a % b; return true;
	case ENG_OP_MAX: *out = a > b ? a : b; return true;
	case ENG_OP_CMPLT: *out = a < b; return true;
	case ENG_OP_CMPEQ: *out = a == b; return true;
	case ENG_OP_CMPNE: *out = a != b; return true;
	case ENG_OP_AND: *out = a & b; return true;
	case ENG_OP_OR: *out = a | b; return true;
	case ENG_OP_XOR: *out = a ^ b; return true;
	default: return false;
	}
}

eng_uop *u_alu(eng_uops *u, eng_op op, eng_dtype dt, eng_uop *a, eng_uop *b, eng_uop *c)
{
	int n = eng_op_nsrc(op);
	if (op == ENG_OP_CAST || op == ENG_OP_BITCAST)
		n = 1;
	eng_uop k = {.kind = U_ALU, .op = (uint8_t)op, .dtype = dt, .nsrc = (uint8_t)n};
	k.src[0] = a;
	k.src[1] = n > 1 ? b : NULL;
	k.src[2] = n > 2 ? c : NULL;
	if (op == ENG_OP_WHERE && u_is_const(a))
		return a->arg.c.i ? b : c;
	if (op == ENG_OP_WHERE && b == c)
		return b;
	/* fold int64/bool index arithmetic on constants */
	if (n == 2 && (dt == ENG_I64 || dt == ENG_BOOL) && a->dtype == b->dtype &&
	    (a->dtype == ENG_I64 || a->dtype == ENG_BOOL) && u_is_const(a) && u_is_const(b)) {
		int64_t r;
		if (fold_int(op, a->arg.c.i, b->arg.c.i, &r))
			return dt == ENG_BOOL ? u_bool(u, r != 0) : u_int_const(u, r);
	}
	full_range(&k);
	if (dt == ENG_BOOL)
		k.vmin = 0, k.vmax = 1;
	/* integer bounds that survive: a cast that cannot wrap, a select between two values */
	if (op == ENG_OP_CAST && eng_dtype_is_int(dt) && eng_dtype_is_int((eng_dtype)a->dtype) && a->vmin >= k.vmin &&
	    a->vmax <= k.vmax)
		k.vmin = a->vmin, k.vmax = a->vmax;
	if (op == ENG_OP_WHERE && eng_dtype_is_int(dt) && b->dtype == dt && c->dtype == dt) {
		k.vmin = b->vmin < c->vmin ? b->vmin : c->vmin;
		k.vmax = b->vmax > c->vmax ? b->vmax : c->vmax;
	}
	return intern(u, &k);
}

/* ---- linear forms: sum of coef*base + constant ---- */

#define MAXTERMS 24
typedef struct lin {
	int n;
	eng_uop *base[MAXTERMS];
	int64_t coef[MAXTERMS];
	int64_t c;
	bool ok;
} lin;

static void lin_add_term(lin *l, eng_uop *base, int64_t coef)
{
	for (int i = 0; i < l->n; i++)
		if (l->base[i] == base) {
			l->coef[i] += coef;
			return;
		}
	if (l->n == MAXTERMS) {
		l->ok = false;
		return;
	}
	l->base[l->n] = base;
	l->coef[l->n++] = coef;
}

static bool is_mulc(const eng_uop *x)
{
	return x->kind == U_ALU && x->op == ENG_OP_MUL && x->dtype == ENG_I64 && u_is_const(x->src[1]);
}

static bool is_add(const eng_uop *x) { return x->kind == U_ALU && x->op == ENG_OP_ADD && x->dtype == ENG_I64; }

static void lin_collect(lin *l, eng_uop *x, int64_t scale)
{
	if (u_is_const(x)) {
		l->c += scale * x->arg.c.i;
	} else if (is_add(x)) {
		lin_collect(l, x->src[0], scale);
		lin_collect(l, x->src[1], scale);
	} else if (is_mulc(x)) {
		lin_collect(l, x->src[0], scale * x->src[1]->arg.c.i);
	} else {
		lin_add_term(l, x, scale);
	}
}

static void lin_of(lin *l, eng_uop *x)
{
	l->n = 0;
	l->c = 0;
	l->ok = true;
	lin_collect(l, x, 1);
}

static eng_uop *raw_bin(eng_uops *u, eng_op op, eng_uop *a, eng_uop *b, int64_t vmin, int64_t vmax)
{
	eng_uop k = {.kind = U_ALU, .op = (uint8_t)op, .dtype = ENG_I64, .nsrc = 2, .vmin = vmin, .vmax = vmax};
	k.src[0] = a;
	k.src[1] = b;
	return intern(u, &k);
}

static eng_uop *term(eng_uops *u, eng_uop *base, int64_t coef)
{
	if (coef == 1)
		return base;
	int64_t lo = sat_mul(base->vmin, coef), hi = sat_mul(base->vmax, coef);
	return raw_bin(u, ENG_OP_MUL, base, u_int_const(u, coef), lo < hi ? lo : hi, lo < hi ? hi : lo);
}

/* Terms in sums: non-variables first, then variables by loop rank (innermost last), so an
 * index reads "invariant part + inner variable" and vectorizers see consecutive addresses.
 * The rank comes from u, so the sort takes u as an argument (no process-wide comparison
 * context: contexts on other threads lower kernels at the same time). */
static int term_rank(const eng_uops *u, const eng_uop *x)
{
	return x->kind == U_VAR ? 1 + u->var_rank[x->arg.var & 63] : 0;
}

static bool term_before(const eng_uops *u, const eng_uop *a, const eng_uop *b)
{
	int ra = term_rank(u, a), rb = term_rank(u, b);
	return ra != rb ? ra < rb : a->id < b->id;
}

/* Insertion sort of a sum's terms (at most MAXTERMS of them). */
static void sort_terms(const eng_uops *u, eng_uop **t, int n)
{
	for (int i = 1; i < n; i++) {
		eng_uop *x = t[i];
		int j = i;
		for (; j > 0 && term_before(u, x, t[j - 1]); j--)
			t[j] = t[j - 1];
		t[j] = x;
	}
}

void eng_uops_set_var_rank(eng_uops *u, int var, int rank)
{
	if (var >= 0 && var < 64)
		u->var_rank[var] = (uint8_t)rank;
}

static bool is_divmod_const(const eng_uop *x, eng_op op)
{
	return x->kind == U_ALU && x->op == op && x->dtype == ENG_I64 && u_is_const(x->src[1]) &&
	       x->src[1]->arg.c.i > 1 && x->src[0]->vmin >= 0;
}

/* Put back together what a split and a merge of axes took apart: k*c*(y / c) + k*(y % c) is
 * k*y (y >= 0), so a pooling window's (i / 2) * 2 + i % 2 reads as i, consecutive. (y / c) is
 * matched as u_div_const builds it: (x / c1) / c is x / (c1 * c), so i % 3 + (i / 3) % 3 * 3 +
 * (i / 9) * 9 comes back to i in two steps. */
static void lin_recombine(lin *l)
{
	for (bool again = true; again && l->ok;) {
		again = false;
		for (int i = 0; i < l->n && !again; i++) {
			if (!l->coef[i] || !is_divmod_const(l->base[i], ENG_OP_MOD))
				continue;
			eng_uop *y = l->base[i]->src[0];
			const eng_uop *x = y;
			int64_t c = l->base[i]->src[1]->arg.c.i, k = l->coef[i], cx = c;
			if (is_divmod_const(y, ENG_OP_IDIV) && y->src[1]->arg.c.i < INT64_MAX / c)
				x = y->src[0], cx = y->src[1]->arg.c.i * c;
			for (int j = 0; j < l->n && !again; j++)
				if (l->coef[j] && is_divmod_const(l->base[j], ENG_OP_IDIV) && l->base[j]->src[0] == x &&
				    l->base[j]->src[1]->arg.c.i == cx && l->coef[j] == sat_mul(k, c)) {
					l->coef[i] = l->coef[j] = 0;
					lin_collect(l, y, k);
					again = true;
				}
		}
	}
}

/* Rebuild a canonical sum: terms sorted by base id, constant last. */
static eng_uop *lin_build(eng_uops *u, lin *l)
{
	lin_recombine(l);
	eng_uop *order[MAXTERMS];
	int n = 0;
	for (int i = 0; i < l->n; i++)
		if (l->coef[i])
			order[n++] = l->base[i];
	sort_terms(u, order, n);
	eng_uop *acc = NULL;
	for (int i = 0; i < n; i++) {
		int64_t coef = 0;
		for (int j = 0; j < l->n; j++)
			if (l->base[j] == order[i])
				coef = l->coef[j];
		eng_uop *t = term(u, order[i], coef);
		acc = acc ? raw_bin(u, ENG_OP_ADD, acc, t, sat_add(acc->vmin, t->vmin), sat_add(acc->vmax, t->vmax)) : t;
	}
	if (!acc)
		return u_int_const(u, l->c);
	if (l->c)
		acc = raw_bin(u, ENG_OP_ADD, acc, u_int_const(u, l->c), sat_add(acc->vmin, l->c), sat_add(acc->vmax, l->c));
	return acc;
}

eng_uop *u_add(eng_uops *u, eng_uop *a, eng_uop *b)
{
	lin l;
	l.n = 0, l.c = 0, l.ok = true;
	lin_collect(&l, a, 1);
	lin_collect(&l, b, 1);
	if (!l.ok)
		return raw_bin(u, ENG_OP_ADD, a, b, sat_add(a->vmin, b->vmin), sat_add(a->vmax, b->vmax));
	return lin_build(u, &l);
}

eng_uop *u_add_const(eng_uops *u, eng_uop *a, int64_t c) { return c ? u_add(u, a, u_int_const(u, c)) : a; }

eng_uop *u_mul_const(eng_uops *u, eng_uop *a, int64_t c)
{
	if (c == 0)
		return u_int_const(u, 0);
	if (c == 1)
		return a;
	lin l;
	lin_of(&l, a);
	if (!l.ok)
		return term(u, a, c);
	for (int i = 0; i < l.n; i++)
		l.coef[i] *= c;
	l.c *= c;
	return lin_build(u, &l);
}

/* Write a = c*q + r with every coefficient of r in [0, c). Valid for a >= 0 with all terms
 * non-negative; then a / c = q + r / c and a % c = r % c. False if nothing would change. */
static bool split_mod(eng_uops *u, eng_uop *a, int64_t c, eng_uop **q, eng_uop **r)
{
	lin l, lq, lr;
	lin_of(&l, a);
	if (!l.ok)
		return false;
	lq.n = lr.n = 0;
	lq.ok = lr.ok = true;
	lq.c = fdiv(l.c, c);
	lr.c = l.c - lq.c * c;
	bool changed = lq.c != 0;
	for (int i = 0; i < l.n; i++) {
		if (l.base[i]->vmin < 0)
			return false;
		int64_t qi = fdiv(l.coef[i], c), ri = l.coef[i] - qi * c;
		if (qi) {
			lin_add_term(&lq, l.base[i], qi);
			changed = true;
		}
		if (ri)
			lin_add_term(&lr, l.base[i], ri);
	}
	if (!changed || !lq.ok || !lr.ok)
		return false;
	*q = lin_build(u, &lq);
	*r = lin_build(u, &lr);
	return (*r)->vmin >= 0;
}

eng_uop *u_div_const(eng_uops *u, eng_uop *a, int64_t c)
{
	if (c == 1)
		return a;
	if (u_is_const(a))
		return u_int_const(u, a->arg.c.i / c);
	if (a->vmin >= 0 && a->vmax < c)
		return u_int_const(u, 0);
	if (a->vmin >= 0 && a->vmin / c == a->vmax / c)
		return u_int_const(u, a->vmin / c);
	/* (x / c1) / c -> x / (c1 * c) */
	if (a->kind == U_ALU && a->op == ENG_OP_IDIV && a->dtype == ENG_I64 && u_is_const(a->src[1]) &&
	    a->src[0]->vmin >= 0 && a->src[1]->arg.c.i < (INT64_MAX / c))
		return u_div_const(u, a->src[0], a->src[1]->arg.c.i * c);
	eng_uop *q, *r;
	if (a->vmin >= 0 && split_mod(u, a, c, &q, &r))
		return u_add(u, q, r->vmax < c ? u_int_const(u, 0) : u_div_const(u, r, c));
	int64_t lo = a->vmin / c, hi = a->vmax / c;
	return raw_bin(u, ENG_OP_IDIV, a, u_int_const(u, c), lo, hi);
}

eng_uop *u_mod_const(eng_uops *u, eng_uop *a, int64_t c)
{
	if (c == 1)
		return u_int_const(u, 0);
	if (u_is_const(a))
		return u_int_const(u, a->arg.c.i % c);
	if (a->vmin >= 0 && a->vmax < c)
		return a;
	/* (x % m) % c -> x % c when c divides m */
	if (a->kind == U_ALU && a->op == ENG_OP_MOD && a->dtype == ENG_I64 && u_is_const(a->src[1]) &&
	    a->src[0]->vmin >= 0 && a->src[1]->arg.c.i % c == 0)
		return u_mod_const(u, a->src[0], c);
	eng_uop *q, *r;
	if (a->vmin >= 0 && split_mod(u, a, c, &q, &r))
		return r->vmax < c ? r : u_mod_const(u, r, c);
	int64_t lo = a->vmin >= 0 ? 0 : -(c - 1), hi = c - 1;
	if (a->vmin >= 0 && a->vmax < hi)
		hi = a->vmax;
	return raw_bin(u, ENG_OP_MOD, a, u_int_const(u, c), lo, hi);
}

eng_uop *u_lt(eng_uops *u, eng_uop *a, eng_uop *b)
{
	if (a->vmax < b->vmin)
		return u_bool(u, true);
	if (a->vmin >= b->vmax)
		return u_bool(u, false);
	eng_uop k = {.kind = U_ALU, .op = ENG_OP_CMPLT, .dtype = ENG_BOOL, .nsrc = 2, .vmin = 0, .vmax = 1};
	k.src[0] = a;
	k.src[1] = b;
	return intern(u, &k);
}

eng_uop *u_and(eng_uops *u, eng_uop *a, eng_uop *b)
{
	if (u_is_const(a))
		return a->arg.c.i ? b : a;
	if (u_is_const(b))
		return b->arg.c.i ? a : b;
	if (a == b)
		return a;
	if (a->id > b->id) {
		eng_uop *t = a;
		a = b;
		b = t;
	}
	eng_uop k = {.kind = U_ALU, .op = ENG_OP_AND, .dtype = ENG_BOOL, .nsrc = 2, .vmin = 0, .vmax = 1};
	k.src[0] = a;
	k.src[1] = b;
	return intern(u, &k);
}

eng_uop *u_where(eng_uops *u, eng_dtype dt, eng_uop *c, eng_uop *a, eng_uop *b)
{
	return u_alu(u, ENG_OP_WHERE, dt, c, a, b);
}

int64_t u_coef_of_var(const eng_uop *x, int var)
{
	lin l;
	lin_of(&l, (eng_uop *)x);
	if (!l.ok)
		return 0;
	for (int i = 0; i < l.n; i++)
		if (l.base[i]->kind == U_VAR && l.base[i]->arg.var == var)
			return l.coef[i];
	return 0;
}

bool u_linear_in_var(const eng_uop *x, int var, int64_t *coef)
{
	lin l;
	lin_of(&l, (eng_uop *)x);
	*coef = 0;
	if (!l.ok)
		return false;
	for (int i = 0; i < l.n; i++) {
		if (l.base[i]->kind == U_VAR && l.base[i]->arg.var == var)
			*coef += l.coef[i];
		else if (l.coef[i] && ((l.base[i]->deps >> var) & 1))
			return false; /* var inside a non-linear term */
	}
	return true;
}
