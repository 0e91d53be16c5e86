/* build.c: what every Tensor-API builder uses: the node lookup that rejects operands on two
 * devices, shape and axis validation, scalars in a dtype's representation, constants. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "tensor.h"

/* The node for d; sources living on different devices are an error (copy one first). */
eng_node *eng_build_node(eng_ctx *ctx, const eng_node_desc *d)
{
	int dev = -1;
	for (int i = 0; i < 3 && d->src[i]; i++) {
		int sd = d->src[i]->dev;
		if (sd >= 0 && dev >= 0 && sd != dev) {
			eng_set_error(ctx, ENG_EDEVICE, "%s: operands on different devices (%s and %s); move one with eng_to_device",
				      eng_op_name(d->op), ctx->devs[dev]->name, ctx->devs[sd]->name);
			return NULL;
		}
		if (sd >= 0)
			dev = sd;
	}
	return eng_node_get(ctx->graph, d);
}

/* Wrap a node we already hold a reference to as a new tensor. */
eng_tensor *eng_build_ref(eng_ctx *ctx, eng_node *n) { return eng_tensor_wrap(ctx, eng_node_ref(n)); }

bool eng_build_check_shape(eng_ctx *ctx, const char *fn, int ndim, const int64_t *shape)
{
	int64_t numel;
	if (ndim < 0 || ndim > ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "%s: %d dimensions (at most %d)", fn, ndim, ENG_MAX_DIMS);
		return false;
	}
	if (ndim && !shape) {
		eng_set_error(ctx, ENG_EINVAL, "%s: shape is NULL", fn);
		return false;
	}
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0) {
			eng_set_error(ctx, ENG_ESHAPE, "%s: dimension %d is negative (%lld)", fn, i,
				      (long long)shape[i]);
			return false;
		}
	}
	if (!eng_shape_numel(ndim, shape, &numel)) {
		eng_set_error(ctx, ENG_ERANGE, "%s: shape has too many elements (limit 2^40)", fn);
		return false;
	}
	return true;
}

/* Convert a double to the scalar representation of dtype dt (integers wrap, bool is != 0). */
/* Saturating double -> int64 (NaN -> 0), so out-of-range scalars are never undefined. */
static int64_t sat_i64(double v)
{
	if (v != v)
		return 0;
	if (v >= 9223372036854775807.0)
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

eng_const_value eng_build_scalar(eng_dtype dt, double v)
{
	eng_const_value c;
	memset(&c, 0, sizeof(c));
	switch (dt) {
	case ENG_BOOL:
		c.i = v != 0;
		break;
	case ENG_U8:
		c.i = (int64_t)(uint8_t)(uint64_t)sat_i64(v);
		break;
	case ENG_I32:
		c.i = (int64_t)(int32_t)(uint32_t)(uint64_t)sat_i64(v);
		break;
	case ENG_I64:
		c.i = sat_i64(v);
		break;
	case ENG_F16:
		c.f = eng_f16_round(v);
		break;
	default:
		c.f = (double)(float)v;
		break;
	}
	return c;
}

eng_node *eng_build_const(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, eng_const_value c)
{
	eng_node_desc d = {.op = ENG_OP_CONST, .dtype = dt, .ndim = ndim, .shape = shape, .c = c};
	return eng_build_node(ctx, &d);
}

/* Normalise an axis list into a bit mask; naxes == 0 means all axes. */
bool eng_build_axes_mask(eng_ctx *ctx, const char *fn, int ndim, const int *axes, int naxes, uint32_t *mask)
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
