/* context.c: the engine context's life (options, its devices and their caches), counters,
 * scopes and tensor handles, and realizing and reading tensors.
 * Everything an engine user creates is owned, directly or through a scope, by a context. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensor.h"

#include "device/device.h"
#include "realize/realize.h"

int eng_debug_level(const eng_ctx *ctx) { return ctx->debug; }

void eng_manual_seed(eng_ctx *ctx, uint64_t seed)
{
	ctx->seed = seed;
	ctx->rng_counter = 0;
}

void eng_ctx_opts_default(eng_ctx_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->debug = -1;
}

/* Open a device and attach the caches a realize uses; its index, or -1 with a message. */
static int open_device(eng_ctx *ctx, const char *spec, char *err, size_t errlen)
{
	int i = eng_device_add(ctx, spec, err, errlen);
	if (i < 0 || ctx->devs[i]->progs)
		return i; /* failed, or open already */
	if (eng_device_caches_open(ctx->devs[i]) != ENG_OK) {
		snprintf(err, errlen, "%.*s", (int)errlen - 1, ctx->errmsg);
		eng_device_destroy(ctx->devs[i]);
		ctx->devs[--ctx->ndevs] = NULL;
		return -1;
	}
	return i;
}

int eng_device_open(eng_ctx *ctx, const char *spec)
{
	char err[512];
	int i = open_device(ctx, spec, err, sizeof(err));
	if (i < 0)
		eng_set_error(ctx, ENG_EDEVICE, "device_open: %s", err);
	return i;
}

eng_status eng_device_reopen(eng_ctx *ctx, int dev)
{
	if (dev < 0 || dev >= ctx->ndevs)
		return eng_set_error(ctx, ENG_EINVAL, "device_reopen: no device %d (%d open)", dev, ctx->ndevs);
	eng_device *old = ctx->devs[dev];
	if (!old->failed)
		return eng_set_error(ctx, ENG_ESTATE, "device_reopen: %s has not failed", old->name);
	if (ctx->nretired == ENG_MAX_RETIRED)
		return eng_set_error(ctx, ENG_ERANGE, "device_reopen: %s: a context reopens devices at most %d times",
				     old->name, ENG_MAX_RETIRED);
	char err[512];
	eng_device *d = eng_device_create(ctx, old->name, err, sizeof(err));
	if (!d)
		return eng_set_error(ctx, ENG_EDEVICE, "device_reopen: %s", err);
	d->index = dev;
	if (eng_device_caches_open(d) != ENG_OK) {
		eng_device_destroy(d);
		return ctx->err;
	}
	/* the failed device stays (its buffers are lost values that still have owners) until the
	 * context ends; what it caches goes now */
	eng_graph_forget_values_on(ctx->graph, old);
	eng_device_caches_trim(old, ENG_TRIM_ALL);
	ctx->retired[ctx->nretired++] = old;
	ctx->devs[dev] = d;
	return ENG_OK;
}

eng_ctx *eng_ctx_create(const eng_ctx_opts *opts, char *err, size_t errlen)
{
	char dummy[8];
	eng_ctx_opts o;
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	if (opts)
		o = *opts;
	else
		eng_ctx_opts_default(&o);
	const char *dev = o.device ? o.device : getenv("DEV");
	if (!dev || !*dev)
		dev = eng_device_default_spec();
	eng_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (o.debug < 0) {
		const char *e = getenv("DEBUG");
		o.debug = e ? atoi(e) : 0;
	}
	ctx->debug = o.debug;
	if (!o.beam) {
		const char *e = getenv("TENSORD_BEAM");
		o.beam = e ? atoi(e) : 0;
	}
	ctx->beam = o.beam > 0 ? (o.beam < 64 ? o.beam : 64) : 0;
	if (!(o.beam_budget > 0)) {
		const char *e = getenv("TENSORD_BEAM_BUDGET");
		o.beam_budget = e ? atof(e) : 0;
	}
	ctx->beam_budget = o.beam_budget > 0 ? o.beam_budget : 5.0;
	if (o.backend_opts && strlen(o.backend_opts) >= sizeof(ctx->backend_opts)) {
		snprintf(err, errlen, "backend_opts: longer than %zu bytes", sizeof(ctx->backend_opts) - 1);
		free(ctx);
		return NULL;
	}
	ctx->nscopes = 1;
	ctx->graph = eng_graph_create();
	if (!ctx->graph) {
		snprintf(err, errlen, "out of memory");
		free(ctx);
		return NULL;
	}
	ctx->dopts = o;
	ctx->mem_limit = o.mem_limit;
	snprintf(ctx->backend_opts, sizeof(ctx->backend_opts), "%s", o.backend_opts ? o.backend_opts : "");
	snprintf(ctx->cache_dir, sizeof(ctx->cache_dir), "%s", o.cache_dir ? o.cache_dir : "");
	ctx->dopts.backend_opts = ctx->backend_opts;
	ctx->dopts.cache_dir = o.cache_dir ? ctx->cache_dir : NULL;
	ctx->dopts.device = NULL;
	if (open_device(ctx, dev, err, errlen) < 0) {
		eng_graph_destroy(ctx->graph);
		free(ctx);
		return NULL;
	}
	return ctx;
}

void eng_ctx_destroy(eng_ctx *ctx)
{
	if (!ctx)
		return;
	while (ctx->nscopes > 1)
		eng_scope_end(ctx);
	while (ctx->scopes[0])
		eng_tensor_free(ctx->scopes[0]);
	free(ctx->gradt);
	size_t leaked = eng_graph_destroy(ctx->graph);
	if (leaked)
		eng_logmsg(ctx, 1, "tensord: %zu graph nodes still referenced at exit", leaked);
	for (int i = 0; i < ctx->ndevs; i++) {
		eng_device_caches_close(ctx->devs[i]);
		eng_device_destroy(ctx->devs[i]);
	}
	for (int i = 0; i < ctx->nretired; i++) {
		eng_device_caches_close(ctx->retired[i]);
		eng_device_destroy(ctx->retired[i]);
	}
	free(ctx);
}

/* ---- scopes and tensor handles ---- */

static void scope_link(eng_ctx *ctx, eng_tensor *t, int scope)
{
	t->scope = scope;
	t->prev = NULL;
	t->next = ctx->scopes[scope];
	if (t->next)
		t->next->prev = t;
	ctx->scopes[scope] = t;
}

static void scope_unlink(eng_ctx *ctx, eng_tensor *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		ctx->scopes[t->scope] = t->next;
	if (t->next)
		t->next->prev = t->prev;
}

void eng_scope_begin(eng_ctx *ctx)
{
	if (ctx->nscopes >= ENG_MAX_SCOPES) {
		/* Too deep: keep using the innermost scope; the matching end frees it early, which
		 * is safe (handles only) but report it. */
		eng_set_error(ctx, ENG_ESTATE, "scopes nested deeper than %d", ENG_MAX_SCOPES);
		return;
	}
	ctx->scopes[ctx->nscopes++] = NULL;
}

void eng_scope_end(eng_ctx *ctx)
{
	if (ctx->nscopes <= 1)
		return;
	int s = ctx->nscopes - 1;
	while (ctx->scopes[s])
		eng_tensor_free(ctx->scopes[s]);
	ctx->nscopes--;
}

eng_tensor *eng_keep(eng_tensor *t)
{
	if (!t || t->scope == 0)
		return t;
	eng_ctx *ctx = t->ctx;
	scope_unlink(ctx, t);
	scope_link(ctx, t, t->scope - 1);
	return t;
}

void eng_tensor_unscope(eng_tensor *t)
{
	if (t && t->scope >= 0) {
		scope_unlink(t->ctx, t);
		t->scope = -1;
		t->prev = t->next = NULL;
	}
}

eng_tensor *eng_keep_root(eng_tensor *t)
{
	if (!t || t->scope == 0)
		return t;
	scope_unlink(t->ctx, t);
	scope_link(t->ctx, t, 0);
	return t;
}

void eng_tensor_free(eng_tensor *t)
{
	if (!t)
		return;
	if (t->scope >= 0)
		scope_unlink(t->ctx, t);
	if (t->requires_grad)
		eng_set_requires_grad(t, false);
	eng_tensor_free(t->grad);
	eng_node_unref(t->node);
	free(t);
}

void eng_tensor_settle(eng_tensor *t)
{
	eng_node *n = t->node;
	if (n->op != ENG_OP_ASSIGN || !n->buf)
		return;
	eng_node_desc d = {.op = ENG_OP_BUFFER, .dtype = n->dtype, .ndim = n->ndim, .shape = n->shape, .buf = n->buf,
			   .c = {.i = n->buf->version}};
	eng_node *b = eng_node_get(t->ctx->graph, &d);
	if (!b)
		return; /* out of memory: keep the assign node, which is still correct */
	t->node = b;
	eng_node_unref(n);
}

eng_tensor *eng_tensor_wrap(eng_ctx *ctx, eng_node *node)
{
	if (!node) {
		eng_set_error(ctx, ENG_ENOMEM, "out of memory building a graph node");
		return NULL;
	}
	eng_tensor *t = malloc(sizeof(*t));
	if (!t) {
		eng_node_unref(node);
		eng_set_error(ctx, ENG_ENOMEM, "out of memory allocating a tensor");
		return NULL;
	}
	t->ctx = ctx;
	t->node = node;
	t->requires_grad = false;
	t->grad = NULL;
	scope_link(ctx, t, ctx->nscopes - 1);
	return t;
}

eng_ctx *eng_tensor_ctx(const eng_tensor *t) { return t ? t->ctx : NULL; }
int eng_ndim(const eng_tensor *t) { return t ? t->node->ndim : 0; }
const int64_t *eng_shape(const eng_tensor *t) { return t ? t->node->shape : NULL; }
eng_dtype eng_tensor_dtype(const eng_tensor *t) { return t ? t->node->dtype : ENG_F32; }
int64_t eng_numel(const eng_tensor *t) { return t ? eng_node_numel(t->node) : 0; }
void eng_tensor_dump_graph(const eng_tensor *t)
{
	if (t)
		eng_node_dump(t->node, stderr);
}

/* ---- reading results ---- */

eng_status eng_realize(eng_tensor *const *ts, int n)
{
	if (n <= 0)
		return ENG_OK;
	eng_node *local[64], **nodes = n <= 64 ? local : malloc(sizeof(*nodes) * n);
	eng_ctx *ctx = NULL;
	for (int i = 0; i < n; i++)
		if (ts[i])
			ctx = ts[i]->ctx;
	if (!ctx)
		return ENG_EINVAL;
	if (!nodes)
		return eng_set_error(ctx, ENG_ENOMEM, "out of memory");
	for (int i = 0; i < n; i++) {
		if (!ts[i]) {
			if (nodes != local)
				free(nodes);
			return eng_set_error(ctx, ENG_EINVAL, "realize: tensor %d is NULL", i);
		}
		nodes[i] = ts[i]->node;
	}
	eng_status s = eng_realize_nodes(ctx, nodes, n);
	if (nodes != local)
		free(nodes);
	if (!s)
		for (int i = 0; i < n; i++)
			eng_tensor_settle(ts[i]);
	return s;
}

eng_status eng_tensor_read(eng_tensor *t, void *dst, size_t nbytes)
{
	if (!t)
		return ENG_EINVAL;
	eng_ctx *ctx = t->ctx;
	size_t want = (size_t)eng_node_numel(t->node) * eng_dtype_size(t->node->dtype);
	if (nbytes != want)
		return eng_set_error(ctx, ENG_EINVAL, "read: buffer is %zu bytes, tensor needs %zu",
				     nbytes, want);
	eng_status s = eng_realize(&t, 1);
	if (s)
		return s;
	if (!want)
		return ENG_OK;
	return eng_buffer_read(t->node->buf, dst, nbytes);
}

eng_status eng_realize_into(eng_tensor *t, void *dst, size_t nbytes)
{
	if (!t)
		return ENG_EINVAL;
	eng_ctx *ctx = t->ctx;
	eng_node *n = t->node;
	size_t want = (size_t)eng_node_numel(n) * eng_dtype_size(n->dtype);
	if (nbytes != want || (want && !dst))
		return eng_set_error(ctx, ENG_EINVAL, "realize_into: buffer is %zu bytes, tensor needs %zu", nbytes, want);
	int dev = n->dev >= 0 ? n->dev : ctx->default_dev;
	/* computed already, an in-place update, inside a JIT capture (it would keep dst): copy */
	if (n->buf || n->op == ENG_OP_ASSIGN || n->op == ENG_OP_BUFFER || ctx->capture || !want)
		return eng_tensor_read(t, dst, nbytes);
	eng_buffer *b = eng_buffer_wrap(ctx->devs[dev], n->dtype, eng_node_numel(n), dst, NULL, NULL);
	if (!b)
		return ctx->err ? ctx->err : eng_tensor_read(t, dst, nbytes);
	ctx->into_node = n;
	ctx->into_buf = b;
	eng_status s = eng_realize_nodes(ctx, &n, 1);
	ctx->into_node = NULL;
	ctx->into_buf = NULL;
	if (!s && n->buf != b) /* the node was no kernel's own output (a view): copy it out */
		s = eng_buffer_read(n->buf, dst, nbytes);
	if (n->buf == b) { /* t forgets dst: its value was the caller's to keep */
		n->buf = NULL;
		eng_buffer_unref(b);
	}
	eng_buffer_unref(b);
	return s;
}

double eng_item(eng_tensor *t)
{
	if (!t)
		return NAN;
	if (eng_node_numel(t->node) != 1) {
		eng_set_error(t->ctx, ENG_ESHAPE, "item: tensor has %lld elements, not 1",
			      (long long)eng_node_numel(t->node));
		return NAN;
	}
	union {
		uint8_t u8;
		int32_t i32;
		int64_t i64;
		uint16_t f16;
		float f32;
	} v;
	if (eng_tensor_read(t, &v, eng_dtype_size(t->node->dtype)))
		return NAN;
	switch (t->node->dtype) {
	case ENG_BOOL:
	case ENG_U8:
		return v.u8;
	case ENG_I32:
		return v.i32;
	case ENG_I64:
		return (double)v.i64;
	case ENG_F16:
		return eng_f16_to_double(v.f16);
	case ENG_F32:
		return v.f32;
	default:
		return NAN;
	}
}
