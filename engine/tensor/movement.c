/* movement.c: the Tensor API's movement ops (reshape, permute, expand, pad, shrink, flip) and
 * copies between devices: chains of the same movement fold into one node, constants stay flat. */
#include <math.h>
#include <string.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

static bool same_shape(const eng_node *n, int ndim, const int64_t *shape)
{
	return n->ndim == ndim && !memcmp(n->shape, shape, sizeof(int64_t) * ndim);
}

/* A movement op on a constant (other than pad) is the constant in the new shape. */
static eng_tensor *const_moved(eng_ctx *ctx, const eng_node *c, int ndim, const int64_t *shape)
{
	eng_node_desc d = {.op = ENG_OP_CONST, .dtype = c->dtype, .ndim = ndim, .shape = shape, .c = c->arg.c};
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
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
		return eng_build_ref(ctx, a->node);
	if (src->op == ENG_OP_CONST)
		return const_moved(ctx, src, ndim, shape);
	if (src->op == ENG_OP_RESHAPE) /* reshape of a reshape: one reshape of the origin */
		src = src->src[0];
	if (same_shape(src, ndim, shape))
		return eng_build_ref(ctx, (eng_node *)src);
	eng_node_desc d = {.op = ENG_OP_RESHAPE, .dtype = src->dtype, .ndim = ndim, .shape = shape,
			   .src = {(eng_node *)src}};
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
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
		return eng_build_ref(ctx, a->node);
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
			return eng_build_ref(ctx, (eng_node *)src);
		memcpy(p, q, sizeof(q));
	}
	eng_node_desc d = {.op = ENG_OP_PERMUTE, .dtype = src->dtype, .ndim = n, .shape = shape,
			   .src = {(eng_node *)src}, .perm = p};
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
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
		return eng_build_ref(ctx, a->node);
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
	eng_tensor *r = eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
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
		return eng_build_ref(ctx, a->node);
	eng_node_desc d = {.op = ENG_OP_PAD, .dtype = src->dtype, .ndim = src->ndim, .shape = shape,
			   .src = {(eng_node *)src}, .pairs = pads};
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
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
		return eng_build_ref(ctx, a->node);
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
	return eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
}

eng_tensor *eng_flip(const eng_tensor *a, const int *axes, int naxes)
{
	if (!a)
		return NULL;
	uint32_t mask;
	if (!eng_build_axes_mask(a->ctx, "flip", a->node->ndim, axes, naxes, &mask))
		return NULL;
	for (int i = 0; i < a->node->ndim; i++)
		if (a->node->shape[i] <= 1)
			mask &= ~(1u << i);
	if (!mask)
		return eng_build_ref(a->ctx, a->node);
	if (a->node->op == ENG_OP_CONST)
		return eng_build_ref(a->ctx, a->node);
	eng_node_desc d = {.op = ENG_OP_FLIP, .dtype = a->node->dtype, .ndim = a->node->ndim,
			   .shape = a->node->shape, .src = {a->node}, .axes = mask};
	return eng_tensor_wrap(a->ctx, eng_build_node(a->ctx, &d));
}

/* ---- creation built on INDEX ---- */

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
