/* params.c: the parameter list (state dict) of nn.h, parameter storage (own buffer, root
 * scope, requires grad) and the Kaiming / Glorot uniform initialisers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/composite.h"
#include <tensord/nn.h>

/* ---- the list ---- */

void eng_params_init(eng_params *p)
{
	memset(p, 0, sizeof(*p));
}

bool eng_params_add(eng_params *p, const char *prefix, const char *leaf, eng_tensor *t,
		    bool trainable)
{
	if (!p || !leaf || !t)
		return false;
	eng_param item = {.t = t, .trainable = trainable};
	bool pre = prefix && *prefix;
	int len = snprintf(item.name, sizeof(item.name), "%s%s%s", pre ? prefix : "",
			   pre ? "." : "", leaf);
	if (len < 0 || (size_t)len >= sizeof(item.name)) {
		eng_set_error(t->ctx, ENG_EINVAL,
			      "params_add: name '%s%s%s' longer than %zu characters",
			      pre ? prefix : "", pre ? "." : "", leaf, sizeof(item.name) - 1);
		return false;
	}
	if (p->n == p->cap) {
		int cap = p->cap ? p->cap * 2 : 16;
		eng_param *items = realloc(p->items, sizeof(*items) * cap);
		if (!items) {
			eng_set_error(t->ctx, ENG_ENOMEM, "params_add: out of memory");
			return false;
		}
		p->items = items;
		p->cap = cap;
	}
	p->items[p->n++] = item;
	return true;
}

bool eng_params_add_n(eng_params *p, const char *prefix, const char *const *leaves,
		      eng_tensor *const *ts, const bool *trainable, int n)
{
	int n0 = p->n;
	for (int i = 0; i < n; i++)
		if (ts[i] && !eng_params_add(p, prefix, leaves[i], ts[i], trainable[i])) {
			p->n = n0;
			return false;
		}
	return true;
}

eng_tensor *eng_params_find(const eng_params *p, const char *name)
{
	for (int i = 0; p && name && i < p->n; i++)
		if (!strcmp(p->items[i].name, name))
			return p->items[i].t;
	return NULL;
}

eng_tensor **eng_params_trainable(const eng_params *p, int *n)
{
	*n = 0;
	eng_tensor **out = malloc(sizeof(*out) * (p->n ? p->n : 1));
	if (!out)
		return NULL;
	for (int i = 0; i < p->n; i++)
		if (p->items[i].trainable)
			out[(*n)++] = p->items[i].t;
	return out;
}

eng_named *eng_params_named(const eng_params *p)
{
	eng_named *out = malloc(sizeof(*out) * (p->n ? p->n : 1));
	if (!out)
		return NULL;
	for (int i = 0; i < p->n; i++)
		out[i] = (eng_named){.name = p->items[i].name, .t = p->items[i].t};
	return out;
}

void eng_params_free(eng_params *p)
{
	if (!p)
		return;
	free(p->items);
	memset(p, 0, sizeof(*p));
}

/* ---- parameter storage ---- */

/* Realize value, read it back and upload it into a fresh buffer: a plain BUFFER node that no
 * other expression shares (interned nodes such as contiguous(zeros) or a rand expression
 * rebuilt after eng_manual_seed could otherwise alias two parameters). */
eng_tensor *eng_param_copy(const eng_tensor *value)
{
	if (!value)
		return NULL;
	/* Storage of its own, filled lazily: the first realize that uses the parameter writes
	 * it, so a model's initialisation costs one schedule (and one compile), not one each. */
	eng_ctx *ctx = value->ctx;
	const eng_node *n = value->node;
	eng_scope_begin(ctx);
	eng_tensor *r = eng_keep(eng_assign(eng_empty(ctx, n->dtype, n->ndim, n->shape), value));
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_param_adopt(eng_tensor *t, bool trainable)
{
	if (!t)
		return NULL;
	eng_keep_root(t);
	if (trainable && eng_set_requires_grad(t, true) != ENG_OK) {
		eng_tensor_free(t);
		return NULL;
	}
	return t;
}

/* ---- initialisers ---- */

/* Uniform in [-bound, bound) as a new parameter-ready buffer. */
static eng_tensor *uniform(eng_ctx *ctx, int ndim, const int64_t *shape, double bound)
{
	eng_scope_begin(ctx);
	eng_tensor *u = eng_rand(ctx, ENG_F32, ndim, shape);
	eng_tensor *r = eng_keep(eng_param_copy(eng_sub_s(eng_mul_s(u, 2.0 * bound), bound)));
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_init_kaiming_uniform(eng_ctx *ctx, int ndim, const int64_t *shape, int64_t fan_in,
				     double gain)
{
	if (fan_in < 1 || !(gain >= 0) || !isfinite(gain)) {
		eng_set_error(ctx, ENG_EINVAL,
			      "init_kaiming_uniform: need fan_in >= 1 and a finite gain >= 0 (got "
			      "%lld, %g)",
			      (long long)fan_in, gain);
		return NULL;
	}
	return uniform(ctx, ndim, shape, gain * sqrt(3.0 / (double)fan_in));
}

eng_tensor *eng_init_glorot_uniform(eng_ctx *ctx, int ndim, const int64_t *shape, int64_t fan_in,
				    int64_t fan_out)
{
	if (fan_in < 0 || fan_out < 0 || fan_in + fan_out < 1) {
		eng_set_error(ctx, ENG_EINVAL,
			      "init_glorot_uniform: need fan_in, fan_out >= 0 with a positive sum"
			      " (got %lld, %lld)",
			      (long long)fan_in, (long long)fan_out);
		return NULL;
	}
	return uniform(ctx, ndim, shape, sqrt(6.0 / (double)(fan_in + fan_out)));
}
