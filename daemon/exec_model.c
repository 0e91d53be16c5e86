/* exec_model.c: the jobs, on the executor thread. A model version's engine side: its weights
 * (root tensors), an inference JIT captured for every batch bucket at load, and for a trainable
 * model an optimizer and a training-step JIT over the same weights (so an infer after a step
 * sees the new weights; the executor runs one job at a time, and an update is applied whole or
 * not at all). A batch is stacked along each input's batch axis into one buffer per input (zero
 * rows pad it to its bucket), launched once, and each output sliced back per request. */
#include "executor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm_refs.h"

#define TRAIN_CAPTURES 8 /* training batch shapes kept captured; the oldest goes first */

typedef struct mexec {
	const dmn_mver *v;
	eng_ctx *ctx;
	int nparams;
	eng_tensor **params; /* param nodes in node order, root tensors */
	eng_jit *jit;        /* inference */
	eng_jit *train;      /* training step, or NULL */
	eng_optim *opt;
	dmn_onnx *onnx;      /* an ONNX model's importer, or NULL */
	dmn_states *states;  /* its sequences' state slots, or NULL (no state pairs) */
	uint64_t steps;
	tsd_status build_st; /* why the last graph build failed */
	char build_err[256];
} mexec;

static void set_err(dmn_job *j, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(dmn_job *j, tsd_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	j->st = st;
}

/* An engine failure as a status and message for the client. */
static void eng_fail(dmn_job *j, eng_ctx *ctx, eng_status es, const mexec *me)
{
	if (me && me->build_st != TSD_OK)
		set_err(j, me->build_st, "%s", me->build_err);
	else
		set_err(j, tsd_status_from_eng(es), "%s", eng_errmsg(ctx)[0] ? eng_errmsg(ctx) : eng_strerror(es));
}

/* Build the graph's outputs for the model's ones (the others are freed). in: graph inputs in
 * node order. */
static eng_status build(mexec *me, eng_tensor *const *gin, eng_tensor **out)
{
	const dmn_mver *v = me->v;
	eng_tensor *all[PROTO_GRAPH_MAX_OUTPUTS];
	proto_err e;
	if (me->onnx) /* every output of the file is a model output, in order */
		return dmn_onnx_build(me->onnx, gin, out, &me->build_st, me->build_err, sizeof(me->build_err));
	tsd_status st = proto_graph_build(&v->g, me->ctx, gin, me->params, all, &e);
	if (st != TSD_OK) {
		me->build_st = st;
		snprintf(me->build_err, sizeof(me->build_err), "%s", e.msg);
		return ENG_EINVAL;
	}
	for (int k = 0; k < v->g.noutputs; k++) {
		bool used = false;
		for (int q = 0; q < v->nout; q++)
			if (v->out[q].node == v->g.outputs[k]) {
				out[q] = all[k];
				used = true;
			}
		if (!used)
			eng_tensor_free(all[k]);
	}
	return ENG_OK;
}

static eng_status infer_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nout;
	mexec *me = user;
	eng_tensor *gin[PROTO_GRAPH_MAX_OUTPUTS];
	for (int k = 0; k < nin; k++)
		gin[k] = in[me->v->in_order[k]];
	return build(me, gin, out);
}

static eng_status train_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nout;
	mexec *me = user;
	const dmn_mver *v = me->v;
	eng_tensor *gin[PROTO_GRAPH_MAX_OUTPUTS], *outs[PROTO_GRAPH_MAX_OUTPUTS];
	for (int k = 0; k < nin - 1; k++)
		gin[k] = in[v->in_order[k]];
	eng_status s = build(me, gin, outs);
	if (s)
		return s;
	eng_tensor *pred = outs[v->train_out], *target = in[nin - 1], *loss;
	for (int q = 0; q < v->nout; q++)
		if (q != v->train_out)
			eng_tensor_free(outs[q]);
	if (v->loss == DMN_LOSS_MSE)
		loss = eng_loss_mse(pred, target);
	else if (v->loss == DMN_LOSS_CE)
		loss = eng_loss_cross_entropy(pred, target);
	else
		loss = eng_loss_sparse_cross_entropy(pred, target, 0.0, -100);
	if (!loss)
		return eng_error(ctx);
	eng_optim_zero_grad(me->opt);
	s = eng_backward(loss);
	if (!s)
		s = eng_optim_step(me->opt, &loss, 1);
	out[0] = loss;
	return s;
}

/* ---- buffers of a batch ---- */

static void free_buf(void *arg, void *data)
{
	(void)arg;
	free(data);
}

/* node's shape with the batch dimension set to rows; the byte size into *nbytes. */
static int shape_of(const proto_gnode *n, int64_t rows, int64_t *shape, size_t *nbytes)
{
	size_t numel = 1;
	for (int d = 0; d < n->ndim; d++) {
		shape[d] = n->shape[d] == PROTO_BATCH ? rows : n->shape[d];
		numel *= (size_t)shape[d];
	}
	*nbytes = numel * eng_dtype_size(n->dtype);
	return n->ndim;
}

/* Bytes before the batch axis (outer blocks) and in one row after it (inner), of a tensor of
 * node n's shape with the batch size taken out. */
static void split_at(const proto_gnode *n, int axis, size_t *outer, size_t *inner)
{
	*outer = 1;
	*inner = eng_dtype_size(n->dtype);
	for (int d = 0; d < n->ndim; d++)
		if (d < axis)
			*outer *= (size_t)n->shape[d];
		else if (d > axis)
			*inner *= (size_t)n->shape[d];
}

/* A zero-copy input over an aligned buffer: the engine frees it when done. NULL: ENOMEM. */
static eng_tensor *host_input(eng_ctx *ctx, const proto_gnode *n, int64_t rows, void **data)
{
	int64_t shape[ENG_MAX_DIMS];
	size_t nbytes;
	int nd = shape_of(n, rows, shape, &nbytes);
	void *buf = aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64);
	if (!buf)
		return NULL;
	memset(buf, 0, nbytes);
	eng_tensor *t = eng_from_host(ctx, n->dtype, nd, shape, buf, nbytes, free_buf, NULL);
	if (!t) {
		free(buf);
		return NULL;
	}
	*data = buf;
	return t;
}

/* The outputs of po[0..n) that r asked for in its shared-memory regions: written there (the
 * region and span were checked on the loop; an unsealed one through the SIGBUS guard) and
 * described in *extra's "shm_outputs"; the rest stay in po, compacted; their count is returned.
 * *ok false when out of memory; *gone names a region found shrunk. */
static int shm_outputs(const dmn_req *r, proto_out *po, int n, cJSON **extra, bool *ok, const char **gone)
{
	cJSON *x = cJSON_CreateObject(), *a = x ? cJSON_AddArrayToObject(x, "shm_outputs") : NULL;
	int kept = 0;
	for (int q = 0; q < n; q++) {
		const dmn_shm_out *o = dmn_shm_out_of(r, po[q].name);
		if (!o) {
			po[kept++] = po[q];
			continue;
		}
		if (!dmn_shm_unsealed(o->g))
			memcpy(o->dst, po[q].data, o->nbytes);
		else if (!dmn_copy_guarded(o->dst, po[q].data, o->nbytes))
			*gone = dmn_shm_name(o->g);
		cJSON *e = cJSON_CreateObject();
		if (!e || !a) {
			cJSON_Delete(e);
			*ok = false;
			continue;
		}
		cJSON_AddItemToArray(a, e);
		cJSON_AddStringToObject(e, "name", o->name);
		cJSON_AddStringToObject(e, "region", dmn_shm_name(o->g));
		cJSON_AddNumberToObject(e, "offset", (double)o->offset);
		cJSON_AddNumberToObject(e, "nbytes", (double)o->nbytes);
		cJSON_AddStringToObject(e, "dtype", tsd_dtype_name(po[q].dtype));
		cJSON *sh = cJSON_AddArrayToObject(e, "shape");
		for (int d = 0; sh && d < po[q].ndim; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)po[q].shape[d]));
	}
	*extra = x;
	return kept;
}

static void shm_release(void *arg, void *data)
{
	(void)data;
	dmn_shm_unref(arg);
}

/* A lone request's input that lies in a shared-memory region and fills the launch (no batch
 * axis, or its rows are the bucket): the engine reads it where it is, holding the region until
 * it lets go (no copy of a camera frame). 1 with *out set, 0 when it must be copied, -1 out of
 * memory. */
static int shm_input(eng_ctx *ctx, const dmn_job *j, const proto_gnode *n, const char *name, int axis,
		     eng_tensor **out)
{
	const dmn_req *r = j->reqs[0];
	if (j->nreq != 1 || !r->shm || (axis >= 0 && r->rows != j->bucket))
		return 0;
	const proto_tensor *t = proto_msg_tensor(&r->pm, name);
	dmn_shm_region *g = t ? dmn_shm_region_of(r, t->data) : NULL;
	if (!g || (uintptr_t)t->data % 64)
		return 0;
	int64_t shape[ENG_MAX_DIMS];
	size_t nbytes;
	int nd = shape_of(n, j->bucket, shape, &nbytes);
	if (nbytes != t->nbytes)
		return 0;
	dmn_shm_ref(g);
	if (!(*out = eng_from_host(ctx, n->dtype, nd, shape, (void *)t->data, nbytes, shm_release, g))) {
		dmn_shm_unref(g);
		return -1;
	}
	return 1;
}

/* ---- load and free ---- */

static void mexec_free(mexec *me)
{
	if (!me)
		return;
	eng_jit_destroy(me->train);
	eng_jit_destroy(me->jit);
	eng_optim_destroy(me->opt);
	dmn_onnx_free(me->onnx);
	dmn_states_free(me->states);
	for (int k = 0; k < me->nparams; k++)
		eng_tensor_free(me->params[k]);
	free(me->params);
	free(me);
}

void dmn_run_free(dmn_exec *e, dmn_job *j)
{
	(void)e;
	mexec_free(j->ver->eng);
	j->ver->eng = NULL;
}

void dmn_run_seqfree(dmn_exec *e, dmn_job *j)
{
	(void)e;
	const mexec *me = j->ver->eng;
	for (int k = 0; me && k < j->nslots; k++)
		dmn_states_clear(me->states, j->slots[k]);
}

/* The bytes the memory limit leaves for new sequence state (UINT64_MAX without a limit). */
static uint64_t state_room(dmn_exec *e, const mexec *me)
{
	uint64_t lim = e->srv->mem_limit, used;
	if (!lim)
		return UINT64_MAX;
	eng_stats st;
	eng_get_stats(e->ctx, &st);
	used = st.mem_live + dmn_states_bytes(me->states);
	return used < lim ? lim - used : 0;
}

/* Input q's state pair in a batch of sequence steps (seq), else -1. */
static int state_of_input(const dmn_mver *v, bool seq, int q)
{
	for (int k = 0; seq && k < v->nstate; k++)
		if (v->state[k].in == q)
			return k;
	return -1;
}

static int state_of_output(const dmn_mver *v, bool seq, int q)
{
	for (int k = 0; seq && k < v->nstate; k++)
		if (v->state[k].out == q)
			return k;
	return -1;
}

static eng_tensor *find_named(const eng_named *ts, int n, const char *name)
{
	for (int k = 0; k < n; k++)
		if (!strcmp(ts[k].name, name))
			return ts[k].t;
	return NULL;
}

/* The weights: from the message where given, else from the file; each checked. */
static bool load_params(dmn_exec *e, dmn_job *j, mexec *me)
{
	const dmn_mver *v = j->ver;
	const proto_msg *pm = j->nreq ? &j->reqs[0]->pm : NULL;
	eng_named *file = NULL;
	int nfile = 0;
	eng_scope_begin(e->ctx);
	if (v->weights_path[0]) {
		eng_status s = eng_safetensors_load(e->ctx, v->weights_path, &file, &nfile);
		if (s) {
			set_err(j, s == ENG_ENOMEM ? TSD_OUT_OF_MEMORY : TSD_BAD_REQUEST, "weights: %s", eng_errmsg(e->ctx));
			eng_scope_end(e->ctx);
			return false;
		}
	}
	bool ok = true;
	for (int i = 0, k = 0; ok && i < v->g.nnodes; i++) {
		const proto_gnode *n = &v->g.nodes[i];
		if (n->op != PROTO_G_PARAM)
			continue;
		const proto_tensor *mt = pm ? proto_msg_tensor(pm, n->id) : NULL;
		eng_tensor *t = mt ? eng_from_data(e->ctx, mt->dtype, mt->ndim, mt->shape, mt->data)
				   : find_named(file, nfile, n->id);
		if (!t) {
			set_err(j, mt ? TSD_OUT_OF_MEMORY : TSD_BAD_REQUEST, "param \"%s\": %s", n->id,
				mt ? eng_errmsg(e->ctx) : "not in the weights file");
			ok = false;
			break;
		}
		bool same = eng_tensor_dtype(t) == n->dtype && eng_ndim(t) == n->ndim &&
			    !memcmp(eng_shape(t), n->shape, sizeof(int64_t) * (size_t)n->ndim);
		if (!same) {
			set_err(j, TSD_SHAPE_MISMATCH, "param \"%s\": the weights are %s rank %d, the graph wants %s rank %d",
				n->id, eng_dtype_name(eng_tensor_dtype(t)), eng_ndim(t), eng_dtype_name(n->dtype), n->ndim);
			ok = false;
			break;
		}
		me->params[k++] = eng_keep_root(eng_contiguous(t));
	}
	eng_named_free(file, nfile);
	eng_scope_end(e->ctx);
	if (ok) {
		eng_status s = me->nparams ? eng_realize(me->params, me->nparams) : ENG_OK;
		if (s) {
			eng_fail(j, e->ctx, s, NULL);
			ok = false;
		}
	}
	return ok;
}

/* Warm-up inputs are host memory the engine uses in place, outside its limit's count: a bucket
 * whose inputs alone pass what the limit has left is refused before they are allocated. */
static bool inputs_fit(dmn_exec *e, dmn_job *j, int rows)
{
	uint64_t lim = e->srv->mem_limit, need = 0;
	if (!lim)
		return true;
	for (int q = 0; q < j->ver->nin; q++) {
		int64_t shape[ENG_MAX_DIMS];
		size_t nb;
		shape_of(&j->ver->g.nodes[j->ver->in[q].node], rows, shape, &nb);
		need += nb;
	}
	eng_stats st;
	eng_get_stats(e->ctx, &st);
	if (need <= lim && st.mem_live <= lim - need)
		return true;
	set_err(j, TSD_OUT_OF_MEMORY,
		"inputs of %llu bytes (bucket %d) would exceed the memory limit of %llu bytes (%llu bytes live)",
		(unsigned long long)need, rows, (unsigned long long)lim, (unsigned long long)st.mem_live);
	return false;
}

/* Capture the inference JIT for every bucket, with zero inputs made the way requests' are. */
static bool warm(dmn_exec *e, dmn_job *j, mexec *me)
{
	const dmn_mver *v = j->ver;
	for (int b = 0; b < v->nbuckets; b++) {
		if (!inputs_fit(e, j, v->buckets[b]))
			return false;
		eng_scope_begin(e->ctx);
		eng_tensor *in[PROTO_GRAPH_MAX_OUTPUTS];
		bool ok = true;
		for (int q = 0; q < v->nin && ok; q++) {
			void *data;
			ok = (in[q] = host_input(e->ctx, &v->g.nodes[v->in[q].node], v->buckets[b], &data)) != NULL;
		}
		eng_status s = ok ? eng_jit_warmup(me->jit, in) : ENG_ENOMEM;
		eng_scope_end(e->ctx);
		if (s) {
			eng_fail(j, e->ctx, s, me);
			snprintf(j->err + strlen(j->err), sizeof(j->err) - strlen(j->err), " (bucket %d)", v->buckets[b]);
			return false;
		}
	}
	return true;
}

void dmn_run_load(dmn_exec *e, dmn_job *j)
{
	dmn_mver *v = j->ver;
	mexec *me = calloc(1, sizeof(*me));
	j->st = TSD_OK;
	if (!me || !(me->params = calloc((size_t)v->g.nparams + 1, sizeof(eng_tensor *)))) {
		free(me);
		set_err(j, TSD_OUT_OF_MEMORY, "out of memory");
		return;
	}
	me->v = v;
	me->ctx = e->ctx;
	me->nparams = v->g.nparams;
	if (v->onnx && (j->st = dmn_onnx_open(e->ctx, v, j->nreq ? &j->reqs[0]->pm : NULL, &me->onnx, j->err,
					      sizeof(j->err))))
		goto fail;
	if (v->nstate) { /* an ONNX model's ports came just now */
		if ((j->st = dmn_state_resolve(v, j->err, sizeof(j->err))))
			goto fail;
		if (!(me->states = dmn_states_new(v))) {
			set_err(j, TSD_OUT_OF_MEMORY, "out of memory for %d sequences' state", v->max_sequences);
			goto fail;
		}
	}
	if (!load_params(e, j, me))
		goto fail;
	if (v->trainable) {
		for (int k = 0; k < me->nparams; k++)
			eng_set_requires_grad(me->params[k], true);
		if (!(me->opt = eng_optim_create(e->ctx, me->params, me->nparams, &v->optim))) {
			eng_fail(j, e->ctx, eng_error(e->ctx), NULL);
			goto fail;
		}
		eng_jit_opts to;
		eng_jit_opts_default(&to);
		to.max_captures = TRAIN_CAPTURES;
		if (!(me->train = eng_jit_create(e->ctx, train_fn, me, v->nin + 1, 1, &to))) {
			eng_fail(j, e->ctx, eng_error(e->ctx), NULL);
			goto fail;
		}
	}
	eng_jit_opts o;
	eng_jit_opts_default(&o);
	o.max_captures = v->nbuckets;
	if (!(me->jit = eng_jit_create(e->ctx, infer_fn, me, v->nin, v->nout, &o))) {
		eng_fail(j, e->ctx, eng_error(e->ctx), NULL);
		goto fail;
	}
	if (!warm(e, j, me))
		goto fail;
	v->eng = me;
	return;
fail:
	mexec_free(me);
}

/* ---- infer ---- */

/* Where request k's rows start in the batch, per request (rows summed before it). */
static void row_starts(const dmn_job *j, int64_t *start)
{
	int64_t at = 0;
	for (int k = 0; k < j->nreq; k++) {
		start[k] = at;
		at += j->reqs[k]->rows;
	}
}

static void answer_error(dmn_job *j, tsd_status st, const char *msg)
{
	uint64_t now = eng_now_ns();
	for (int k = 0; k < j->nreq; k++) {
		dmn_req *r = j->reqs[k];
		r->st = st;
		if (st == TSD_CANCELLED && r->deadline && now >= r->deadline) {
			r->st = TSD_TIMEOUT;
			snprintf(r->err, sizeof(r->err), "timed out while it ran");
		} else {
			snprintf(r->err, sizeof(r->err), "%s", msg);
		}
	}
}

void dmn_run_infer(dmn_exec *e, dmn_job *j)
{
	const dmn_mver *v = j->ver;
	mexec *me = v->eng;
	eng_ctx *ctx = e->ctx;
	int64_t start[j->nreq];
	row_starts(j, start);
	me->build_st = TSD_OK;
	eng_scope_begin(ctx);
	eng_tensor *in[PROTO_GRAPH_MAX_OUTPUTS], *out[PROTO_GRAPH_MAX_OUTPUTS];
	void *obuf[PROTO_GRAPH_MAX_OUTPUTS] = {0};
	eng_status s = ENG_OK;
	bool seq = j->nreq && j->reqs[0]->seq; /* a batch is all sequence steps or none */
	uint64_t room = seq ? state_room(e, me) : 0;
	for (int q = 0; q < v->nin && !s; q++) {
		const proto_gnode *n = &v->g.nodes[v->in[q].node];
		int sk = state_of_input(v, seq, q);
		int zc = sk >= 0 ? 0 : shm_input(ctx, j, n, v->in[q].name, v->in[q].axis, &in[q]);
		if (zc) {
			if (zc < 0)
				s = ENG_ENOMEM;
			continue;
		}
		uint8_t *buf;
		if (!(in[q] = host_input(ctx, n, j->bucket, (void **)&buf))) {
			s = ENG_ENOMEM;
			break;
		}
		size_t outer, inner;
		split_at(n, v->in[q].axis, &outer, &inner);
		for (int k = 0; k < j->nreq; k++) {
			const dmn_req *r = j->reqs[k];
			/* a sequence step's state from its slot, else the request's tensor */
			const uint8_t *src = sk >= 0 ? dmn_states_input(me->states, v, r, sk, room, me->build_err,
								       sizeof(me->build_err))
						     : proto_msg_tensor(&r->pm, v->in[q].name)->data;
			if (!src) {
				me->build_st = TSD_OUT_OF_MEMORY;
				s = ENG_ENOMEM;
				break;
			}
			if (v->in[q].axis < 0) {
				memcpy(buf, src, outer * inner);
				continue;
			}
			for (size_t o = 0; o < outer; o++)
				memcpy(buf + (o * (size_t)j->bucket + (size_t)start[k]) * inner,
				       src + o * (size_t)r->rows * inner, (size_t)r->rows * inner);
		}
	}
	if (!s)
		s = eng_jit_call(me->jit, in, out);
	int64_t shapes[PROTO_GRAPH_MAX_OUTPUTS][ENG_MAX_DIMS];
	size_t nbytes[PROTO_GRAPH_MAX_OUTPUTS];
	for (int q = 0; q < v->nout && !s; q++) {
		shape_of(&v->g.nodes[v->out[q].node], j->bucket, shapes[q], &nbytes[q]);
		if (!(obuf[q] = malloc(nbytes[q] ? nbytes[q] : 1)))
			s = ENG_ENOMEM;
		else
			s = eng_tensor_read(out[q], obuf[q], nbytes[q]);
	}
	/* the sequences' next states, once every output was read: a step applies whole or not at all */
	for (int k = 0; seq && k < v->nstate && !s; k++)
		dmn_states_update(me->states, v, j, k, obuf[v->state[k].out]);
	if (seq)
		dmn_states_ended(me->states, j);
	if (s) {
		eng_fail(j, ctx, s, me);
		answer_error(j, j->st, j->err);
	} else {
		/* each request's slice of every output */
		for (int k = 0; k < j->nreq; k++) {
			dmn_req *r = j->reqs[k];
			if (atomic_load(&r->gone))
				continue;
			proto_out po[PROTO_GRAPH_MAX_OUTPUTS];
			int64_t oshape[PROTO_GRAPH_MAX_OUTPUTS][ENG_MAX_DIMS];
			void *tmp[PROTO_GRAPH_MAX_OUTPUTS] = {0};
			bool ok = true;
			int npo = 0;
			for (int oq = 0; oq < v->nout; oq++) {
				if (state_of_output(v, seq, oq) >= 0 && !r->seq_state)
					continue; /* its state stays in the daemon */
				int q = npo++;
				const proto_gnode *n = &v->g.nodes[v->out[oq].node];
				int ax = v->out[oq].axis;
				memcpy(oshape[q], shapes[oq], sizeof(oshape[q]));
				po[q] = (proto_out){.name = v->out[oq].name, .dtype = n->dtype, .ndim = n->ndim,
						    .shape = oshape[q], .data = obuf[oq]};
				if (ax < 0)
					continue;
				oshape[q][ax] = r->rows;
				size_t outer, inner;
				split_at(n, ax, &outer, &inner);
				if (outer == 1) { /* contiguous rows */
					po[q].data = (uint8_t *)obuf[oq] + (size_t)start[k] * inner;
					continue;
				}
				uint8_t *t = tmp[q] = malloc(outer * (size_t)r->rows * inner + 1);
				if (!t) {
					ok = false;
					break;
				}
				for (size_t o = 0; o < outer; o++)
					memcpy(t + o * (size_t)r->rows * inner,
					       (uint8_t *)obuf[oq] + (o * (size_t)j->bucket + (size_t)start[k]) * inner,
					       (size_t)r->rows * inner);
				po[q].data = t;
			}
			cJSON *extra = NULL;
			const char *gone = NULL;
			if (ok && r->shm)
				npo = shm_outputs(r, po, npo, &extra, &ok, &gone);
			if (ok && !extra) /* the version that answered (the Open Inference Protocol's model_version) */
				extra = cJSON_CreateObject();
			if (extra)
				cJSON_AddNumberToObject(extra, "version", r->ver);
			r->st = ok ? TSD_OK : TSD_OUT_OF_MEMORY;
			r->reply = ok ? dmn_reply_msg(&r->pm, TSD_OK, NULL, extra, po, npo, 0) : NULL;
			if (!ok)
				cJSON_Delete(extra);
			if (ok && !r->reply)
				r->st = TSD_OUT_OF_MEMORY;
			if (ok && gone) {
				if (r->reply)
					nng_msg_free(r->reply);
				r->reply = NULL;
				r->st = TSD_BAD_REQUEST;
				snprintf(r->err, sizeof(r->err), "shared memory region \"%s\" was shrunk by its owner under the output",
					 gone);
			} else if (r->st != TSD_OK) {
				snprintf(r->err, sizeof(r->err), "out of memory building the reply");
			}
			for (int q = 0; q < v->nout; q++)
				free(tmp[q]);
		}
	}
	for (int q = 0; q < v->nout; q++)
		free(obuf[q]);
	eng_scope_end(ctx);
}

/* ---- train.step ---- */

/* Make room for a new training shape: drop the oldest capture when all are taken. */
static void train_room(mexec *me, eng_tensor *const *in, int n)
{
	int nsig = eng_jit_signatures(me->train);
	if (nsig < TRAIN_CAPTURES)
		return;
	for (int i = 0; i < nsig; i++) {
		bool same = true;
		for (int k = 0; k < n && same; k++) {
			int nd;
			const int64_t *sh = eng_jit_signature_shape(me->train, i, k, &nd);
			same = sh && nd == eng_ndim(in[k]) && !memcmp(sh, eng_shape(in[k]), sizeof(int64_t) * (size_t)nd);
		}
		if (same)
			return;
	}
	eng_jit_drop(me->train, 0);
}

void dmn_run_train(dmn_exec *e, dmn_job *j)
{
	const dmn_mver *v = j->ver;
	mexec *me = v->eng;
	eng_ctx *ctx = e->ctx;
	dmn_req *r = j->reqs[0];
	me->build_st = TSD_OK;
	j->st = TSD_OK;
	const cJSON *lr = cJSON_GetObjectItemCaseSensitive(r->pm.json, "lr");
	eng_status s = lr ? eng_optim_set_lr(me->opt, lr->valuedouble) : ENG_OK;
	eng_scope_begin(ctx);
	eng_tensor *in[PROTO_GRAPH_MAX_OUTPUTS + 1], *out[1];
	for (int q = 0; q <= v->nin && !s; q++) {
		const proto_tensor *t = proto_msg_tensor(&r->pm, q < v->nin ? v->in[q].name : v->target);
		if (!(in[q] = eng_from_data(ctx, t->dtype, t->ndim, t->shape, t->data)))
			s = eng_error(ctx);
	}
	double loss = 0;
	if (!s) {
		train_room(me, in, v->nin + 1);
		s = eng_jit_call(me->train, in, out);
	}
	if (!s) {
		loss = eng_item(out[0]);
		s = eng_error(ctx);
	}
	eng_scope_end(ctx);
	if (s) {
		eng_fail(j, ctx, s, me);
		answer_error(j, j->st, j->err);
		return;
	}
	me->steps++;
	cJSON *x = cJSON_CreateObject();
	cJSON_AddNumberToObject(x, "loss", loss);
	cJSON_AddNumberToObject(x, "step", (double)me->steps);
	r->st = TSD_OK;
	if (!(r->reply = dmn_reply_msg(&r->pm, TSD_OK, NULL, x, NULL, 0, 0)))
		answer_error(j, TSD_OUT_OF_MEMORY, "out of memory building the reply");
}

/* ---- model.save ---- */

void dmn_run_save(dmn_exec *e, dmn_job *j)
{
	const dmn_mver *v = j->ver;
	mexec *me = v->eng;
	dmn_req *r = j->reqs[0];
	eng_named named[me->nparams + 1];
	proto_out po[me->nparams + 1];
	void *bufs[me->nparams + 1];
	for (int i = 0, k = 0; i < v->g.nnodes; i++)
		if (v->g.nodes[i].op == PROTO_G_PARAM) {
			named[k] = (eng_named){.name = v->g.nodes[i].id, .t = me->params[k]};
			k++;
		}
	j->st = TSD_OK;
	cJSON *x = cJSON_CreateObject();
	if (j->save_path[0]) {
		eng_status s = eng_safetensors_save(e->ctx, j->save_path, named, me->nparams);
		if (s) {
			cJSON_Delete(x);
			eng_fail(j, e->ctx, s, NULL);
			dmn_models_scrub(&j->srv->cfg, j->err); /* the reply names the relative path only */
			answer_error(j, j->st, j->err);
			return;
		}
		cJSON_AddStringToObject(x, "path", dmn_json_str(r->pm.json, "path"));
		r->reply = dmn_reply_msg(&r->pm, TSD_OK, NULL, x, NULL, 0, 0);
	} else {
		int n = 0;
		eng_status s = ENG_OK;
		for (; n < me->nparams && !s; n++) {
			eng_tensor *t = named[n].t;
			size_t nb = (size_t)eng_numel(t) * eng_dtype_size(eng_tensor_dtype(t));
			if (!(bufs[n] = malloc(nb + 1))) {
				s = ENG_ENOMEM;
				break;
			}
			s = eng_tensor_read(t, bufs[n], nb);
			po[n] = (proto_out){.name = named[n].name, .dtype = eng_tensor_dtype(t), .ndim = eng_ndim(t),
					    .shape = eng_shape(t), .data = bufs[n]};
		}
		if (s)
			eng_fail(j, e->ctx, s, NULL);
		else
			r->reply = dmn_reply_msg(&r->pm, TSD_OK, NULL, x, po, n, (size_t)j->srv->cfg.max_message_bytes);
		if (s)
			cJSON_Delete(x);
		for (int k = 0; k < n && k < me->nparams; k++)
			free(bufs[k]);
		if (s) {
			answer_error(j, j->st, j->err);
			return;
		}
	}
	r->st = TSD_OK;
	if (!r->reply)
		answer_error(j, TSD_OUT_OF_MEMORY, "out of memory building the reply");
}

/* ---- realize ---- */

void dmn_run_realize(dmn_exec *e, dmn_job *j)
{
	eng_ctx *ctx = e->ctx;
	const proto_graph *g = &j->graph;
	dmn_req *r = j->reqs[0];
	eng_tensor **gin = calloc((size_t)g->ninputs + 1, sizeof(*gin)), **gpar = calloc((size_t)g->nparams + 1, sizeof(*gpar));
	eng_tensor *outs[PROTO_GRAPH_MAX_OUTPUTS];
	void *bufs[PROTO_GRAPH_MAX_OUTPUTS] = {0};
	proto_out po[PROTO_GRAPH_MAX_OUTPUTS];
	j->st = TSD_OK;
	eng_status s = gin && gpar ? ENG_OK : ENG_ENOMEM;
	eng_scope_begin(ctx);
	for (int i = 0, ki = 0, kp = 0; i < g->nnodes && !s; i++) {
		const proto_gnode *n = &g->nodes[i];
		if (n->op != PROTO_G_INPUT && n->op != PROTO_G_PARAM)
			continue;
		const proto_tensor *t = proto_msg_tensor(&r->pm, n->id);
		eng_tensor *x = eng_from_data(ctx, t->dtype, t->ndim, t->shape, t->data);
		if (!x)
			s = eng_error(ctx);
		else if (n->op == PROTO_G_INPUT)
			gin[ki++] = x;
		else
			gpar[kp++] = x;
	}
	proto_err pe;
	tsd_status ts = TSD_OK;
	if (!s && (ts = proto_graph_build(g, ctx, gin, gpar, outs, &pe)) != TSD_OK)
		set_err(j, ts, "graph: %s", pe.msg);
	if (!s && !ts)
		s = eng_realize(outs, g->noutputs);
	for (int k = 0; k < g->noutputs && !s && !ts; k++) {
		eng_tensor *t = outs[k];
		size_t nb = (size_t)eng_numel(t) * eng_dtype_size(eng_tensor_dtype(t));
		if (!(bufs[k] = malloc(nb + 1)))
			s = ENG_ENOMEM;
		else
			s = eng_tensor_read(t, bufs[k], nb);
		po[k] = (proto_out){.name = g->nodes[g->outputs[k]].id, .dtype = eng_tensor_dtype(t),
				    .ndim = eng_ndim(t), .shape = eng_shape(t), .data = bufs[k]};
	}
	if (s)
		eng_fail(j, ctx, s, NULL);
	if (!j->st) {
		r->st = TSD_OK;
		r->reply = dmn_reply_msg(&r->pm, TSD_OK, NULL, NULL, po, g->noutputs, (size_t)j->srv->cfg.max_message_bytes);
		if (!r->reply)
			set_err(j, TSD_OUT_OF_MEMORY, "out of memory building the reply");
	}
	if (j->st)
		answer_error(j, j->st, j->err);
	eng_scope_end(ctx);
	for (int k = 0; k < g->noutputs; k++)
		free(bufs[k]);
	free(gin);
	free(gpar);
}
