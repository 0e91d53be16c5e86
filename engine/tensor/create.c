/* create.c: tensors from nothing: constants (full, zeros, ones, scalars), buffers (empty,
 * from host data), index ramps (index, arange, eye) and seeded counter-based rand/randn. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "tensor.h"

eng_tensor *eng_full(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, double value)
{
	if (!eng_dtype_valid(dt)) {
		eng_set_error(ctx, ENG_EDTYPE, "full: invalid dtype %d", (int)dt);
		return NULL;
	}
	if (!eng_build_check_shape(ctx, "full", ndim, shape))
		return NULL;
	return eng_tensor_wrap(ctx, eng_build_const(ctx, dt, ndim, shape, eng_build_scalar(dt, value)));
}

eng_tensor *eng_zeros(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape)
{
	return eng_full(ctx, dt, ndim, shape, 0);
}

eng_tensor *eng_ones(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape)
{
	return eng_full(ctx, dt, ndim, shape, 1);
}

eng_tensor *eng_scalar(eng_ctx *ctx, eng_dtype dt, double value) { return eng_full(ctx, dt, 0, NULL, value); }

eng_tensor *eng_full_like(const eng_tensor *t, double value)
{
	return t ? eng_full(t->ctx, t->node->dtype, t->node->ndim, t->node->shape, value) : NULL;
}

/* dt and shape valid for fn, and the element count; false with the error set. */
static bool check_buffer_args(eng_ctx *ctx, const char *fn, eng_dtype dt, int ndim, const int64_t *shape,
			      int64_t *numel)
{
	if (!eng_dtype_valid(dt)) {
		eng_set_error(ctx, ENG_EDTYPE, "%s: invalid dtype %d", fn, (int)dt);
		return false;
	}
	return eng_build_check_shape(ctx, fn, ndim, shape) && eng_shape_numel(ndim, shape, numel);
}

/* A tensor for buffer b (its reference is taken over: the node holds it, or on ENOMEM it goes). */
static eng_tensor *buffer_tensor(eng_ctx *ctx, eng_buffer *b, int ndim, const int64_t *shape)
{
	eng_node_desc d = {.op = ENG_OP_BUFFER, .dtype = b->dtype, .ndim = ndim, .shape = shape, .buf = b,
			   .c = {.i = b->version}};
	eng_node *n = eng_build_node(ctx, &d);
	eng_buffer_unref(b);
	return eng_tensor_wrap(ctx, n);
}

static eng_tensor *new_buffer(eng_ctx *ctx, const char *fn, eng_dtype dt, int ndim, const int64_t *shape)
{
	int64_t numel;
	if (!check_buffer_args(ctx, fn, dt, ndim, shape, &numel))
		return NULL;
	eng_buffer *b = eng_buffer_alloc(ctx->devs[ctx->default_dev], dt, numel);
	return b ? buffer_tensor(ctx, b, ndim, shape) : NULL;
}

eng_tensor *eng_empty(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape)
{
	return new_buffer(ctx, "empty", dt, ndim, shape);
}

eng_tensor *eng_from_data(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, const void *data)
{
	eng_tensor *t = new_buffer(ctx, "from_data", dt, ndim, shape);
	if (!t)
		return NULL;
	size_t nbytes = t->node->buf->nbytes;
	if (nbytes && !data) {
		eng_tensor_free(t);
		eng_set_error(ctx, ENG_EINVAL, "from_data: data is NULL");
		return NULL;
	}
	if (nbytes && eng_buffer_write(t->node->buf, data, nbytes)) {
		eng_tensor_free(t);
		return NULL;
	}
	return t;
}

eng_tensor *eng_from_host(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes,
			  void (*release)(void *release_arg, void *data), void *release_arg)
{
	static const char fn[] = "from_host";
	int64_t numel;
	if (!check_buffer_args(ctx, fn, dt, ndim, shape, &numel))
		return NULL;
	size_t want = (size_t)numel * eng_dtype_size(dt);
	if (nbytes != want || (want && !data)) {
		eng_set_error(ctx, ENG_EINVAL, "%s: %zu bytes at %p given, the tensor needs %zu", fn, nbytes, data, want);
		return NULL;
	}
	eng_device *dev = ctx->devs[ctx->default_dev];
	eng_buffer *b = eng_buffer_wrap(dev, dt, numel, data, release, release_arg);
	if (!b && ctx->err)
		return NULL;
	if (!b) { /* the device cannot use host memory: one upload, then the memory is the caller's */
		eng_tensor *t = eng_from_data(ctx, dt, ndim, shape, data);
		if (t && release)
			release(release_arg, data);
		return t;
	}
	return buffer_tensor(ctx, b, ndim, shape);
}

eng_tensor *eng_index(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, int axis)
{
	if (!eng_build_check_shape(ctx, "index", ndim, shape))
		return NULL;
	if (axis < 0)
		axis += ndim;
	if (axis < 0 || axis >= ndim) {
		eng_set_error(ctx, ENG_EAXIS, "index: axis out of range for %d dims", ndim);
		return NULL;
	}
	if (!eng_dtype_valid(dt) || dt == ENG_BOOL) {
		eng_set_error(ctx, ENG_EDTYPE, "index: dtype must be numeric");
		return NULL;
	}
	eng_node_desc d = {.op = ENG_OP_INDEX, .dtype = dt, .ndim = ndim, .shape = shape, .axis = axis};
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
}

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
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
}

/* splitmix64 of (seed, counter + flat index), built from int64 ops (wrapping); logical shifts
 * are arithmetic shifts masked to the low bits. Returns 24 random bits in [0, 2^24). The stream's
 * base is read from a one-element buffer (eng_rng_take): the kernel is the same for every call.
 * Call inside a scope: intermediates are left to it. */
static eng_tensor *rand_bits(eng_ctx *ctx, int ndim, const int64_t *shape, int64_t numel)
{
	int64_t take = numel > 0 ? numel : 1; /* what a replay takes again: never 0 (not a stream) */
	int64_t base = (int64_t)eng_rng_take(ctx, take);
	eng_tensor *b = eng_from_data(ctx, ENG_I64, 0, NULL, &base);
	if (!b)
		return NULL;
	b->node->buf->rng_numel = take;
	eng_tensor *x = eng_reshape(eng_index(ctx, ENG_I64, 1, &numel, 0), ndim, shape);
#define I64C(v) mk_i64(ctx, (int64_t)(uint64_t)(v))
	eng_tensor *z = eng_add(x, b);
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
