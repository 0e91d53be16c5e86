/* layers.c: the Linear, Conv2d, LayerNorm and Embedding layers of nn.h (parameters,
 * PyTorch-style initialisation, validated forward passes) and inverted dropout. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/composite.h"
#include <tensord/nn.h>

#define INV_SQRT3 0.57735026918962576451 /* Kaiming gain giving bound 1/sqrt(fan_in) */

/* The status of a failed init: the context's error, which every failing step sets. */
static eng_status init_failed(eng_ctx *ctx)
{
	eng_status s = eng_error(ctx);
	return s ? s : eng_set_error(ctx, ENG_ENOMEM, "nn: layer init failed");
}

/* A parameter of the given shape filled with value. */
static eng_tensor *param_full(eng_ctx *ctx, int ndim, const int64_t *shape, double value,
			      bool trainable)
{
	eng_scope_begin(ctx);
	eng_tensor *t = eng_keep(eng_param_copy(eng_full(ctx, ENG_F32, ndim, shape, value)));
	eng_scope_end(ctx);
	return eng_param_adopt(t, trainable);
}

/* ---- Linear ---- */

eng_status eng_nn_linear_init(eng_ctx *ctx, eng_nn_linear *l, int64_t in, int64_t out, bool bias,
			      eng_params *params, const char *prefix)
{
	memset(l, 0, sizeof(*l));
	if (in < 1 || out < 1)
		return eng_set_error(
			ctx, ENG_EINVAL,
			"nn_linear_init: in and out features must be >= 1 (got %lld, %lld)",
			(long long)in, (long long)out);
	int64_t ws[2] = {out, in};
	l->weight = eng_param_adopt(eng_init_kaiming_uniform(ctx, 2, ws, in, INV_SQRT3), true);
	if (bias)
		l->bias = eng_param_adopt(eng_init_kaiming_uniform(ctx, 1, &out, in, INV_SQRT3),
					  true);
	static const char *const names[] = {"weight", "bias"};
	const bool train[] = {true, true};
	eng_tensor *ts[] = {l->weight, l->bias};
	if (!l->weight || (bias && !l->bias) ||
	    (params && !eng_params_add_n(params, prefix, names, ts, train, 2))) {
		eng_nn_linear_free(l);
		return init_failed(ctx);
	}
	return ENG_OK;
}

eng_tensor *eng_nn_linear_forward(const eng_nn_linear *l, const eng_tensor *x)
{
	if (!x)
		return NULL;
	if (!l || !l->weight) {
		eng_set_error(x->ctx, ENG_ESTATE, "nn_linear: layer is not initialised");
		return NULL;
	}
	int64_t in = eng_shape(l->weight)[1];
	int nd = eng_ndim(x);
	if (nd < 1 || eng_shape(x)[nd - 1] != in) {
		eng_set_error(x->ctx, ENG_ESHAPE,
			      "nn_linear: input has %lld features, layer expects %lld",
			      nd < 1 ? 0LL : (long long)eng_shape(x)[nd - 1], (long long)in);
		return NULL;
	}
	return eng_linear(x, l->weight, l->bias);
}

void eng_nn_linear_free(eng_nn_linear *l)
{
	if (!l)
		return;
	eng_tensor_free(l->weight);
	eng_tensor_free(l->bias);
	memset(l, 0, sizeof(*l));
}

/* ---- Conv2d ---- */

eng_status eng_nn_conv2d_init(eng_ctx *ctx, eng_nn_conv2d *c, int64_t in, int64_t out, int kh,
			      int kw, int stride, int padding, int dilation, int groups, bool bias,
			      eng_params *params, const char *prefix)
{
	memset(c, 0, sizeof(*c));
	if (in < 1 || out < 1 || groups < 1 || in % groups || out % groups)
		return eng_set_error(ctx, ENG_EINVAL,
				     "nn_conv2d_init: channels in %lld, out %lld must be >= 1 and"
				     " divisible by groups %d",
				     (long long)in, (long long)out, groups);
	if (kh < 1 || kw < 1 || stride < 1 || padding < 0 || dilation < 1)
		return eng_set_error(ctx, ENG_EINVAL,
				     "nn_conv2d_init: need kernel >= 1, stride >= 1, padding >= 0,"
				     " dilation >= 1 (got %dx%d, %d, %d, %d)",
				     kh, kw, stride, padding, dilation);
	int64_t ws[4] = {out, in / groups, kh, kw}, fan_in = in / groups * kh * kw;
	c->weight = eng_param_adopt(eng_init_kaiming_uniform(ctx, 4, ws, fan_in, INV_SQRT3), true);
	if (bias)
		c->bias = eng_param_adopt(eng_init_kaiming_uniform(ctx, 1, &out, fan_in, INV_SQRT3),
					  true);
	static const char *const names[] = {"weight", "bias"};
	const bool train[] = {true, true};
	eng_tensor *ts[] = {c->weight, c->bias};
	if (!c->weight || (bias && !c->bias) ||
	    (params && !eng_params_add_n(params, prefix, names, ts, train, 2))) {
		eng_nn_conv2d_free(c);
		return init_failed(ctx);
	}
	c->stride[0] = c->stride[1] = stride;
	c->padding[0] = c->padding[1] = padding;
	c->dilation[0] = c->dilation[1] = dilation;
	c->groups = groups;
	return ENG_OK;
}

eng_tensor *eng_nn_conv2d_forward(const eng_nn_conv2d *c, const eng_tensor *x)
{
	if (!x)
		return NULL;
	if (!c || !c->weight) {
		eng_set_error(x->ctx, ENG_ESTATE, "nn_conv2d: layer is not initialised");
		return NULL;
	}
	int64_t in = eng_shape(c->weight)[1] * c->groups;
	if (eng_ndim(x) != 4 || eng_shape(x)[1] != in) {
		eng_set_error(
			x->ctx, ENG_ESHAPE,
			"nn_conv2d: input must be (N, %lld, H, W), got %d dims with %lld channels",
			(long long)in, eng_ndim(x),
			eng_ndim(x) >= 2 ? (long long)eng_shape(x)[1] : 0LL);
		return NULL;
	}
	return eng_conv2d(x, c->weight, c->bias, c->stride, c->padding, c->dilation, c->groups);
}

void eng_nn_conv2d_free(eng_nn_conv2d *c)
{
	if (!c)
		return;
	eng_tensor_free(c->weight);
	eng_tensor_free(c->bias);
	memset(c, 0, sizeof(*c));
}

/* ---- LayerNorm ---- */

eng_status eng_nn_layernorm_init(eng_ctx *ctx, eng_nn_layernorm *l, int64_t dim, double eps,
				 bool affine, eng_params *params, const char *prefix)
{
	memset(l, 0, sizeof(*l));
	if (dim < 1 || !(eps >= 0) || !isfinite(eps))
		return eng_set_error(
			ctx, ENG_EINVAL,
			"nn_layernorm_init: need dim >= 1 and a finite eps >= 0 (got %lld, %g)",
			(long long)dim, eps);
	l->dim = dim;
	l->eps = eps;
	if (!affine)
		return ENG_OK;
	l->weight = param_full(ctx, 1, &dim, 1.0, true);
	l->bias = param_full(ctx, 1, &dim, 0.0, true);
	static const char *const names[] = {"weight", "bias"};
	const bool train[] = {true, true};
	eng_tensor *ts[] = {l->weight, l->bias};
	if (!l->weight || !l->bias ||
	    (params && !eng_params_add_n(params, prefix, names, ts, train, 2))) {
		eng_nn_layernorm_free(l);
		return init_failed(ctx);
	}
	return ENG_OK;
}

eng_tensor *eng_nn_layernorm_forward(const eng_nn_layernorm *l, const eng_tensor *x)
{
	if (!x)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (!l || l->dim < 1) {
		eng_set_error(ctx, ENG_ESTATE, "nn_layernorm: layer is not initialised");
		return NULL;
	}
	int nd = eng_ndim(x);
	if (nd < 1 || eng_shape(x)[nd - 1] != l->dim) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "nn_layernorm: input's last dim is %lld, layer expects %lld",
			      nd < 1 ? 0LL : (long long)eng_shape(x)[nd - 1], (long long)l->dim);
		return NULL;
	}
	eng_scope_begin(ctx);
	eng_tensor *y = eng_layernorm(x, l->eps);
	if (l->weight)
		y = eng_add(eng_mul(y, l->weight), l->bias);
	y = eng_keep(y);
	eng_scope_end(ctx);
	return y;
}

void eng_nn_layernorm_free(eng_nn_layernorm *l)
{
	if (!l)
		return;
	eng_tensor_free(l->weight);
	eng_tensor_free(l->bias);
	memset(l, 0, sizeof(*l));
}

/* ---- Embedding ---- */

eng_status eng_nn_embedding_init(eng_ctx *ctx, eng_nn_embedding *e, int64_t vocab, int64_t dim,
				 eng_params *params, const char *prefix)
{
	memset(e, 0, sizeof(*e));
	if (vocab < 1 || dim < 1)
		return eng_set_error(
			ctx, ENG_EINVAL,
			"nn_embedding_init: vocab and dim must be >= 1 (got %lld, %lld)",
			(long long)vocab, (long long)dim);
	int64_t ws[2] = {vocab, dim};
	eng_scope_begin(ctx);
	e->weight = eng_keep(eng_param_copy(eng_randn(ctx, ENG_F32, 2, ws)));
	eng_scope_end(ctx);
	e->weight = eng_param_adopt(e->weight, true);
	static const char *const names[] = {"weight"};
	const bool train[] = {true};
	if (!e->weight ||
	    (params && !eng_params_add_n(params, prefix, names, &e->weight, train, 1))) {
		eng_nn_embedding_free(e);
		return init_failed(ctx);
	}
	return ENG_OK;
}

eng_tensor *eng_nn_embedding_forward(const eng_nn_embedding *e, const eng_tensor *idx)
{
	if (!idx)
		return NULL;
	if (!e || !e->weight) {
		eng_set_error(idx->ctx, ENG_ESTATE, "nn_embedding: layer is not initialised");
		return NULL;
	}
	if (!eng_dtype_is_int(eng_tensor_dtype(idx))) {
		eng_set_error(idx->ctx, ENG_EDTYPE,
			      "nn_embedding: indices must be integers, got %s",
			      eng_dtype_name(eng_tensor_dtype(idx)));
		return NULL;
	}
	return eng_embedding(e->weight, idx);
}

void eng_nn_embedding_free(eng_nn_embedding *e)
{
	if (!e)
		return;
	eng_tensor_free(e->weight);
	memset(e, 0, sizeof(*e));
}

/* ---- Dropout ---- */

eng_tensor *eng_nn_dropout(const eng_tensor *x, double p, bool training)
{
	if (!x)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (!(p >= 0 && p < 1)) {
		eng_set_error(ctx, ENG_EINVAL, "nn_dropout: p must be in [0, 1), got %g", p);
		return NULL;
	}
	if (!eng_dtype_is_float(eng_tensor_dtype(x))) {
		eng_set_error(ctx, ENG_EDTYPE, "nn_dropout: input must be float, got %s",
			      eng_dtype_name(eng_tensor_dtype(x)));
		return NULL;
	}
	if (!training || p == 0)
		return eng_dup(x);
	eng_scope_begin(ctx);
	eng_tensor *keep = eng_ge(eng_rand(ctx, ENG_F32, eng_ndim(x), eng_shape(x)),
				  eng_scalar(ctx, ENG_F32, p));
	eng_tensor *y = eng_where(keep, eng_mul_s(x, 1.0 / (1.0 - p)), eng_scalar_as(x, 0));
	y = eng_keep(y);
	eng_scope_end(ctx);
	return y;
}
