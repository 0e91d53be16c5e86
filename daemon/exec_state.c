/* exec_state.c: sequences' implicit state on the executor (docs/PROTOCOL.md, "Sequences"). Each
 * live sequence has a slot (numbered by the loop, sequence.c) holding one engine tensor per state
 * pair of its model: the output of its last step, kept on the device. A batch of sequence steps
 * gathers the slots' tensors (or each starting sequence's initial value) along the state's batch
 * axis into the launch's input, and scatters the state output back into the slots: a lone step
 * that fills its launch passes its tensor in and keeps the output as it is (no copy at all);
 * a batch concatenates and slices on the device. Nothing is read back to the host unless the
 * request asks for its state. Also: a version's state pairs checked against its ports. */
#include "executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dmn_states {
	int nslots, nstate;
	eng_tensor **t; /* [slot * nstate + k], root tensors or NULL (not started) */
};

static tsd_status bad(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	snprintf(err, errlen, fmt, a, b);
	return TSD_BAD_REQUEST;
}

tsd_status dmn_state_resolve(dmn_mver *v, char *err, size_t errlen)
{
	for (int k = 0; k < v->nstate; k++) {
		struct dmn_state_pair *p = &v->state[k];
		p->in = p->out = -1;
		for (int q = 0; q < v->nin; q++)
			if (!strcmp(v->in[q].name, p->input))
				p->in = q;
		for (int q = 0; q < v->nout; q++)
			if (!strcmp(v->out[q].name, p->output))
				p->out = q;
		if (p->in < 0)
			return bad(err, errlen, "sequence.state: \"%s\" is not an input of the model%s", p->input, "");
		if (p->out < 0)
			return bad(err, errlen, "sequence.state: \"%s\" is not an output of the model%s", p->output, "");
		for (int o = 0; o < k; o++)
			if (v->state[o].in == p->in || v->state[o].out == p->out)
				return bad(err, errlen, "sequence.state: \"%s\" or \"%s\" is in two state pairs", p->input,
					   p->output);
		const proto_gnode *a = &v->g.nodes[v->in[p->in].node], *b = &v->g.nodes[v->out[p->out].node];
		bool same = a->dtype == b->dtype && a->ndim == b->ndim && v->in[p->in].axis == v->out[p->out].axis;
		for (int d = 0; same && d < a->ndim; d++)
			same = a->shape[d] == b->shape[d];
		if (!same)
			return bad(err, errlen,
				   "sequence.state: input \"%s\" and output \"%s\" differ in dtype, shape or batch axis", p->input,
				   p->output);
		if (v->batched && v->in[p->in].axis < 0)
			return bad(err, errlen, "sequence.state: \"%s\" has no batch axis in a batched model%s", p->input, "");
		if (p->init_data) {
			int64_t row = 1;
			for (int d = 0; d < a->ndim; d++)
				if (a->shape[d] != PROTO_BATCH)
					row *= a->shape[d];
			if (a->dtype != ENG_F32)
				return bad(err, errlen, "sequence.state: \"%s\" is %s: initial values need FP32 (else give one number)",
					   p->input, eng_dtype_name(a->dtype));
			if (row != p->init_n) {
				char n[64];
				snprintf(n, sizeof(n), "%lld", (long long)row);
				return bad(err, errlen, "sequence.state: \"%s\"'s init needs %s numbers (one row)", p->input, n);
			}
		}
	}
	return TSD_OK;
}

dmn_states *dmn_states_new(const dmn_mver *v)
{
	dmn_states *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->nslots = v->max_sequences;
	st->nstate = v->nstate;
	if (!(st->t = calloc((size_t)st->nslots * (size_t)st->nstate, sizeof(*st->t)))) {
		free(st);
		return NULL;
	}
	return st;
}

void dmn_states_clear(dmn_states *st, int slot)
{
	if (!st || slot < 0 || slot >= st->nslots)
		return;
	for (int k = 0; k < st->nstate; k++) {
		eng_tensor_free(st->t[slot * st->nstate + k]);
		st->t[slot * st->nstate + k] = NULL;
	}
}

void dmn_states_free(dmn_states *st)
{
	if (!st)
		return;
	for (int s = 0; s < st->nslots; s++)
		dmn_states_clear(st, s);
	free(st->t);
	free(st);
}

/* node's shape with rows on the batch axis. */
static int rows_shape(const proto_gnode *n, int64_t rows, int64_t *shape)
{
	for (int d = 0; d < n->ndim; d++)
		shape[d] = n->shape[d] == PROTO_BATCH ? rows : n->shape[d];
	return n->ndim;
}

/* A starting sequence's state: the pair's initial value with rows rows (in the current scope). */
static eng_tensor *initial(eng_ctx *ctx, const struct dmn_state_pair *p, const proto_gnode *n, int axis, int64_t rows)
{
	int64_t shape[ENG_MAX_DIMS];
	int nd = rows_shape(n, rows, shape);
	if (!p->init_data)
		return eng_full(ctx, n->dtype, nd, shape, p->init);
	/* one row's values repeated along the batch axis: outer blocks x rows x inner */
	size_t outer = 1, inner = 1, numel = 1;
	for (int d = 0; d < nd; d++) {
		numel *= (size_t)shape[d];
		if (axis >= 0 && d < axis)
			outer *= (size_t)shape[d];
		else if (d > axis)
			inner *= (size_t)shape[d];
	}
	float *buf = malloc(numel * sizeof(float) + 1);
	if (!buf)
		return NULL;
	if (axis < 0) {
		memcpy(buf, p->init_data, numel * sizeof(float));
	} else {
		for (size_t o = 0; o < outer; o++)
			for (int64_t r = 0; r < rows; r++)
				memcpy(buf + (o * (size_t)rows + (size_t)r) * inner, p->init_data + o * inner, inner * sizeof(float));
	}
	eng_tensor *t = eng_from_data(ctx, ENG_F32, nd, shape, buf);
	free(buf);
	return t;
}

/* parts concatenated along axis; a kernel reads at most CAT_FAN of them (the engine's kernels
 * take a bounded number of buffers), so larger batches are stacked in realized groups first. */
#define CAT_FAN 16
static eng_tensor *cat_tree(eng_tensor **parts, int n, int axis)
{
	while (n > CAT_FAN) {
		int groups = 0;
		for (int i = 0; i < n; i += CAT_FAN) {
			int k = n - i < CAT_FAN ? n - i : CAT_FAN;
			eng_tensor *g = k > 1 ? eng_cat(parts + i, k, axis) : parts[i];
			if (!g)
				return NULL;
			if (eng_realize(&g, 1) != ENG_OK) /* one at a time: together they would fuse into one kernel */
				return NULL;
			parts[groups++] = g;
		}
		n = groups;
	}
	return n > 1 ? eng_cat(parts, n, axis) : parts[0];
}

eng_tensor *dmn_states_gather(dmn_states *st, eng_ctx *ctx, const dmn_mver *v, const dmn_job *j, int k)
{
	const struct dmn_state_pair *p = &v->state[k];
	const proto_gnode *n = &v->g.nodes[v->in[p->in].node];
	int axis = v->in[p->in].axis;
	eng_tensor *parts[j->nreq + 1];
	int64_t rows = 0;
	for (int i = 0; i < j->nreq; i++) {
		const dmn_req *r = j->reqs[i];
		eng_tensor *have = st->t[r->seq_slot * st->nstate + k];
		parts[i] = !r->seq_start && have ? have : initial(ctx, p, n, axis, r->rows);
		if (!parts[i])
			return NULL;
		rows += r->rows;
	}
	eng_tensor *in;
	if (j->nreq == 1 && (axis < 0 || rows == j->bucket))
		in = parts[0];
	else if (!(in = cat_tree(parts, j->nreq, axis)))
		return NULL;
	if (axis >= 0 && rows < j->bucket) { /* zero rows pad it to its bucket */
		int64_t pads[ENG_MAX_DIMS][2] = {{0}};
		pads[axis][1] = j->bucket - rows;
		if (!(in = eng_pad(in, pads)))
			return NULL;
	}
	if (in == parts[0] && in == st->t[j->reqs[0]->seq_slot * st->nstate + k])
		return in; /* realized already: the last step's output */
	return eng_realize(&in, 1) == ENG_OK ? in : NULL;
}

eng_status dmn_states_next(const dmn_states *st, eng_ctx *ctx, const dmn_mver *v, const dmn_job *j, int k,
			  eng_tensor *out, eng_tensor **next)
{
	(void)st;
	int axis = v->out[v->state[k].out].axis;
	if (j->nreq == 1 && (axis < 0 || j->reqs[0]->rows == j->bucket)) {
		next[0] = out; /* the launch's output is the state as it is */
		return ENG_OK;
	}
	int64_t at = 0;
	for (int i = 0; i < j->nreq; i++) {
		int64_t ranges[ENG_MAX_DIMS][2];
		for (int d = 0; d < eng_ndim(out); d++) {
			ranges[d][0] = 0;
			ranges[d][1] = eng_shape(out)[d];
		}
		ranges[axis][0] = at;
		ranges[axis][1] = at + j->reqs[i]->rows;
		at += j->reqs[i]->rows;
		eng_tensor *s = eng_shrink(out, ranges);
		if (!s || !(next[i] = eng_contiguous(s)))
			return eng_error(ctx);
	}
	eng_status s = ENG_OK;
	for (int i = 0; i < j->nreq && !s; i++) /* one at a time: together they would fuse into one kernel */
		s = eng_realize(next + i, 1);
	return s;
}

void dmn_states_commit(dmn_states *st, const dmn_job *j, int k, eng_tensor **next)
{
	for (int i = 0; i < j->nreq; i++) {
		eng_tensor **slot = &st->t[j->reqs[i]->seq_slot * st->nstate + k];
		eng_tensor *old = *slot;
		*slot = eng_keep_root(next[i]);
		if (old != *slot)
			eng_tensor_free(old);
	}
}

void dmn_states_ended(dmn_states *st, const dmn_job *j)
{
	for (int i = 0; i < j->nreq; i++)
		if (j->reqs[i]->seq_end)
			dmn_states_clear(st, j->reqs[i]->seq_slot);
}
