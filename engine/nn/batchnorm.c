/* batchnorm.c: BatchNorm2d of nn.h: per-channel batch statistics in training with lazy
 * running-statistic updates (eng_assign), running statistics in eval. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/composite.h"
#include <tensord/nn.h>

/* A parameter of the given shape and dtype filled with value. */
static eng_tensor *param_full(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape,
			      double value, bool trainable)
{
	eng_scope_begin(ctx);
	eng_tensor *t = eng_keep(eng_param_copy(eng_full(ctx, dt, ndim, shape, value)));
	eng_scope_end(ctx);
	return eng_param_adopt(t, trainable);
}

eng_status eng_nn_batchnorm2d_init(eng_ctx *ctx, eng_nn_batchnorm2d *b, int64_t channels,
				   double eps, double momentum, bool affine, eng_params *params,
				   const char *prefix)
{
	memset(b, 0, sizeof(*b));
	if (channels < 1 || !(eps >= 0) || !isfinite(eps) || !(momentum >= 0 && momentum <= 1))
		return eng_set_error(
			ctx, ENG_EINVAL,
			"nn_batchnorm2d_init: need channels >= 1, a finite eps >= 0 and"
			" momentum in [0, 1] (got %lld, %g, %g)",
			(long long)channels, eps, momentum);
	b->eps = eps;
	b->momentum = momentum;
	b->training = true;
	if (affine) {
		b->weight = param_full(ctx, ENG_F32, 1, &channels, 1.0, true);
		b->bias = param_full(ctx, ENG_F32, 1, &channels, 0.0, true);
	}
	b->running_mean = param_full(ctx, ENG_F32, 1, &channels, 0.0, false);
	b->running_var = param_full(ctx, ENG_F32, 1, &channels, 1.0, false);
	b->num_batches_tracked = param_full(ctx, ENG_I64, 0, NULL, 0.0, false);
	static const char *const names[] = {"weight", "bias", "running_mean", "running_var",
					    "num_batches_tracked"};
	const bool train[] = {true, true, false, false, false};
	eng_tensor *ts[] = {b->weight, b->bias, b->running_mean, b->running_var,
			    b->num_batches_tracked};
	if ((affine && (!b->weight || !b->bias)) || !b->running_mean || !b->running_var ||
	    !b->num_batches_tracked ||
	    (params && !eng_params_add_n(params, prefix, names, ts, train, 5))) {
		eng_nn_batchnorm2d_free(b);
		eng_status s = eng_error(ctx);
		return s ? s : eng_set_error(ctx, ENG_ENOMEM, "nn_batchnorm2d_init: failed");
	}
	return ENG_OK;
}

/* Queue running = (1-m)*running + m*stat (stat detached, shape (C)) on the running tensor;
 * false if the assign could not be built. Call inside a scope. */
static bool update_running(eng_tensor *running, const eng_tensor *stat, double m)
{
	eng_tensor *v = eng_add(eng_mul_s(running, 1.0 - m), eng_mul_s(eng_detach(stat), m));
	return v && eng_assign(running, v);
}

eng_tensor *eng_nn_batchnorm2d_forward(eng_nn_batchnorm2d *b, const eng_tensor *x)
{
	if (!x)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (!b || !b->running_mean) {
		eng_set_error(ctx, ENG_ESTATE, "nn_batchnorm2d: layer is not initialised");
		return NULL;
	}
	int64_t C = eng_shape(b->running_mean)[0];
	if (eng_ndim(x) != 4 || eng_shape(x)[1] != C) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "nn_batchnorm2d: input must be (N, %lld, H, W), got %d dims with %lld"
			      " channels",
			      (long long)C, eng_ndim(x),
			      eng_ndim(x) >= 2 ? (long long)eng_shape(x)[1] : 0LL);
		return NULL;
	}
	const int64_t *xs = eng_shape(x);
	int64_t n = xs[0] * xs[2] * xs[3], cs[4] = {1, C, 1, 1};
	if (b->training && n <= 1) {
		eng_set_error(
			ctx, ENG_ESHAPE,
			"nn_batchnorm2d: training needs more than 1 value per channel, got %lld",
			(long long)n);
		return NULL;
	}
	int axes[3] = {0, 2, 3};
	eng_scope_begin(ctx);
	eng_tensor *xf = eng_cast(x, ENG_F32), *y;
	if (b->training) {
		eng_tensor *mean = eng_mean(xf, axes, 3, true);
		eng_tensor *xc = eng_sub(xf, mean);
		eng_tensor *var = eng_mean(eng_mul(xc, xc), axes, 3, true);
		y = eng_mul(xc, eng_rsqrt(eng_add_s(var, b->eps)));
		eng_tensor *bm = eng_reshape(mean, 1, &C);
		eng_tensor *bv = eng_mul_s(eng_reshape(var, 1, &C), (double)n / (double)(n - 1));
		eng_tensor *nb = eng_add_s(b->num_batches_tracked, 1);
		/* the updates are queued only once the output and statistics are built */
		if (!y || !bm || !bv || !nb || !update_running(b->running_mean, bm, b->momentum) ||
		    !update_running(b->running_var, bv, b->momentum) ||
		    !eng_assign(b->num_batches_tracked, nb))
			y = NULL;
	} else {
		eng_tensor *rm = eng_reshape(b->running_mean, 4, cs);
		eng_tensor *rv = eng_reshape(b->running_var, 4, cs);
		y = eng_mul(eng_sub(xf, rm), eng_rsqrt(eng_add_s(rv, b->eps)));
	}
	if (y && b->weight)
		y = eng_add(eng_mul(y, eng_reshape(b->weight, 4, cs)), eng_reshape(b->bias, 4, cs));
	y = eng_keep(y);
	eng_scope_end(ctx);
	return y;
}

void eng_nn_batchnorm2d_free(eng_nn_batchnorm2d *b)
{
	if (!b)
		return;
	eng_tensor_free(b->weight);
	eng_tensor_free(b->bias);
	eng_tensor_free(b->running_mean);
	eng_tensor_free(b->running_var);
	eng_tensor_free(b->num_batches_tracked);
	memset(b, 0, sizeof(*b));
}
