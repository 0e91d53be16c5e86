/* optim.c: SGD, Adam and AdamW as lazy graph updates (see optim.h). Hyperparameters that
 * change between steps (learning rate, bias corrections) are device scalars, so every step
 * reuses the same compiled kernels. */
#include <tensord/optim.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

struct eng_optim {
	eng_ctx *ctx;
	eng_optim_opts o;
	int n;
	eng_tensor **params; /* borrowed */
	eng_tensor **m, **v; /* state per param (owned; NULL when unused) */
	eng_tensor *lr;      /* () float32 */
	eng_tensor *b1t, *b2t; /* beta1^t, beta2^t */
};

void eng_optim_opts_default(eng_optim_opts *o, eng_optim_kind kind)
{
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->lr = kind == ENG_OPTIM_SGD ? 0.01 : 0.001;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	o->weight_decay = kind == ENG_OPTIM_ADAMW ? 0.01 : 0.0;
}

/* A tensor owned by the optimizer (outside every scope). State is filled lazily, by the first
 * step's schedule, so creating an optimizer compiles nothing. */
static eng_tensor *owned(eng_tensor *t)
{
	eng_tensor_unscope(t);
	return t;
}

/* Zeros in storage of their own (equal expressions share nodes, state must not). */
static eng_tensor *zeros_buf(eng_ctx *ctx, const eng_tensor *like)
{
	eng_tensor *t = eng_empty(ctx, eng_tensor_dtype(like), eng_ndim(like), eng_shape(like));
	return owned(eng_assign(t, eng_zeros(ctx, eng_tensor_dtype(like), eng_ndim(like), eng_shape(like))));
}

static eng_tensor *scalar_buf(eng_ctx *ctx, double v)
{
	float f = (float)v;
	return owned(eng_from_data(ctx, ENG_F32, 0, NULL, &f));
}

eng_optim *eng_optim_create(eng_ctx *ctx, eng_tensor *const *params, int n, const eng_optim_opts *o)
{
	if (!o || (unsigned)o->kind >= ENG_OPTIM_KIND_COUNT) {
		eng_set_error(ctx, ENG_EINVAL, "optim: unknown optimizer kind");
		return NULL;
	}
	if (!(o->lr >= 0) || !(o->momentum >= 0) || !(o->weight_decay >= 0) || !(o->beta1 >= 0 && o->beta1 < 1) ||
	    !(o->beta2 >= 0 && o->beta2 < 1) || !(o->eps >= 0) || (o->nesterov && o->momentum <= 0)) {
		eng_set_error(ctx, ENG_EINVAL,
			      "optim: bad options (lr %g, momentum %g, weight_decay %g, betas %g %g, eps %g%s)", o->lr,
			      o->momentum, o->weight_decay, o->beta1, o->beta2, o->eps,
			      o->nesterov && o->momentum <= 0 ? ", nesterov needs momentum" : "");
		return NULL;
	}
	if (n < 0 || (n && !params)) {
		eng_set_error(ctx, ENG_EINVAL, "optim: bad parameter list");
		return NULL;
	}
	for (int i = 0; i < n; i++)
		if (!params[i] || !eng_requires_grad(params[i])) {
			eng_set_error(ctx, ENG_EINVAL, "optim: parameter %d is NULL or does not require grad", i);
			return NULL;
		}
	eng_optim *opt = calloc(1, sizeof(*opt));
	if (!opt) {
		eng_set_error(ctx, ENG_ENOMEM, "optim: out of memory");
		return NULL;
	}
	opt->ctx = ctx;
	opt->o = *o;
	opt->n = n;
	opt->params = calloc(n ? n : 1, sizeof(*opt->params));
	opt->m = calloc(n ? n : 1, sizeof(*opt->m));
	opt->v = calloc(n ? n : 1, sizeof(*opt->v));
	if (!opt->params || !opt->m || !opt->v)
		goto oom;
	memcpy(opt->params, params, sizeof(*params) * n);
	bool adam = o->kind != ENG_OPTIM_SGD;
	for (int i = 0; i < n; i++) {
		const eng_tensor *p = params[i];
		if (adam || o->momentum > 0) {
			opt->m[i] = zeros_buf(ctx, p);
			if (!opt->m[i])
				goto oom;
		}
		if (adam) {
			opt->v[i] = zeros_buf(ctx, p);
			if (!opt->v[i])
				goto oom;
		}
	}
	opt->lr = scalar_buf(ctx, o->lr);
	opt->b1t = scalar_buf(ctx, 1.0);
	opt->b2t = scalar_buf(ctx, 1.0);
	if (!opt->lr || !opt->b1t || !opt->b2t)
		goto oom;
	return opt;
oom:
	eng_optim_destroy(opt);
	if (!ctx->err)
		eng_set_error(ctx, ENG_ENOMEM, "optim: out of memory");
	return NULL;
}

void eng_optim_destroy(eng_optim *opt)
{
	if (!opt)
		return;
	for (int i = 0; i < opt->n; i++) {
		if (opt->m)
			eng_tensor_free(opt->m[i]);
		if (opt->v)
			eng_tensor_free(opt->v[i]);
	}
	eng_tensor_free(opt->lr);
	eng_tensor_free(opt->b1t);
	eng_tensor_free(opt->b2t);
	free(opt->params);
	free(opt->m);
	free(opt->v);
	free(opt);
}

eng_status eng_optim_set_lr(eng_optim *opt, double lr)
{
	if (!(lr >= 0) || !isfinite(lr))
		return eng_set_error(opt->ctx, ENG_EINVAL, "optim: learning rate %g must be finite and >= 0", lr);
	eng_ctx *ctx = opt->ctx;
	eng_scope_begin(ctx);
	eng_assign(opt->lr, eng_scalar(ctx, ENG_F32, lr));
	eng_status s = eng_realize(&opt->lr, 1);
	eng_scope_end(ctx);
	if (!s)
		opt->o.lr = lr;
	return s;
}

double eng_optim_lr(const eng_optim *opt) { return opt->o.lr; }

void eng_optim_zero_grad(eng_optim *opt)
{
	for (int i = 0; i < opt->n; i++)
		eng_zero_grad(opt->params[i]);
}

/* The new value of parameter i (lazy), updating its state tensors with assigns. */
static eng_tensor *update(eng_optim *opt, int i, eng_tensor *b1t, eng_tensor *b2t)
{
	const eng_optim_opts *o = &opt->o;
	eng_tensor *p = opt->params[i], *g = eng_grad(p);
	eng_dtype dt = eng_tensor_dtype(p);
	eng_tensor *lr = eng_cast(opt->lr, dt);
	if (o->kind != ENG_OPTIM_ADAMW && o->weight_decay > 0)
		g = eng_add(g, eng_mul_s(eng_detach(p), o->weight_decay));
	if (o->kind == ENG_OPTIM_SGD) {
		if (o->momentum > 0) {
			eng_tensor *buf = eng_add(eng_mul_s(opt->m[i], o->momentum), g);
			eng_assign(opt->m[i], buf);
			g = o->nesterov ? eng_add(g, eng_mul_s(buf, o->momentum)) : buf;
		}
		return eng_sub(p, eng_mul(g, lr));
	}
	eng_tensor *m = eng_add(eng_mul_s(opt->m[i], o->beta1), eng_mul_s(g, 1 - o->beta1));
	eng_tensor *v = eng_add(eng_mul_s(opt->v[i], o->beta2), eng_mul_s(eng_mul(g, g), 1 - o->beta2));
	eng_assign(opt->m[i], m);
	eng_assign(opt->v[i], v);
	eng_tensor *mhat = eng_div(m, eng_cast(eng_rsub_s(1, b1t), dt));
	eng_tensor *vhat = eng_div(v, eng_cast(eng_rsub_s(1, b2t), dt));
	eng_tensor *stepv = eng_div(mhat, eng_add_s(eng_sqrt(vhat), o->eps));
	eng_tensor *np = p;
	if (o->kind == ENG_OPTIM_ADAMW && o->weight_decay > 0)
		np = eng_mul(p, eng_rsub_s(1, eng_mul_s(lr, o->weight_decay)));
	return eng_sub(np, eng_mul(stepv, lr));
}

eng_status eng_optim_step(eng_optim *opt, eng_tensor *const *extra, int nextra)
{
	eng_ctx *ctx = opt->ctx;
	if (ctx->err)
		return ctx->err;
	if (nextra < 0 || (nextra && !extra))
		return eng_set_error(ctx, ENG_EINVAL, "optim_step: bad extra list");
	int cap = 3 * opt->n + 2 + nextra;
	eng_tensor **all = calloc(cap ? cap : 1, sizeof(*all));
	if (!all)
		return eng_set_error(ctx, ENG_ENOMEM, "optim_step: out of memory");
	int k = 0;
	eng_scope_begin(ctx);
	eng_tensor *b1t = NULL, *b2t = NULL;
	if (opt->o.kind != ENG_OPTIM_SGD) {
		b1t = eng_mul_s(opt->b1t, opt->o.beta1);
		b2t = eng_mul_s(opt->b2t, opt->o.beta2);
		eng_assign(opt->b1t, b1t);
		eng_assign(opt->b2t, b2t);
		all[k++] = opt->b1t;
		all[k++] = opt->b2t;
	}
	for (int i = 0; i < opt->n; i++) {
		eng_tensor *p = opt->params[i];
		if (!eng_grad(p))
			continue;
		eng_tensor *np = update(opt, i, b1t, b2t);
		if (!np)
			break;
		eng_assign(p, np);
		all[k++] = p;
		if (opt->m[i])
			all[k++] = opt->m[i];
		if (opt->v[i])
			all[k++] = opt->v[i];
	}
	for (int i = 0; i < nextra; i++)
		all[k++] = extra[i];
	eng_status s = ctx->err ? ctx->err : eng_realize(all, k);
	eng_scope_end(ctx);
	free(all);
	if (!s)
		eng_optim_zero_grad(opt);
	return s;
}
