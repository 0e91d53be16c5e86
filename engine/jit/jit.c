/* jit.c: the JIT of jit.h: per input-shape signature, run, then capture, then replay. A
 * capture is turned into a launch list over classified buffers: inputs (bound per call),
 * outputs (fresh per call), intermediates (planned into shared blocks) and fixed buffers
 * (parameters, assign targets, constants: used as captured; a rand call's stream base gets the
 * next base before each replay, so each replay draws new numbers, as calls do). */
#include <tensord/jit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/progcache.h"
#include "realize/capture.h"
#include "tensor/tensor.h"
#include <tensord/eng_dtype.h>
#include "memplan.h"

#define JIT_MAX_IO 64

typedef enum jclass { J_FIXED, J_INPUT, J_OUTPUT, J_TEMP } jclass;

typedef struct jbuf {
	eng_buffer *buf; /* J_FIXED, and J_TEMP without planning: the buffer (one reference) */
	jclass cls;
	int index;       /* J_INPUT: input; J_OUTPUT: output; J_TEMP with planning: block */
	size_t nbytes;
	int first, last; /* launches using it */
} jbuf;

typedef struct jlaunch {
	eng_schedcache_kernel k;
	const eng_device *dev; /* where it was captured (its program is pinned there if that is jsig.dev) */
	int b[ENG_MAX_KERNEL_BUFS]; /* jbuf of each kernel buffer */
	uint64_t assign;
} jlaunch;

typedef struct jout {
	int jb; /* jbuf holding the output, or -1: returned as captured (fixed) */
	eng_buffer *fixed;
	eng_dtype dtype;
	int ndim;
	int64_t shape[ENG_MAX_DIMS];
} jout;

typedef struct jsig {
	int64_t (*shape)[ENG_MAX_DIMS]; /* per input */
	int calls;
	bool captured;
	jbuf *bufs;
	int nbufs;
	jlaunch *l;
	int nl;
	jout *outs;
	eng_buffer **blocks;
	int nblocks;
	size_t temp_bytes, planned_bytes;
	uint64_t replays;
	eng_device *dev; /* whose program cache holds the pins of l[*].k.prog */
} jsig;

struct eng_jit {
	eng_ctx *ctx;
	eng_jit_fn fn;
	void *user;
	int nin, nout;
	eng_jit_opts o;
	bool typed;               /* dtypes/ranks of the first call recorded */
	eng_dtype dtype[JIT_MAX_IO];
	int ndim[JIT_MAX_IO];
	jsig *sigs;
	int nsigs, last;
	uint64_t replays;
};

void eng_jit_opts_default(eng_jit_opts *o)
{
	o->max_captures = 1;
	o->plan_memory = true;
}

eng_jit *eng_jit_create(eng_ctx *ctx, eng_jit_fn fn, void *user, int nin, int nout, const eng_jit_opts *opts)
{
	if (!ctx)
		return NULL;
	if (!fn || nin < 0 || nin > JIT_MAX_IO || nout < 1 || nout > JIT_MAX_IO) {
		eng_set_error(ctx, ENG_EINVAL, "jit: need a function, 0..%d inputs and 1..%d outputs (got %d, %d)",
			      JIT_MAX_IO, JIT_MAX_IO, nin, nout);
		return NULL;
	}
	eng_jit *j = calloc(1, sizeof(*j));
	if (!j) {
		eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory");
		return NULL;
	}
	j->ctx = ctx;
	j->fn = fn;
	j->user = user;
	j->nin = nin;
	j->nout = nout;
	if (opts)
		j->o = *opts;
	else
		eng_jit_opts_default(&j->o);
	if (j->o.max_captures < 1)
		j->o.max_captures = 1;
	j->sigs = calloc(j->o.max_captures, sizeof(*j->sigs));
	if (!j->sigs) {
		free(j);
		eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory");
		return NULL;
	}
	j->last = -1;
	return j;
}

static void sig_drop_capture(jsig *s, int nout)
{
	for (int i = 0; i < s->nbufs; i++)
		eng_buffer_unref(s->bufs[i].buf);
	for (int i = 0; i < s->nblocks; i++)
		eng_buffer_unref(s->blocks[i]);
	for (int i = 0; s->outs && i < nout; i++)
		eng_buffer_unref(s->outs[i].fixed);
	for (int i = 0; s->dev && i < s->nl; i++)
		if (s->l[i].dev == s->dev)
			eng_progcache_pin(s->dev->progs, s->l[i].k.prog, -1);
	s->dev = NULL;
	free(s->bufs);
	free(s->l);
	free(s->outs);
	free(s->blocks);
	s->bufs = NULL, s->l = NULL, s->outs = NULL, s->blocks = NULL;
	s->nbufs = s->nl = s->nblocks = 0;
	s->captured = false;
}

void eng_jit_destroy(eng_jit *j)
{
	if (!j)
		return;
	for (int i = 0; i < j->nsigs; i++) {
		sig_drop_capture(&j->sigs[i], j->nout);
		free(j->sigs[i].shape);
	}
	free(j->sigs);
	free(j);
}

void eng_jit_get_info(const eng_jit *j, eng_jit_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!j)
		return;
	for (int i = 0; i < j->nsigs; i++)
		out->captures += j->sigs[i].captured;
	out->replays = j->replays;
	if (j->last >= 0 && j->sigs[j->last].captured) {
		const jsig *s = &j->sigs[j->last];
		out->kernels = s->nl;
		out->temp_bytes = s->temp_bytes;
		out->planned_bytes = s->planned_bytes;
	}
}

/* ---- inputs ---- */

static void shape_str(char *out, size_t len, int ndim, const int64_t *shape)
{
	size_t l = (size_t)snprintf(out, len, "(");
	for (int d = 0; d < ndim && l < len; d++)
		l += (size_t)snprintf(out + l, len - l, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (l < len)
		snprintf(out + l, len - l, ")");
}

/* The signature for these inputs: an existing one, a new one if allowed, else an error. */
static int find_sig(eng_jit *j, eng_tensor *const *in)
{
	eng_ctx *ctx = j->ctx;
	for (int s = 0; s < j->nsigs; s++) {
		bool same = true;
		for (int k = 0; k < j->nin && same; k++)
			same = !memcmp(j->sigs[s].shape[k], eng_shape(in[k]), j->ndim[k] * sizeof(int64_t));
		if (same)
			return s;
	}
	if (j->nsigs == j->o.max_captures) {
		const jsig *s = &j->sigs[j->last >= 0 ? j->last : 0];
		for (int k = 0; k < j->nin; k++)
			if (memcmp(s->shape[k], eng_shape(in[k]), j->ndim[k] * sizeof(int64_t))) {
				char got[160], want[160];
				shape_str(got, sizeof(got), j->ndim[k], eng_shape(in[k]));
				shape_str(want, sizeof(want), j->ndim[k], s->shape[k]);
				eng_set_error(ctx, ENG_ESHAPE,
					      "jit: input %d has shape %s but the function was captured for %s "
					      "(%d shape signature%s allowed)",
					      k, got, want, j->o.max_captures, j->o.max_captures == 1 ? "" : "s");
				return -1;
			}
	}
	jsig *s = &j->sigs[j->nsigs];
	memset(s, 0, sizeof(*s));
	s->shape = calloc(j->nin ? j->nin : 1, sizeof(*s->shape));
	if (!s->shape) {
		eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory");
		return -1;
	}
	for (int k = 0; k < j->nin; k++)
		memcpy(s->shape[k], eng_shape(in[k]), j->ndim[k] * sizeof(int64_t));
	return j->nsigs++;
}

static eng_tensor *buffer_tensor(eng_ctx *ctx, eng_buffer *b, eng_dtype dt, int ndim, const int64_t *shape)
{
	eng_node_desc d = {.op = ENG_OP_BUFFER, .dtype = dt, .ndim = ndim, .shape = shape, .buf = b,
			   .c = {.i = b->version}};
	return eng_tensor_wrap(ctx, eng_node_get(ctx->graph, &d));
}

/* Check the inputs and give each a buffer of its own (a plain buffer input is used as it is;
 * a lazy one, a view, or a buffer passed twice is realized into a new one). */
static eng_status prepare_inputs(eng_jit *j, eng_tensor *const *in, eng_tensor **bin)
{
	eng_ctx *ctx = j->ctx;
	for (int k = 0; k < j->nin; k++) {
		if (!in[k])
			return eng_set_error(ctx, ENG_EINVAL, "jit: input %d is NULL", k);
		if (in[k]->ctx != ctx)
			return eng_set_error(ctx, ENG_EINVAL, "jit: input %d belongs to another context", k);
		eng_dtype dt = eng_tensor_dtype(in[k]);
		if (j->typed && (dt != j->dtype[k] || eng_ndim(in[k]) != j->ndim[k]))
			return eng_set_error(ctx, ENG_EDTYPE,
					     "jit: input %d is %s with %d dims; the function was captured for %s with %d",
					     k, eng_dtype_name(dt), eng_ndim(in[k]), eng_dtype_name(j->dtype[k]),
					     j->ndim[k]);
	}
	if (!j->typed) {
		for (int k = 0; k < j->nin; k++) {
			j->dtype[k] = eng_tensor_dtype(in[k]);
			j->ndim[k] = eng_ndim(in[k]);
		}
		j->typed = true;
	}
	eng_device *dev = ctx->devs[ctx->default_dev];
	for (int k = 0; k < j->nin; k++) {
		const eng_node *n = in[k]->node;
		bool dup = false;
		for (int q = 0; q < k && !dup; q++)
			dup = n->buf && bin[q]->node->buf == n->buf;
		if (n->op == ENG_OP_BUFFER && !dup) {
			bin[k] = buffer_tensor(ctx, n->buf, n->dtype, n->ndim, n->shape);
		} else {
			eng_tensor *c = eng_contiguous(dup ? eng_add(in[k], eng_zeros(ctx, n->dtype, 0, NULL)) : in[k]);
			if (!c || eng_realize(&c, 1))
				return ctx->err ? ctx->err : ENG_ENOMEM;
			bin[k] = buffer_tensor(ctx, c->node->buf, n->dtype, n->ndim, n->shape);
		}
		if (!bin[k])
			return ctx->err ? ctx->err : ENG_ENOMEM;
		if (bin[k]->node->buf->dev != dev)
			return eng_set_error(ctx, ENG_EINVAL, "jit: input %d is on device %s, the function runs on %s", k,
					     bin[k]->node->buf->dev->name, dev->name);
	}
	return ENG_OK;
}

/* ---- running normally (and capturing) ---- */

/* Run fn and realize its outputs; out[] get plain buffer tensors in the caller's scope. */
static eng_status run_fn(eng_jit *j, eng_tensor *const *bin, eng_tensor **out)
{
	eng_ctx *ctx = j->ctx;
	eng_tensor *res[JIT_MAX_IO] = {0};
	eng_scope_begin(ctx);
	eng_status s = j->fn(ctx, bin, j->nin, res, j->nout, j->user);
	if (!s && ctx->err)
		s = ctx->err;
	for (int i = 0; i < j->nout && !s; i++)
		if (!res[i])
			s = eng_set_error(ctx, ENG_EINVAL, "jit: the function returned no tensor for output %d", i);
	if (!s)
		s = eng_realize(res, j->nout);
	for (int i = 0; i < j->nout && !s; i++) {
		const eng_node *n = res[i]->node;
		out[i] = eng_keep(buffer_tensor(ctx, n->buf, n->dtype, n->ndim, n->shape));
		if (!out[i])
			s = ctx->err ? ctx->err : ENG_ENOMEM;
	}
	eng_scope_end(ctx);
	if (s)
		for (int i = 0; i < j->nout; i++) {
			eng_tensor_free(out[i]);
			out[i] = NULL;
		}
	return s;
}

static int find_buf(int n, const eng_buffer *const *keys, const eng_buffer *b)
{
	for (int i = 0; i < n; i++)
		if (keys[i] == b)
			return i;
	return -1;
}

/* Turn a capture into the signature's launch list. The graph the function built is gone by
 * now, so an intermediate is a buffer written by a captured kernel (not in place) that only
 * the capture still references. */
static eng_status build_replay(eng_jit *j, jsig *s, eng_capture *cap, eng_tensor *const *bin, eng_tensor *const *out)
{
	eng_ctx *ctx = j->ctx;
	eng_device *dev = ctx->devs[ctx->default_dev];
	int maxb = 0;
	for (int i = 0; i < cap->n; i++)
		maxb += cap->l[i].k.nbufs;
	const eng_buffer **keys = calloc(maxb ? maxb : 1, sizeof(*keys));
	int *uses = calloc(maxb ? maxb : 1, sizeof(int));
	bool *written = calloc(maxb ? maxb : 1, sizeof(bool));
	s->bufs = calloc(maxb + j->nout, sizeof(*s->bufs));
	s->l = calloc(cap->n ? cap->n : 1, sizeof(*s->l));
	s->outs = calloc(j->nout, sizeof(*s->outs));
	eng_mp_req *req = calloc(maxb ? maxb : 1, sizeof(*req));
	size_t *bsz = calloc(maxb ? maxb : 1, sizeof(*bsz));
	int *reqbuf = calloc(maxb ? maxb : 1, sizeof(int));
	eng_status st = ENG_OK;
	if (!keys || !uses || !written || !s->bufs || !s->l || !s->outs || !req || !bsz || !reqbuf) {
		st = eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory building the replay");
		goto out;
	}
	s->dev = cap->n ? cap->l[0].dev : NULL;
	for (int i = 0; i < cap->n; i++) {
		const eng_cap_launch *cl = &cap->l[i];
		jlaunch *jl = &s->l[i];
		jl->k = cl->k;
		jl->dev = cl->dev;
		jl->assign = cl->assign;
		if (cl->dev == s->dev) /* replay launches on one device; so trims leave it its programs */
			eng_progcache_pin(s->dev->progs, cl->k.prog, +1);
		for (int q = 0; q < cl->k.nbufs; q++) {
			int b = find_buf(s->nbufs, keys, cl->buf[q]);
			if (b < 0) {
				b = s->nbufs++;
				keys[b] = cl->buf[q];
				s->bufs[b].first = i;
				s->bufs[b].nbytes = cl->buf[q]->nbytes;
			}
			s->bufs[b].last = i;
			uses[b]++;
			if (((cl->k.outputs >> q) & 1) && !((cl->assign >> q) & 1))
				written[b] = true;
			jl->b[q] = b;
		}
	}
	s->nl = cap->n;
	int nreq = 0;
	for (int b = 0; b < s->nbufs; b++) {
		jbuf *jb = &s->bufs[b];
		eng_buffer *buf = (eng_buffer *)keys[b];
		jb->cls = J_FIXED;
		for (int k = 0; k < j->nin && jb->cls == J_FIXED; k++)
			if (bin[k]->node->buf == buf)
				jb->cls = J_INPUT, jb->index = k;
		for (int o = 0; o < j->nout && jb->cls == J_FIXED && written[b]; o++)
			if (out[o]->node->buf == buf)
				jb->cls = J_OUTPUT, jb->index = o;
		if (jb->cls == J_FIXED && written[b] && buf->refs == (uint32_t)uses[b]) {
			jb->cls = J_TEMP;
			s->temp_bytes += jb->nbytes;
			if (j->o.plan_memory) {
				req[nreq] = (eng_mp_req){.nbytes = jb->nbytes, .first = jb->first, .last = jb->last};
				reqbuf[nreq++] = b;
				continue;
			}
		}
		if (jb->cls == J_FIXED || jb->cls == J_TEMP)
			jb->buf = eng_buffer_ref(buf);
	}
	if (nreq) {
		int nb = eng_memplan(req, nreq, bsz);
		s->blocks = nb > 0 ? calloc(nb, sizeof(*s->blocks)) : NULL;
		if (nb < 0 || !s->blocks) {
			st = eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory planning buffers");
			goto out;
		}
		for (int b = 0; b < nb; b++) {
			s->blocks[b] = eng_buffer_alloc(dev, ENG_U8, (int64_t)bsz[b]);
			if (!s->blocks[b]) {
				st = ctx->err ? ctx->err : ENG_ENOMEM;
				goto out;
			}
			s->nblocks++;
			s->planned_bytes += bsz[b];
		}
		for (int r = 0; r < nreq; r++)
			s->bufs[reqbuf[r]].index = req[r].block;
	} else {
		s->planned_bytes = s->temp_bytes;
	}
	for (int o = 0; o < j->nout; o++) {
		jout *jo = &s->outs[o];
		const eng_node *n = out[o]->node;
		jo->dtype = n->dtype;
		jo->ndim = n->ndim;
		memcpy(jo->shape, n->shape, sizeof(int64_t) * n->ndim);
		jo->jb = -1;
		for (int b = 0; b < s->nbufs && jo->jb < 0; b++)
			if (keys[b] == n->buf && (s->bufs[b].cls == J_OUTPUT || s->bufs[b].cls == J_INPUT))
				jo->jb = b;
		if (jo->jb < 0) {
			int k = -1; /* an input returned as it is */
			for (int q = 0; q < j->nin && k < 0; q++)
				if (bin[q]->node->buf == n->buf)
					k = q;
			if (k >= 0) {
				s->bufs[s->nbufs] = (jbuf){.cls = J_INPUT, .index = k, .first = -1, .last = -1};
				jo->jb = s->nbufs++;
			} else {
				jo->fixed = eng_buffer_ref(n->buf);
			}
		}
	}
	s->captured = true;
out:
	if (st)
		sig_drop_capture(s, j->nout);
	free(keys);
	free(uses);
	free(written);
	free(req);
	free(bsz);
	free(reqbuf);
	return st;
}

/* ---- replay ---- */

static eng_status replay(eng_jit *j, jsig *s, eng_tensor *const *bin, eng_tensor **out)
{
	eng_ctx *ctx = j->ctx;
	eng_device *dev = ctx->devs[ctx->default_dev];
	eng_buffer *fresh[JIT_MAX_IO] = {0};
	eng_buffer *local[256], **res = s->nbufs <= 256 ? local : malloc(s->nbufs * sizeof(*res));
	eng_status st = ENG_OK;
	if (dev->failed || (s->dev && s->dev != dev)) {
		if (res != local)
			free(res);
		if (!dev->failed)
			return eng_set_error(ctx, ENG_EDEVICE, "jit: captured on %s before it was reopened: its buffers "
					     "and programs are gone; drop the capture (eng_jit_drop) and capture again",
					     dev->name);
		return eng_set_error(ctx, ENG_EDEVICE, "%s: device is unusable after an earlier failure: %s", dev->name,
				     dev->failmsg);
	}
	if (!res)
		return eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory");
	for (int b = 0; b < s->nbufs && !st; b++) {
		const jbuf *jb = &s->bufs[b];
		switch (jb->cls) {
		case J_INPUT:
			res[b] = bin[jb->index]->node->buf;
			break;
		case J_OUTPUT:
			if (!fresh[jb->index]) {
				const jout *jo = &s->outs[jb->index];
				int64_t numel = 1;
				for (int d = 0; d < jo->ndim; d++)
					numel *= jo->shape[d];
				fresh[jb->index] = eng_buffer_alloc(dev, jo->dtype, numel);
				if (!fresh[jb->index])
					st = ctx->err ? ctx->err : ENG_ENOMEM;
			}
			res[b] = fresh[jb->index];
			break;
		case J_TEMP:
			res[b] = j->o.plan_memory ? s->blocks[jb->index] : jb->buf;
			break;
		default:
			res[b] = jb->buf;
			if (jb->buf->rng_numel > 0) { /* a rand call's stream: the next one, as a call would take */
				int64_t base = (int64_t)eng_rng_take(ctx, jb->buf->rng_numel);
				st = eng_buffer_write(jb->buf, &base, sizeof(base));
			}
			break;
		}
	}
	for (int i = 0; i < s->nl && !st; i++) {
		const jlaunch *l = &s->l[i];
		if ((st = eng_cancel_point(ctx, "jit replay launching ", l->k.name)))
			break;
		void *h[ENG_MAX_KERNEL_BUFS];
		for (int q = 0; q < l->k.nbufs; q++)
			h[q] = res[l->b[q]]->handle;
		bk_launch bl = {.nparallel = l->k.nparallel, .cost = l->k.cost};
		bk_err berr;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		st = dev->bk.ops->launch(dev->bk.ctx, l->k.prog, h, l->k.nbufs, &bl, &berr);
		if (!st && dev->bk.ops->synchronize && ctx->debug >= 2) /* as realize: only to time kernels */
			st = dev->bk.ops->synchronize(dev->bk.ctx, &berr);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ctx->stats.kernel_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
		if (st) {
			if (st == ENG_EDEVICE)
				eng_device_fail(dev, st, berr.msg);
			else
				eng_set_error(ctx, st, "%s: jit replay launching %s: %s", dev->name, l->k.name, berr.msg);
			break;
		}
		for (int q = 0; q < l->k.nbufs; q++)
			if ((l->assign >> q) & 1) {
				res[l->b[q]]->version++;
				ctx->in_place_done = true; /* the replay runs to its end now */
			}
		ctx->stats.kernels++;
		ctx->stats.flops += (uint64_t)l->k.flops;
		ctx->stats.bytes += (uint64_t)l->k.bytes;
	}
	if (!st)
		st = eng_device_sync(dev); /* as realize: the call returns with its results computed */
	for (int o = 0; o < j->nout && !st; o++) {
		const jout *jo = &s->outs[o];
		eng_buffer *b = jo->jb >= 0 ? res[jo->jb] : jo->fixed;
		out[o] = buffer_tensor(ctx, b, jo->dtype, jo->ndim, jo->shape);
		if (!out[o])
			st = ctx->err ? ctx->err : ENG_ENOMEM;
	}
	for (int o = 0; o < j->nout; o++)
		eng_buffer_unref(fresh[o]); /* the output tensors hold them now */
	if (st)
		for (int o = 0; o < j->nout; o++) {
			eng_tensor_free(out[o]);
			out[o] = NULL;
		}
	if (res != local)
		free(res);
	return st;
}

eng_status eng_jit_call(eng_jit *j, eng_tensor *const *in, eng_tensor **out)
{
	if (!j)
		return ENG_EINVAL;
	eng_ctx *ctx = j->ctx;
	if (!out || (j->nin && !in))
		return eng_set_error(ctx, ENG_EINVAL, "jit: NULL input or output array");
	for (int o = 0; o < j->nout; o++)
		out[o] = NULL;
	eng_call_begin(ctx);
	if (ctx->err || eng_cancel_point(ctx, "the jit call", NULL))
		return ctx->err;
	if (ctx->capture)
		return eng_set_error(ctx, ENG_ESTATE, "jit: called while another jit call is capturing");
	eng_tensor *bin[JIT_MAX_IO] = {0};
	eng_scope_begin(ctx);
	eng_status st = prepare_inputs(j, in, bin);
	int si = st ? -1 : find_sig(j, bin);
	if (!st && si < 0)
		st = ctx->err ? ctx->err : ENG_EINVAL;
	eng_tensor *res[JIT_MAX_IO] = {0};
	if (!st) {
		jsig *s = &j->sigs[si];
		j->last = si;
		if (s->captured) {
			st = replay(j, s, bin, res);
			j->replays += !st;
			s->replays += !st;
		} else if (s->calls == 0) {
			st = run_fn(j, bin, res);
		} else {
			eng_capture cap = {0};
			ctx->capture = &cap;
			st = run_fn(j, bin, res);
			ctx->capture = NULL;
			if (!st)
				st = build_replay(j, s, &cap, bin, res);
			eng_capture_free(&cap);
			if (!st)
				eng_logmsg(ctx, 1, "jit: captured %d kernels, %zu intermediate bytes planned into %zu", s->nl,
					s->temp_bytes, s->planned_bytes);
		}
		s->calls += !st;
	}
	for (int o = 0; o < j->nout; o++)
		if (res[o])
			eng_keep(res[o]);
	eng_scope_end(ctx);
	if (st) {
		for (int o = 0; o < j->nout; o++)
			eng_tensor_free(res[o]);
		return st;
	}
	for (int o = 0; o < j->nout; o++)
		out[o] = res[o];
	return ENG_OK;
}

/* ---- serving ---- */

/* The signature in[] falls in, or -1 (none yet, or inputs of another dtype or rank). */
static int sig_of(const eng_jit *j, eng_tensor *const *in)
{
	if (!j->typed)
		return -1;
	for (int s = 0; s < j->nsigs; s++) {
		bool same = true;
		for (int k = 0; k < j->nin && same; k++)
			same = in[k] && eng_ndim(in[k]) == j->ndim[k] &&
			       !memcmp(j->sigs[s].shape[k], eng_shape(in[k]), j->ndim[k] * sizeof(int64_t));
		if (same)
			return s;
	}
	return -1;
}

eng_status eng_jit_warmup(eng_jit *j, eng_tensor *const *in)
{
	if (!j)
		return ENG_EINVAL;
	eng_ctx *ctx = j->ctx;
	if (j->nin && !in)
		return eng_set_error(ctx, ENG_EINVAL, "jit: NULL input array");
	for (int round = 0; round < 2; round++) {
		int s = sig_of(j, in);
		if (s >= 0 && j->sigs[s].captured)
			return ENG_OK;
		eng_tensor *out[JIT_MAX_IO];
		eng_status st = eng_jit_call(j, in, out);
		for (int o = 0; o < j->nout && !st; o++)
			eng_tensor_free(out[o]);
		if (st)
			return st;
	}
	int s = sig_of(j, in);
	return s >= 0 && j->sigs[s].captured ? ENG_OK
					     : eng_set_error(ctx, ENG_ESTATE, "jit: warm-up did not capture the step");
}

int eng_jit_signatures(const eng_jit *j) { return j ? j->nsigs : 0; }

eng_status eng_jit_signature_info(const eng_jit *j, int i, eng_jit_sig_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!j || i < 0 || i >= j->nsigs)
		return ENG_EINVAL;
	const jsig *s = &j->sigs[i];
	out->captured = s->captured;
	out->calls = s->calls;
	out->kernels = s->nl;
	out->replays = s->replays;
	out->temp_bytes = s->temp_bytes;
	out->planned_bytes = s->planned_bytes;
	for (int b = 0; b < s->nbufs; b++)
		if (s->bufs[b].cls == J_FIXED && s->bufs[b].buf)
			out->kept_bytes += s->bufs[b].buf->nbytes;
	return ENG_OK;
}

const int64_t *eng_jit_signature_shape(const eng_jit *j, int i, int k, int *ndim)
{
	if (!j || i < 0 || i >= j->nsigs || k < 0 || k >= j->nin)
		return NULL;
	if (ndim)
		*ndim = j->ndim[k];
	return j->sigs[i].shape[k];
}

eng_status eng_jit_drop(eng_jit *j, int i)
{
	if (!j)
		return ENG_EINVAL;
	if (i < 0 || i >= j->nsigs)
		return eng_set_error(j->ctx, ENG_EINVAL, "jit: no signature %d (%d known)", i, j->nsigs);
	sig_drop_capture(&j->sigs[i], j->nout);
	free(j->sigs[i].shape);
	memmove(&j->sigs[i], &j->sigs[i + 1], (size_t)(j->nsigs - i - 1) * sizeof(*j->sigs));
	j->nsigs--;
	j->last = j->last == i ? -1 : j->last > i ? j->last - 1 : j->last;
	return ENG_OK;
}
