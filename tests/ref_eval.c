/* ref_eval.c: the reference evaluator: interprets an eng_node graph element by element in
 * double / int64, one op at a time, with the engine's documented semantics (see ops.def). */
#include "ref_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arrays and element conversions ---- */

static bool is_float(eng_dtype dt)
{
	return dt == ENG_F16 || dt == ENG_F32;
}

void ref_free(ref_array *a)
{
	if (!a)
		return;
	free(a->f);
	free(a->i);
	a->f = NULL;
	a->i = NULL;
}

static bool arr_init(ref_array *a, eng_dtype dt, int ndim, const int64_t *shape)
{
	memset(a, 0, sizeof(*a));
	a->dtype = dt;
	a->ndim = ndim;
	a->numel = 1;
	for (int d = 0; d < ndim; d++) {
		a->shape[d] = shape[d];
		a->numel *= shape[d];
	}
	size_t n = a->numel > 0 ? (size_t)a->numel : 1;
	if (is_float(dt))
		a->f = calloc(n, sizeof(double));
	else
		a->i = calloc(n, sizeof(int64_t));
	return a->f || a->i;
}

double ref_get(const ref_array *a, int64_t k)
{
	return a->f ? a->f[k] : (double)a->i[k];
}

/* Round a double to the precision of a float dtype; exact (float64 mode) keeps it as is. */
static double round_to(bool exact, eng_dtype dt, double v)
{
	if (exact)
		return v;
	return dt == ENG_F16 ? eng_f16_round(v) : (double)(float)v;
}

/* Reduce an integer (taken modulo 2^64) to the range of an integer or bool dtype. */
static int64_t wrap_to(eng_dtype dt, uint64_t v)
{
	switch (dt) {
	case ENG_BOOL:
		return v != 0;
	case ENG_U8:
		return (uint8_t)v;
	case ENG_I32:
		return (int32_t)(uint32_t)v;
	default:
		return (int64_t)v;
	}
}

static void int_range(eng_dtype dt, double *lo, double *hi)
{
	switch (dt) {
	case ENG_BOOL:
		*lo = 0, *hi = 1;
		break;
	case ENG_U8:
		*lo = 0, *hi = 255;
		break;
	case ENG_I32:
		*lo = INT32_MIN, *hi = INT32_MAX;
		break;
	default:
		*lo = (double)INT64_MIN, *hi = 9223372036854775807.0; /* rounds to 2^63 */
		break;
	}
}

/* Float to integer: truncate toward zero, NaN -> 0, saturate at the type's limits. */
static int64_t float_to_int(eng_dtype dt, double v)
{
	double lo, hi;
	if (isnan(v))
		return 0;
	v = trunc(v);
	int_range(dt, &lo, &hi);
	if (dt == ENG_I64) {
		if (v >= 9223372036854775808.0)
			return INT64_MAX;
		if (v <= -9223372036854775808.0)
			return INT64_MIN;
		return (int64_t)v;
	}
	if (v < lo)
		return (int64_t)lo;
	if (v > hi)
		return (int64_t)hi;
	return (int64_t)v;
}

/* Value conversion (CAST) of element k of s into element j of o. */
static void cast_elem(bool exact, const ref_array *s, int64_t k, ref_array *o, int64_t j)
{
	eng_dtype to = o->dtype;
	if (to == ENG_BOOL) {
		o->i[j] = s->f ? s->f[k] != 0 : s->i[k] != 0;
	} else if (is_float(to)) {
		if (s->f)
			o->f[j] = round_to(exact, to, s->f[k]);
		else if (exact)
			o->f[j] = (double)s->i[k];
		else if (to == ENG_F16)
			o->f[j] = eng_f16_round((double)s->i[k]);
		else
			o->f[j] = (double)(float)s->i[k];
	} else {
		o->i[j] = s->f ? float_to_int(to, s->f[k]) : wrap_to(to, (uint64_t)s->i[k]);
	}
}

/* Bit patterns, for BITCAST and buffer decoding. */
static void elem_to_bytes(const ref_array *s, int64_t k, unsigned char *b)
{
	switch (s->dtype) {
	case ENG_BOOL:
	case ENG_U8:
		b[0] = (unsigned char)s->i[k];
		break;
	case ENG_I32: {
		int32_t v = (int32_t)s->i[k];
		memcpy(b, &v, 4);
		break;
	}
	case ENG_I64:
		memcpy(b, &s->i[k], 8);
		break;
	case ENG_F16: {
		uint16_t v = eng_f16_bits(s->f[k]);
		memcpy(b, &v, 2);
		break;
	}
	default: {
		float v = (float)s->f[k];
		memcpy(b, &v, 4);
		break;
	}
	}
}

static void elem_from_bytes(ref_array *o, int64_t j, const unsigned char *b)
{
	switch (o->dtype) {
	case ENG_BOOL:
		o->i[j] = b[0] != 0;
		break;
	case ENG_U8:
		o->i[j] = b[0];
		break;
	case ENG_I32: {
		int32_t v;
		memcpy(&v, b, 4);
		o->i[j] = v;
		break;
	}
	case ENG_I64:
		memcpy(&o->i[j], b, 8);
		break;
	case ENG_F16: {
		uint16_t v;
		memcpy(&v, b, 2);
		o->f[j] = eng_f16_to_double(v);
		break;
	}
	default: {
		float v;
		memcpy(&v, b, 4);
		o->f[j] = (double)v;
		break;
	}
	}
}

bool ref_decode(eng_dtype dt, int ndim, const int64_t *shape, const void *src, ref_array *out)
{
	if (!arr_init(out, dt, ndim, shape))
		return false;
	size_t isz = eng_dtype_size(dt);
	for (int64_t k = 0; k < out->numel; k++)
		elem_from_bytes(out, k, (const unsigned char *)src + (size_t)k * isz);
	return true;
}

/* ---- index helpers ---- */

static void unravel(int64_t k, int ndim, const int64_t *shape, int64_t *idx)
{
	for (int d = ndim - 1; d >= 0; d--) {
		idx[d] = shape[d] ? k % shape[d] : 0;
		k = shape[d] ? k / shape[d] : 0;
	}
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx)
{
	int64_t k = 0;
	for (int d = 0; d < ndim; d++)
		k = k * shape[d] + idx[d];
	return k;
}

/* Copy element k of s into element j of o (same dtype). */
static void copy_elem(const ref_array *s, int64_t k, ref_array *o, int64_t j)
{
	if (o->f)
		o->f[j] = s->f[k];
	else
		o->i[j] = s->i[k];
}

/* ---- per-op evaluation ---- */

static bool eval_unary(bool exact, const eng_node *n, const ref_array *s, ref_array *o)
{
	for (int64_t k = 0; k < o->numel; k++) {
		if (n->op == ENG_OP_CAST) {
			cast_elem(exact, s, k, o, k);
			continue;
		}
		if (n->op == ENG_OP_BITCAST) {
			unsigned char b[8] = {0};
			elem_to_bytes(s, k, b);
			elem_from_bytes(o, k, b);
			continue;
		}
		if (!o->f) { /* integer NEG and TRUNC; float math on ints goes through double */
			int64_t x = s->i[k];
			if (n->op == ENG_OP_NEG)
				o->i[k] = wrap_to(o->dtype, 0 - (uint64_t)x);
			else if (n->op == ENG_OP_TRUNC)
				o->i[k] = x;
			else
				return false;
			continue;
		}
		double x = s->f[k], r;
		switch (n->op) {
		case ENG_OP_EXP2:
			r = exp2(x);
			break;
		case ENG_OP_LOG2:
			r = log2(x);
			break;
		case ENG_OP_SIN:
			r = sin(x);
			break;
		case ENG_OP_SQRT:
			r = sqrt(x);
			break;
		case ENG_OP_RECIP:
			r = 1.0 / x;
			break;
		case ENG_OP_NEG:
			r = -x;
			break;
		case ENG_OP_TRUNC:
			r = trunc(x);
			break;
		default:
			return false;
		}
		o->f[k] = round_to(exact, o->dtype, r);
	}
	return true;
}

static bool int_binary(eng_op op, eng_dtype dt, int64_t a, int64_t b, int64_t *r)
{
	int bits = dt == ENG_I64 ? 64 : dt == ENG_I32 ? 32 : 8;
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
	switch (op) {
	case ENG_OP_ADD:
		*r = wrap_to(dt, ua + ub);
		break;
	case ENG_OP_SUB:
		*r = wrap_to(dt, ua - ub);
		break;
	case ENG_OP_MUL:
		*r = wrap_to(dt, ua * ub);
		break;
	case ENG_OP_IDIV:
		if (b == 0)
			*r = 0;
		else if (a == INT64_MIN && b == -1)
			*r = INT64_MIN;
		else
			*r = wrap_to(dt, (uint64_t)(a / b));
		break;
	case ENG_OP_MOD:
		if (b == 0 || (a == INT64_MIN && b == -1))
			*r = 0;
		else
			*r = wrap_to(dt, (uint64_t)(a % b));
		break;
	case ENG_OP_MAX:
		*r = a > b ? a : b;
		break;
	case ENG_OP_CMPLT:
		*r = a < b;
		break;
	case ENG_OP_CMPEQ:
		*r = a == b;
		break;
	case ENG_OP_CMPNE:
		*r = a != b;
		break;
	case ENG_OP_AND:
		*r = wrap_to(dt, ua & ub);
		break;
	case ENG_OP_OR:
		*r = wrap_to(dt, ua | ub);
		break;
	case ENG_OP_XOR:
		*r = wrap_to(dt, ua ^ ub);
		break;
	case ENG_OP_SHL:
		*r = wrap_to(dt, ua << (ub & (uint64_t)(bits - 1)));
		break;
	case ENG_OP_SHR:
		if (dt == ENG_BOOL || dt == ENG_U8) /* logical; the value is already 0..255 */
			*r = (int64_t)(ua >> (ub & (uint64_t)(bits - 1)));
		else /* arithmetic: a is sign-extended to 64 bits */
			*r = wrap_to(dt, (uint64_t)(a >> (ub & (uint64_t)(bits - 1))));
		break;
	default:
		return false;
	}
	return true;
}

static bool float_binary(bool exact, eng_op op, eng_dtype dt, double a, double b, double *rf,
			 int64_t *ri)
{
	switch (op) {
	case ENG_OP_ADD:
		*rf = round_to(exact, dt, a + b);
		break;
	case ENG_OP_SUB:
		*rf = round_to(exact, dt, a - b);
		break;
	case ENG_OP_MUL:
		*rf = round_to(exact, dt, a * b);
		break;
	case ENG_OP_MAX:
		*rf = a > b ? a : b;
		break;
	case ENG_OP_CMPLT:
		*ri = a < b;
		break;
	case ENG_OP_CMPEQ:
		*ri = a == b;
		break;
	case ENG_OP_CMPNE:
		*ri = a != b;
		break;
	default:
		return false;
	}
	return true;
}

static bool eval_binary(bool exact, const eng_node *n, const ref_array *a, const ref_array *b,
			ref_array *o)
{
	eng_dtype dt = n->src[0]->dtype; /* operands share a dtype; comparisons output bool */
	for (int64_t k = 0; k < o->numel; k++) {
		bool ok;
		if (is_float(dt)) {
			double rf = 0;
			int64_t ri = 0;
			ok = float_binary(exact, n->op, dt, a->f[k], b->f[k], &rf, &ri);
			if (o->f)
				o->f[k] = rf;
			else
				o->i[k] = ri;
		} else {
			ok = int_binary(n->op, dt, a->i[k], b->i[k], &o->i[k]);
		}
		if (!ok)
			return false;
	}
	return true;
}

static bool eval_reduce(bool exact, const eng_node *n, const ref_array *s, ref_array *o)
{
	eng_dtype dt = n->dtype;
	double fid = n->op == ENG_OP_RSUM ? 0 : n->op == ENG_OP_RPROD ? 1 : -INFINITY;
	int64_t iid = n->op == ENG_OP_RSUM ? 0 : n->op == ENG_OP_RPROD ? 1 : 0;
	if (n->op == ENG_OP_RMAX && (dt == ENG_I32 || dt == ENG_I64))
		iid = dt == ENG_I32 ? INT32_MIN : INT64_MIN;
	for (int64_t j = 0; j < o->numel; j++) {
		if (o->f)
			o->f[j] = fid;
		else
			o->i[j] = iid;
	}
	int64_t idx[ENG_MAX_DIMS];
	for (int64_t k = 0; k < s->numel; k++) {
		unravel(k, s->ndim, s->shape, idx);
		for (int d = 0; d < s->ndim; d++)
			if ((n->arg.axes >> d) & 1)
				idx[d] = 0;
		int64_t j = ravel(o->ndim, o->shape, idx);
		if (o->f) {
			double x = s->f[k];
			if (n->op == ENG_OP_RSUM)
				o->f[j] += x;
			else if (n->op == ENG_OP_RPROD)
				o->f[j] *= x;
			else if (x > o->f[j] || isnan(x))
				o->f[j] = x;
		} else {
			eng_op op = n->op == ENG_OP_RSUM    ? ENG_OP_ADD
				    : n->op == ENG_OP_RPROD ? ENG_OP_MUL
							    : ENG_OP_MAX;
			int_binary(op, dt, o->i[j], s->i[k], &o->i[j]);
		}
	}
	if (o->f)
		for (int64_t j = 0; j < o->numel; j++)
			o->f[j] = round_to(exact, dt, o->f[j]);
	return true;
}

/* Movement: for each output element find its source element (or none: PAD's zero). */
static bool eval_movement(const eng_node *n, const ref_array *s, ref_array *o)
{
	int64_t oi[ENG_MAX_DIMS], si[ENG_MAX_DIMS];
	if (n->op == ENG_OP_RESHAPE) {
		for (int64_t k = 0; k < o->numel; k++)
			copy_elem(s, k, o, k);
		return true;
	}
	if (n->op == ENG_OP_EXPAND && s->ndim != o->ndim)
		return false;
	for (int64_t k = 0; k < o->numel; k++) {
		bool inside = true;
		unravel(k, o->ndim, o->shape, oi);
		for (int d = 0; d < o->ndim; d++) {
			switch (n->op) {
			case ENG_OP_PERMUTE:
				si[n->arg.perm[d]] = oi[d];
				break;
			case ENG_OP_EXPAND:
				si[d] = s->shape[d] == 1 ? 0 : oi[d];
				break;
			case ENG_OP_PAD:
				si[d] = oi[d] - n->arg.pairs[d][0];
				inside &= si[d] >= 0 && si[d] < s->shape[d];
				break;
			case ENG_OP_SHRINK:
				si[d] = oi[d] + n->arg.pairs[d][0];
				break;
			case ENG_OP_FLIP:
				si[d] = (n->arg.axes >> d) & 1 ? s->shape[d] - 1 - oi[d] : oi[d];
				break;
			default:
				return false;
			}
		}
		if (inside)
			copy_elem(s, ravel(s->ndim, s->shape, si), o, k);
		else if (o->f)
			o->f[k] = 0;
		else
			o->i[k] = 0;
	}
	return true;
}

static bool eval_leaf(bool exact, const eng_node *n, ref_array *o)
{
	if (n->op == ENG_OP_BUFFER) {
		size_t nbytes = (size_t)o->numel * eng_dtype_size(n->dtype);
		if (!n->buf || n->buf->nbytes != nbytes)
			return false;
		if (!nbytes)
			return true;
		unsigned char *tmp = malloc(nbytes);
		if (!tmp)
			return false;
		bool ok = eng_buffer_read(n->buf, tmp, nbytes) == ENG_OK;
		for (int64_t k = 0; ok && k < o->numel; k++)
			elem_from_bytes(o, k, tmp + (size_t)k * eng_dtype_size(n->dtype));
		free(tmp);
		return ok;
	}
	int64_t idx[ENG_MAX_DIMS];
	for (int64_t k = 0; k < o->numel; k++) {
		if (n->op == ENG_OP_CONST) {
			if (o->f)
				o->f[k] = n->arg.c.f;
			else
				o->i[k] = n->arg.c.i;
		} else if (n->op == ENG_OP_INDEX) {
			unravel(k, o->ndim, o->shape, idx);
			if (o->f)
				o->f[k] = round_to(exact, o->dtype, (double)idx[n->arg.axis]);
			else
				o->i[k] = wrap_to(o->dtype, (uint64_t)idx[n->arg.axis]);
		} else {
			return false;
		}
	}
	return true;
}

/* ---- the memoised recursion ---- */

typedef struct memo_entry {
	const eng_node *node;
	ref_array *val; /* heap-allocated so that growing the table moves no live array */
} memo_entry;

typedef struct memo {
	memo_entry *e;
	size_t n, cap;
	const ref_opts *opts; /* never NULL */
} memo;

static const ref_array *eval(memo *m, const eng_node *n);

/* The override of n from m's options, or NULL. */
static const double *override_of(const memo *m, const eng_node *n)
{
	for (int i = 0; i < m->opts->nover; i++)
		if (m->opts->over[i].node == n)
			return m->opts->over[i].vals;
	return NULL;
}

static bool eval_node(memo *m, const eng_node *n, ref_array *o)
{
	const ref_array *s[3] = {NULL, NULL, NULL};
	bool exact = m->opts->f64;
	const double *ov = override_of(m, n);
	if (ov) {
		for (int64_t k = 0; k < o->numel; k++) {
			if (o->f)
				o->f[k] = round_to(exact, o->dtype, ov[k]);
			else
				o->i[k] = o->dtype == ENG_BOOL ? ov[k] != 0
							       : float_to_int(o->dtype, ov[k]);
		}
		return true;
	}
	for (int i = 0; i < n->nsrc; i++)
		if (!(s[i] = eval(m, n->src[i])))
			return false;
	switch (n->op) {
	case ENG_OP_BUFFER:
	case ENG_OP_CONST:
	case ENG_OP_INDEX:
		return eval_leaf(exact, n, o);
	case ENG_OP_WHERE:
		for (int64_t k = 0; k < o->numel; k++)
			copy_elem(s[0]->i[k] ? s[1] : s[2], k, o, k);
		return true;
	case ENG_OP_CONTIGUOUS:
	case ENG_OP_DETACH:
	case ENG_OP_COPY:
	case ENG_OP_ASSIGN: {
		const ref_array *v = n->op == ENG_OP_ASSIGN ? s[1] : s[0];
		if (v->numel != o->numel)
			return false;
		for (int64_t k = 0; k < o->numel; k++)
			copy_elem(v, k, o, k);
		return true;
	}
	default:
		break;
	}
	switch (eng_op_kind_of(n->op)) {
	case ENG_KIND_UNARY:
		return eval_unary(exact, n, s[0], o);
	case ENG_KIND_BINARY:
		return eval_binary(exact, n, s[0], s[1], o);
	case ENG_KIND_REDUCE:
		return eval_reduce(exact, n, s[0], o);
	case ENG_KIND_MOVEMENT:
		return eval_movement(n, s[0], o);
	default:
		return false;
	}
}

/* The value of n, computed once per ref_eval call (shared subgraphs are looked up). */
static const ref_array *eval(memo *m, const eng_node *n)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->e[i].node == n)
			return m->e[i].val;
	ref_array *o = malloc(sizeof(*o));
	if (!o)
		return NULL;
	if (!arr_init(o, n->dtype, n->ndim, n->shape) || !eval_node(m, n, o)) {
		fprintf(stderr, "ref_eval: cannot evaluate %s %s node %%%u\n", eng_op_name(n->op),
			eng_dtype_name(n->dtype), n->id);
		ref_free(o);
		free(o);
		return NULL;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		memo_entry *e = realloc(m->e, cap * sizeof(*e));
		if (!e) {
			ref_free(o);
			free(o);
			return NULL;
		}
		m->e = e;
		m->cap = cap;
	}
	m->e[m->n].node = n;
	m->e[m->n].val = o;
	m->n++;
	return o;
}

bool ref_eval_opts(const eng_node *n, const ref_opts *opts, ref_array *out)
{
	static const ref_opts plain = {.f64 = false, .over = NULL, .nover = 0};
	memo m = {NULL, 0, 0, opts ? opts : &plain};
	const ref_array *r = eval(&m, n);
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < m.n; i++) {
		if (m.e[i].val == r)
			*out = *m.e[i].val; /* hand the root's arrays to the caller */
		else
			ref_free(m.e[i].val);
		free(m.e[i].val);
	}
	free(m.e);
	return r != NULL;
}

bool ref_eval(const eng_node *n, ref_array *out)
{
	return ref_eval_opts(n, NULL, out);
}

bool ref_tensor(const eng_tensor *t, ref_array *out)
{
	if (!t) {
		memset(out, 0, sizeof(*out));
		return false;
	}
	return ref_eval(eng_tensor_node(t), out);
}

/* ---- comparison ---- */

static void fmt_index(const ref_array *a, int64_t k, char *buf, size_t len)
{
	int64_t idx[ENG_MAX_DIMS];
	size_t p = 0;
	unravel(k, a->ndim, a->shape, idx);
	p += (size_t)snprintf(buf + p, len - p, "[");
	for (int d = 0; d < a->ndim && p < len; d++)
		p += (size_t)snprintf(buf + p, len - p, "%s%lld", d ? "," : "", (long long)idx[d]);
	if (p < len)
		snprintf(buf + p, len - p, "]");
}

static bool float_close(double g, double w, double rtol, double atol)
{
	if (isnan(w) || isnan(g))
		return isnan(w) && isnan(g);
	if (isinf(w) || isinf(g))
		return g == w;
	return fabs(g - w) <= atol + rtol * fabs(w);
}

bool ref_match(const ref_array *got, const ref_array *want, double rtol, double atol, char *msg,
	       size_t len)
{
	bool same = got->ndim == want->ndim && got->dtype == want->dtype;
	for (int d = 0; same && d < got->ndim; d++)
		same = got->shape[d] == want->shape[d];
	if (!same) {
		snprintf(msg, len,
			 "shape or dtype differs: got %s with %d dims, want %s with %d dims",
			 eng_dtype_name(got->dtype), got->ndim, eng_dtype_name(want->dtype),
			 want->ndim);
		return false;
	}
	for (int64_t k = 0; k < want->numel; k++) {
		bool ok = want->f ? float_close(got->f[k], want->f[k], rtol, atol)
				  : got->i[k] == want->i[k];
		if (ok)
			continue;
		char where[128];
		fmt_index(want, k, where, sizeof(where));
		if (want->f)
			snprintf(msg, len, "%s at flat %lld %s: got %.9g, want %.9g",
				 eng_dtype_name(want->dtype), (long long)k, where, got->f[k],
				 want->f[k]);
		else
			snprintf(msg, len, "%s at flat %lld %s: got %lld, want %lld",
				 eng_dtype_name(want->dtype), (long long)k, where,
				 (long long)got->i[k], (long long)want->i[k]);
		return false;
	}
	return true;
}

bool ref_compare_n(eng_tensor *const *ts, int n, double rtol, double atol, char *msg, size_t len)
{
	ref_array *want = calloc(n > 0 ? (size_t)n : 1, sizeof(*want));
	bool ok = want != NULL;
	if (!ok)
		snprintf(msg, len, "out of memory");
	for (int i = 0; ok && i < n; i++) {
		if (!ts[i]) {
			snprintf(msg, len, "tensor %d is NULL", i);
			ok = false;
		} else if (!ref_tensor(ts[i], &want[i])) {
			snprintf(msg, len, "tensor %d: the reference cannot evaluate its graph", i);
			ok = false;
		}
	}
	if (ok && n > 0 && eng_realize(ts, n) != ENG_OK) {
		eng_ctx *ctx = eng_tensor_ctx(ts[0]);
		snprintf(msg, len, "realize failed: %s: %s", eng_strerror(eng_error(ctx)),
			 eng_errmsg(ctx));
		ok = false;
	}
	for (int i = 0; ok && i < n; i++) {
		size_t nbytes = (size_t)eng_numel(ts[i]) * eng_dtype_size(eng_tensor_dtype(ts[i]));
		void *raw = malloc(nbytes ? nbytes : 1);
		ref_array got = {0};
		char sub[768];
		if (!raw) {
			snprintf(msg, len, "out of memory");
			ok = false;
		} else if (eng_tensor_read(ts[i], raw, nbytes) != ENG_OK) {
			eng_ctx *ctx = eng_tensor_ctx(ts[i]);
			snprintf(msg, len, "tensor %d: read failed: %s", i, eng_errmsg(ctx));
			ok = false;
		} else if (!ref_decode(eng_tensor_dtype(ts[i]), eng_ndim(ts[i]), eng_shape(ts[i]),
				       raw, &got)) {
			snprintf(msg, len, "out of memory");
			ok = false;
		} else if (!ref_match(&got, &want[i], rtol, atol, sub, sizeof(sub))) {
			snprintf(msg, len, "tensor %d of %d: %s", i, n, sub);
			ok = false;
		}
		ref_free(&got);
		free(raw);
	}
	for (int i = 0; want && i < n; i++)
		ref_free(&want[i]);
	free(want);
	return ok;
}

bool ref_compare(eng_tensor *t, double rtol, double atol, char *msg, size_t len)
{
	return ref_compare_n(&t, 1, rtol, atol, msg, len);
}
