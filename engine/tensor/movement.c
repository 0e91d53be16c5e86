/* tensor_move.c: movement ops, reductions and buffer-level ops of the Tensor API: validated
 * graph nodes, with chains of the same movement folded into one node and constants kept flat. */
#include <math.h>
#include <string.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

static eng_node *node_get(eng_ctx *ctx, const eng_node_desc *d) { return eng_node_get(ctx->graph, d); }
static eng_tensor *wrap_ref(eng_ctx *ctx, eng_node *n) { return eng_tensor_wrap(ctx, eng_node_ref(n)); }

static bool same_shape(const eng_node *n, int ndim, const int64_t *shape)
{
	return n->ndim == ndim && !memcmp(n->shape, shape, sizeof(int64_t) * ndim);
}

/* A movement op on a constant (other than pad) is the constant in the new shape. */
static eng_tensor *const_moved(eng_ctx *ctx, const eng_node *c, int ndim, const int64_t *shape)
{
	eng_node_desc d = {.op = ENG_OP_CONST, .dtype = c->dtype, .ndim = ndim, .shape = shape, .c = c->arg.c};
	return eng_tensor_wrap(ctx, node_get(ctx, &d));
}

eng_tensor *eng_reshape(const eng_tensor *a, int ndim, const int64_t *shape_in)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	int64_t shape[ENG_MAX_DIMS];
	if (ndim < 0 || ndim > ENG_MAX_DIMS || (ndim && !shape_in)) {
		eng_set_error(ctx, ENG_ERANGE, "reshape: bad number of dimensions %d", ndim);
		return NULL;
	}
	int infer = -1;
	int64_t known = 1, numel = eng_node_numel(a->node);
	for (int i = 0; i < ndim; i++) {
		shape[i] = shape_in[i];
		if (shape[i] == -1) {
			if (infer >= 0) {
				eng_set_error(ctx, ENG_ESHAPE, "reshape: more than one -1");
				return NULL;
			}
			infer = i;
			continue;
		}
		if (shape[i] < 0) {
			eng_set_error(ctx, ENG_ESHAPE, "reshape: negative dimension %lld", (long long)shape[i]);
			return NULL;
		}
		if (shape[i] && known > ((int64_t)1 << 40) / shape[i]) {
			eng_set_error(ctx, ENG_ERANGE, "reshape: shape has too many elements");
			return NULL;
		}
		known *= shape[i];
	}
	if (infer >= 0) {
		if (known == 0 || numel % known) {
			eng_set_error(ctx, ENG_ESHAPE, "reshape: cannot infer -1 for %lld elements",
				      (long long)numel);
			return NULL;
		}
		shape[infer] = numel / known;
		known = numel;
	}
	if (known != numel) {
		eng_set_error(ctx, ENG_ESHAPE, "reshape: %lld elements cannot take a shape of %lld",
			      (long long)numel, (long long)known);
		return NULL;
	}
	const eng_node *src = a->node;
	if (same_shape(src, ndim, shape))
		return wrap_ref(ctx, a->node);
	if (src->op == ENG_OP_CONST)
		return const_moved(ctx, src, ndim, shape);
	if (src->op == ENG_OP_RESHAPE) /* reshape of a reshape: one reshape of the origin */
		src = src->src[0];
	if (same_shape(src, ndim, shape))
		return wrap_ref(ctx, (eng_node *)src);
	eng_node_desc d = {.op = ENG_OP_RESHAPE, .dtype = src->dtype, .ndim = ndim, .shape = shape,
			   .src = {(eng_node *)src}};
	return eng_tensor_wrap(ctx, node_get(ctx, &d));
}

eng_tensor *eng_permute(const eng_tensor *a, const int *perm)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *src = a->node;
	int n = src->ndim;
	int8_t p[ENG_MAX_DIMS];
	int64_t shape[ENG_MAX_DIMS];
	uint32_t seen = 0;
	bool ident = true;
	if (n && !perm) {
		eng_set_error(ctx, ENG_EINVAL, "permute: perm is NULL");
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		int ax = perm[i] < 0 ? perm[i] + n : perm[i];
		if (ax < 0 || ax >= n || (seen & (1u << ax))) {
			eng_set_error(ctx, ENG_EAXIS, "permute: entry %d (%d) is not a permutation of %d axes",
				      i, perm[i], n);
			return NULL;
		}
		seen |= 1u << ax;
		p[i] = (int8_t)ax;
		shape[i] = src->shape[ax];
		ident &= ax == i;
	}
	if (ident)
		return wrap_ref(ctx, a->node);
	if (src->op == ENG_OP_CONST)
		return const_moved(ctx, src, n, shape);
	if (src->op == ENG_OP_PERMUTE) { /* compose */
		int8_t q[ENG_MAX_DIMS];
		bool id2 = true;
		for (int i = 0; i < n; i++) {
			q[i] = src->arg.perm[p[i]];
			id2 &= q[i] == i;
		}
		src = src->src[0];
		if (id2)
			return wrap_ref(ctx, (eng_node *)src);
		memcpy(p, q, sizeof(q));
	}
	eng_node_desc d = {.op = ENG_OP_PERMUTE, .dtype = src->dtype, .ndim = n, .shape = shape,
			   .src = {(eng_node *)src}, .perm = p};
	return eng_tensor_wrap(ctx, node_get(ctx, &d));
}

eng_tensor *eng_expand(const eng_tensor *a, int ndim, const int64_t *shape_in)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *src = a->node;
	int64_t shape[ENG_MAX_DIMS];
	if (ndim < src->ndim || ndim > ENG_MAX_DIMS || (ndim && !shape_in)) {
		eng_set_error(ctx, ENG_ESHAPE, "expand: cannot expand %d dims to %d", src->ndim, ndim);
		return NULL;
	}
	int pad = ndim - src->ndim;
	for (int i = 0; i < ndim; i++) {
		int64_t s = i < pad ? 1 : src->shape[i - pad];
		shape[i] = shape_in[i] == -1 ? s : shape_in[i];
		if (shape[i] < 0 || (s != shape[i] && s != 1)) {
			eng_set_error(ctx, ENG_ESHAPE, "expand: dimension %d of size %lld cannot become %lld",
				      i, (long long)s, (long long)shape_in[i]);
			return NULL;
		}
	}
	int64_t numel;
	if (!eng_shape_numel(ndim, shape, &numel)) {
		eng_set_error(ctx, ENG_ERANGE, "expand: shape has too many elements");
		return NULL;
	}
	if (same_shape(src, ndim, shape))
		return wrap_ref(ctx, a->node);
	if (src->op == ENG_OP_CONST)
		return const_moved(ctx, src, ndim, shape);
	eng_tensor *base = NULL;
	if (pad) { /* expand works on equal ranks: prepend ones first */
		int64_t tmp[ENG_MAX_DIMS];
		for (int i = 0; i < ndim; i++)
			tmp[i] = i < pad ? 1 : src->shape[i - pad];
		base = eng_reshape(a, ndim, tmp);
		if (!base)
			return NULL;
		src = base->node;
	}
	if (src->op == ENG_OP_EXPAND)
		src = src->src[0];
	eng_node_desc d = {.op = ENG_OP_EXPAND, .dtype = src->dtype, .ndim = ndim, .shape = shape,
			   .src = {(eng_node *)src}};
	eng_tensor *r = eng_tensor_wrap(ctx, node_get(ctx, &d));
	eng_tensor_free(base);
	return r;
}

eng_tensor *eng_pad(const eng_tensor *a, const int64_t (*pads)[2])
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *src = a->node;
	int64_t shape[ENG_MAX_DIMS] = {0};
	bool any = false;
	if (src->ndim && !pads) {
		eng_set_error(ctx, ENG_EINVAL, "pad: pads is NULL");
		return NULL;
	}
	for (int i = 0; i < src->ndim; i++) {
		if (pads[i][0] < 0 || pads[i][1] < 0 || pads[i][0] > ((int64_t)1 << 40) ||
		    pads[i][1] > ((int64_t)1 << 40)) {
			eng_set_error(ctx, ENG_ERANGE, "pad: axis %d: padding (%lld, %lld) out of range", i,
				      (long long)pads[i][0], (long long)pads[i][1]);
			return NULL;
		}
		shape[i] = src->shape[i] + pads[i][0] + pads[i][1];
		any |= pads[i][0] || pads[i][1];
	}
	int64_t numel;
	if (!eng_shape_numel(src->ndim, shape, &numel)) {
		eng_set_error(ctx, ENG_ERANGE, "pad: result has too many elements");
		return NULL;
	}
	if (!any)
		return wrap_ref(ctx, a->node);
	eng_node_desc d = {.op = ENG_OP_PAD, .dtype = src->dtype, .ndim = src->ndim, .shape = shape,
			   .src = {(eng_node *)src}, .pairs = pads};
	return eng_tensor_wrap(ctx, node_get(ctx, &d));
}

eng_tensor *eng_shrink(const eng_tensor *a, const int64_t (*ranges)[2])
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *src = a->node;
	int64_t shape[ENG_MAX_DIMS], r[ENG_MAX_DIMS][2];
	bool any = false;
	if (src->ndim && !ranges) {
		eng_set_error(ctx, ENG_EINVAL, "shrink: ranges is NULL");
		return NULL;
	}
	for (int i = 0; i < src->ndim; i++) {
		r[i][0] = ranges[i][0];
		r[i][1] = ranges[i][1];
		if (r[i][0] < 0 || r[i][1] < r[i][0] || r[i][1] > src->shape[i]) {
			eng_set_error(ctx, ENG_ESHAPE, "shrink: axis %d: range [%lld, %lld) not within [0, %lld)",
				      i, (long long)r[i][0], (long long)r[i][1], (long long)src->shape[i]);
			return NULL;
		}
		shape[i] = r[i][1] - r[i][0];
		any |= shape[i] != src->shape[i];
	}
	if (!any)
		return wrap_ref(ctx, a->node);
	if (src->op == ENG_OP_CONST)
		return const_moved(ctx, src, src->ndim, shape);
	if (src->op == ENG_OP_SHRINK) { /* compose */
		for (int i = 0; i < src->ndim; i++) {
			r[i][0] += src->arg.pairs[i][0];
			r[i][1] += src->arg.pairs[i][0];
		}
		src = src->src[0];
	}
	eng_node_desc d = {.op = ENG_OP_SHRINK, .dtype = src->dtype, .ndim = src->ndim, .shape = shape,
			   .src = {(eng_node *)src}, .pairs = (const int64_t(*)[2])r};
	return eng_tensor_wrap(ctx, node_get(ctx, &d));
}

/* Normalise an axis list into a bit mask; naxes == 0 means all axes. */
static bool axes_mask(eng_ctx *ctx, const char *fn, int ndim, const int *axes, int naxes, uint32_t *mask)
{
	*mask = 0;
	if (naxes == 0) {
		*mask = ndim ? (1u << ndim) - 1 : 0;
		return true;
	}
	if (naxes < 0 || !axes) {
		eng_set_error(ctx, ENG_EINVAL, "%s: bad axis list", fn);
		return false;
	}
	for (int i = 0; i < naxes; i++) {
		int ax = axes[i] < 0 ? axes[i] + ndim : axes[i];
		if (ax < 0 || ax >= ndim) {
			eng_set_error(ctx, ENG_EAXIS, "%s: axis %d out of range for %d dims", fn, axes[i], ndim);
			return false;
		}
		*mask |= 1u << ax;
	}
	return true;
}

eng_tensor *eng_flip(const eng_tensor *a, const int *axes, int naxes)
{
	if (!a)
		return NULL;
	uint32_t mask;
	if (!axes_mask(a->ctx, "flip", a->node->ndim, axes, naxes, &mask))
		return NULL;
	for (int i = 0; i < a->node->ndim; i++)
		if (a->node->shape[i] <= 1)
			mask &= ~(1u << i);
	if (!mask)
		return wrap_ref(a->ctx, a->node);
	if (a->node->op == ENG_OP_CONST)
		return wrap_ref(a->ctx, a->node);
	eng_node_desc d = {.op = ENG_OP_FLIP, .dtype = a->node->dtype, .ndim = a->node->ndim,
			   .shape = a->node->shape, .src = {a->node}, .axes = mask};
	return eng_tensor_wrap(a->ctx, node_get(a->ctx, &d));
}

static eng_tensor *reduce(const eng_tensor *a, eng_op op, const int *axes, int naxes, bool keepdim)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *src = a->node;
	uint32_t mask;
	const char *fn = op == ENG_OP_RSUM ? "sum" : op == ENG_OP_RMAX ? "max" : "prod";
	if (!axes_mask(ctx, fn, src->ndim, axes, naxes, &mask))
		return NULL;
	int64_t shape[ENG_MAX_DIMS], kshape[ENG_MAX_DIMS];
	int kn = 0;
	for (int i = 0; i < src->ndim; i++) {
		shape[i] = (mask >> i) & 1 ? 1 : src->shape[i];
		if (!((mask >> i) & 1))
			kshape[kn++] = src->shape[i];
	}
	eng_tensor *r;
	if (!mask) {
		r = wrap_ref(ctx, a->node);
	} else {
		eng_node_desc d = {.op = op, .dtype = src->dtype, .ndim = src->ndim, .shape = shape,
				   .src = {(eng_node *)src}, .axes = mask};
		r = eng_tensor_wrap(ctx, node_get(ctx, &d));
	}
	if (keepdim || !r)
		return r;
	eng_tensor *k = eng_reshape(r, kn, kshape);
	eng_tensor_free(r);
	return k;
}

eng_tensor *eng_sum(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	if (!a)
		return NULL;
	/* sums of bool and uint8 count in int32, like other frameworks widen them */
	if (a->node->dtype == ENG_BOOL || a->node->dtype == ENG_U8) {
		eng_scope_begin(a->ctx);
		eng_tensor *r = eng_keep(reduce(eng_cast(a, ENG_I32), ENG_OP_RSUM, axes, naxes, keepdim));
		eng_scope_end(a->ctx);
		return r;
	}
	return reduce(a, ENG_OP_RSUM, axes, naxes, keepdim);
}

eng_tensor *eng_max(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	return reduce(a, ENG_OP_RMAX, axes, naxes, keepdim);
}

eng_tensor *eng_prod(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	return reduce(a, ENG_OP_RPROD, axes, naxes, keepdim);
}

eng_tensor *eng_contiguous(const eng_tensor *a)
{
	if (!a)
		return NULL;
	if (a->node->op == ENG_OP_BUFFER || a->node->op == ENG_OP_CONTIGUOUS)
		return wrap_ref(a->ctx, a->node);
	eng_node_desc d = {.op = ENG_OP_CONTIGUOUS, .dtype = a->node->dtype, .ndim = a->node->ndim,
			   .shape = a->node->shape, .src = {a->node}};
	return eng_tensor_wrap(a->ctx, node_get(a->ctx, &d));
}

eng_tensor *eng_assign(eng_tensor *target, const eng_tensor *value)
{
	if (!target || !value)
		return NULL;
	eng_ctx *ctx = target->ctx;
	eng_node *t = target->node;
	if (value->node->dtype != t->dtype) {
		eng_set_error(ctx, ENG_EDTYPE, "assign: value is %s, target is %s",
			      eng_dtype_name(value->node->dtype), eng_dtype_name(t->dtype));
		return NULL;
	}
	eng_scope_begin(ctx);
	if (t->op != ENG_OP_BUFFER && t->op != ENG_OP_ASSIGN) {
		/* Graph nodes are shared (equal expressions are one node): writing into one in
		 * place would change every tensor built the same way. Give the target storage of
		 * its own, holding its current value, and write into that. */
		eng_tensor *fresh = eng_empty(ctx, t->dtype, t->ndim, t->shape);
		eng_node *old = fresh ? fresh->node : NULL;
		if (fresh) {
			eng_node_desc d = {.op = ENG_OP_ASSIGN, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
					   .src = {old, t}};
			eng_node *a = eng_node_get(ctx->graph, &d);
			if (a) {
				eng_node_unref(target->node);
				target->node = a;
				t = a;
			}
		}
	}
	eng_tensor *v = eng_expand(value, t->ndim, t->shape);
	eng_node *n = NULL;
	if (v) {
		eng_node_desc d = {.op = ENG_OP_ASSIGN, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
				   .src = {t, v->node}};
		n = node_get(ctx, &d);
		if (!n)
			eng_set_error(ctx, ENG_ENOMEM, "assign: out of memory");
	}
	eng_scope_end(ctx);
	if (!n)
		return NULL;
	eng_node_unref(target->node);
	target->node = n;
	return target;
}

/* ---- creation built on INDEX ---- */

eng_tensor *eng_arange(eng_ctx *ctx, eng_dtype dt, double start, double stop, double step)
{
	if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step)) {
		eng_set_error(ctx, ENG_EINVAL, "arange: step must be non-zero and bounds finite");
		return NULL;
	}
	double cnt = ceil((stop - start) / step);
	if (cnt < 0)
		cnt = 0;
	if (cnt > (double)((int64_t)1 << 40)) {
		eng_set_error(ctx, ENG_ERANGE, "arange: too many elements");
		return NULL;
	}
	int64_t n = (int64_t)cnt;
	eng_scope_begin(ctx);
	eng_dtype idt = eng_dtype_is_float(dt) ? ENG_F32 : (dt == ENG_I64 ? ENG_I64 : ENG_I32);
	eng_tensor *i = eng_index(ctx, idt, 1, &n, 0);
	eng_tensor *r = eng_cast(eng_add_s(eng_mul_s(i, step), start), dt);
	eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_eye(eng_ctx *ctx, eng_dtype dt, int64_t n)
{
	if (n < 0 || n > ((int64_t)1 << 20)) {
		eng_set_error(ctx, ENG_ERANGE, "eye: size %lld out of range", (long long)n);
		return NULL;
	}
	int64_t shape[2] = {n, n};
	eng_scope_begin(ctx);
	eng_tensor *r = eng_cast(eng_eq(eng_index(ctx, ENG_I32, 2, shape, 0), eng_index(ctx, ENG_I32, 2, shape, 1)), dt);
	eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

static eng_tensor *mk_i64(eng_ctx *ctx, int64_t v)
{
	eng_node_desc d = {.op = ENG_OP_CONST, .dtype = ENG_I64, .ndim = 0, .shape = NULL, .c = {.i = v}};
	return eng_tensor_wrap(ctx, node_get(ctx, &d));
}

/* splitmix64 of (seed, counter + flat index), built from int64 ops (wrapping); logical shifts
 * are arithmetic shifts masked to the low bits. Returns 24 random bits in [0, 2^24). Call
 * inside a scope: intermediates are left to it. */
static eng_tensor *rand_bits(eng_ctx *ctx, int ndim, const int64_t *shape, int64_t numel)
{
	uint64_t base = ctx->seed * 0x9e3779b97f4a7c15ull + ctx->rng_counter;
	ctx->rng_counter += (uint64_t)numel;
	eng_tensor *x = eng_reshape(eng_index(ctx, ENG_I64, 1, &numel, 0), ndim, shape);
#define I64C(v) mk_i64(ctx, (int64_t)(uint64_t)(v))
	eng_tensor *z = eng_add(x, I64C(base + 0x9e3779b97f4a7c15ull));
	z = eng_mul(eng_xor(z, eng_and(eng_shr(z, I64C(30)), I64C((1ull << 34) - 1))), I64C(0xbf58476d1ce4e5b9ull));
	z = eng_mul(eng_xor(z, eng_and(eng_shr(z, I64C(27)), I64C((1ull << 37) - 1))), I64C(0x94d049bb133111ebull));
	z = eng_xor(z, eng_and(eng_shr(z, I64C(31)), I64C((1ull << 33) - 1)));
	return eng_and(eng_shr(z, I64C(40)), I64C((1ull << 24) - 1));
#undef I64C
}

static bool rand_args(eng_ctx *ctx, const char *fn, eng_dtype dt, int ndim, const int64_t *shape, int64_t *numel)
{
	if (!eng_dtype_is_float(dt)) {
		eng_set_error(ctx, ENG_EDTYPE, "%s: dtype must be float16 or float32", fn);
		return false;
	}
	if (ndim < 0 || ndim > ENG_MAX_DIMS || (ndim && !shape) || !eng_shape_numel(ndim, shape, numel)) {
		eng_set_error(ctx, ENG_ESHAPE, "%s: invalid shape", fn);
		return false;
	}
	return true;
}

eng_tensor *eng_rand(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape)
{
	int64_t numel;
	if (!rand_args(ctx, "rand", dt, ndim, shape, &numel))
		return NULL;
	eng_scope_begin(ctx);
	eng_tensor *u = eng_mul_s(eng_cast(rand_bits(ctx, ndim, shape, numel), ENG_F32), 1.0 / 16777216.0);
	eng_tensor *r = eng_keep(eng_cast(u, dt));
	eng_scope_end(ctx);
	return r;
}

/* Box-Muller on two independent uniforms. */
eng_tensor *eng_randn(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape)
{
	int64_t numel;
	if (!rand_args(ctx, "randn", dt, ndim, shape, &numel))
		return NULL;
	eng_scope_begin(ctx);
	eng_tensor *u1 = eng_mul_s(eng_cast(rand_bits(ctx, ndim, shape, numel), ENG_F32), 1.0 / 16777216.0);
	eng_tensor *u2 = eng_mul_s(eng_cast(rand_bits(ctx, ndim, shape, numel), ENG_F32), 1.0 / 16777216.0);
	eng_tensor *rad = eng_sqrt(eng_mul_s(eng_log(eng_rsub_s(1.0, u1)), -2.0));
	eng_tensor *r = eng_mul(rad, eng_cos(eng_mul_s(u2, 2.0 * M_PI)));
	r = eng_keep(eng_cast(r, dt));
	eng_scope_end(ctx);
	return r;
}

/* ---- devices ---- */

int eng_tensor_device(const eng_tensor *t)
{
	if (!t)
		return -1;
	return t->node->dev >= 0 ? t->node->dev : t->ctx->default_dev;
}

eng_tensor *eng_to_device(const eng_tensor *t, int dev)
{
	if (!t)
		return NULL;
	eng_ctx *ctx = t->ctx;
	if (dev < 0 || dev >= ctx->ndevs) {
		eng_set_error(ctx, ENG_EINVAL, "to_device: no device %d (%d open)", dev, ctx->ndevs);
		return NULL;
	}
	eng_node *n = t->node;
	if (n->dev == dev || n->dev < 0) /* there already; constants go wherever they are used */
		return eng_tensor_wrap(ctx, eng_node_ref(n));
	eng_node_desc d = {.op = ENG_OP_COPY, .dtype = n->dtype, .ndim = n->ndim, .shape = n->shape, .src = {n},
			   .dev = dev};
	return eng_tensor_wrap(ctx, eng_node_get(ctx->graph, &d));
}
