/* exec_state.c: sequences' implicit state on the executor (docs/PROTOCOL.md, "Sequences"). Each
 * live sequence has a slot (numbered by the loop, sequence.c) holding, per state pair of its
 * model, the bytes of the pair's output at its last step. A batch of steps copies each slot's
 * rows into the launch's state input where a request's tensor would go (a starting sequence's
 * from its initial value), and after the launch each slot takes its rows of the state output:
 * the same row copies as requests' inputs and replies, and no message, encoding or socket for
 * the state. On the CPU the launch's buffers are host memory, so that is all; the slots' bytes
 * count against the memory limit. Also: a version's state pairs checked against its ports. */
#include "executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A slot's state of one pair: the bytes of a [.., rows, ..] tensor of the pair's shape. */
typedef struct slotbuf {
	uint8_t *p;
	size_t nbytes;
	int64_t rows;
} slotbuf;

struct dmn_states {
	int nslots, nstate;
	slotbuf *b;       /* [slot * nstate + k] */
	uint64_t bytes;   /* held by every slot */
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
		if (!p->init_data && p->init != 0 && a->dtype != ENG_F32)
			return bad(err, errlen, "sequence.state: \"%s\" is %s: a non-zero init needs FP32", p->input,
				   eng_dtype_name(a->dtype));
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
	if (!(st->b = calloc((size_t)st->nslots * (size_t)st->nstate, sizeof(*st->b)))) {
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
		slotbuf *b = &st->b[slot * st->nstate + k];
		st->bytes -= b->nbytes;
		free(b->p);
		*b = (slotbuf){0};
	}
}

void dmn_states_free(dmn_states *st)
{
	if (!st)
		return;
	for (int s = 0; s < st->nslots; s++)
		dmn_states_clear(st, s);
	free(st->b);
	free(st);
}

uint64_t dmn_states_bytes(const dmn_states *st)
{
	return st ? st->bytes : 0;
}

/* Elements before the batch axis (outer), in one row after it (inner), and the element size. */
static void layout(const proto_gnode *n, int axis, size_t *outer, size_t *inner, size_t *esz)
{
	*outer = *inner = 1;
	*esz = eng_dtype_size(n->dtype);
	for (int d = 0; d < n->ndim; d++)
		if (axis >= 0 && d < axis)
			*outer *= (size_t)n->shape[d];
		else if (d > axis)
			*inner *= (size_t)n->shape[d];
}

/* b set to pair p's initial value for rows rows (element layout [outer][rows][inner]). */
static void set_initial(slotbuf *b, const struct dmn_state_pair *p, const proto_gnode *n, int axis)
{
	size_t outer, inner, esz;
	layout(n, axis, &outer, &inner, &esz);
	size_t rows = axis >= 0 ? (size_t)b->rows : 1;
	if (p->init_data) { /* FP32 (checked): one row repeated along the batch axis */
		for (size_t o = 0; o < outer; o++)
			for (size_t r = 0; r < rows; r++)
				memcpy(b->p + ((o * rows + r) * inner) * esz, p->init_data + o * inner, inner * esz);
	} else if (p->init == 0) {
		memset(b->p, 0, b->nbytes);
	} else { /* a constant: FP32 (checked) */
		float f = (float)p->init;
		for (size_t i = 0; i < b->nbytes / sizeof(float); i++)
			memcpy(b->p + i * sizeof(float), &f, sizeof(float));
	}
}

const void *dmn_states_input(dmn_states *st, const dmn_mver *v, const dmn_req *r, int k, uint64_t room,
			     char *err, size_t errlen)
{
	const struct dmn_state_pair *p = &v->state[k];
	const proto_gnode *n = &v->g.nodes[v->in[p->in].node];
	int axis = v->in[p->in].axis;
	slotbuf *b = &st->b[r->seq_slot * st->nstate + k];
	if (r->seq_start || !b->p || b->rows != r->rows) { /* it starts (or starts again): a fresh state */
		size_t outer, inner, esz;
		layout(n, axis, &outer, &inner, &esz);
		size_t nbytes = outer * inner * esz * (size_t)(axis >= 0 ? r->rows : 1);
		if (nbytes != b->nbytes) {
			if (nbytes > b->nbytes && nbytes - b->nbytes > room) {
				snprintf(err, errlen, "sequence state of %zu bytes would exceed the memory limit", nbytes);
				return NULL;
			}
			uint8_t *q = realloc(b->p, nbytes ? nbytes : 1);
			if (!q) {
				snprintf(err, errlen, "out of memory for %zu bytes of sequence state", nbytes);
				return NULL;
			}
			st->bytes += nbytes;
			st->bytes -= b->nbytes;
			b->p = q;
			b->nbytes = nbytes;
		}
		b->rows = r->rows;
		set_initial(b, p, n, axis);
	}
	return b->p;
}

void dmn_states_update(dmn_states *st, const dmn_mver *v, const dmn_job *j, int k, const void *out)
{
	const struct dmn_state_pair *p = &v->state[k];
	const proto_gnode *n = &v->g.nodes[v->out[p->out].node];
	int axis = v->out[p->out].axis;
	size_t outer, inner, esz;
	layout(n, axis, &outer, &inner, &esz);
	int64_t at = 0;
	for (int i = 0; i < j->nreq; i++) {
		const dmn_req *r = j->reqs[i];
		slotbuf *b = &st->b[r->seq_slot * st->nstate + k];
		size_t rows = axis >= 0 ? (size_t)r->rows : 1, bucket = axis >= 0 ? (size_t)j->bucket : 1;
		for (size_t o = 0; o < outer; o++)
			memcpy(b->p + o * rows * inner * esz, (const uint8_t *)out + (o * bucket + (size_t)at) * inner * esz,
			       rows * inner * esz);
		at += r->rows;
	}
}

void dmn_states_ended(dmn_states *st, const dmn_job *j)
{
	for (int i = 0; i < j->nreq; i++)
		if (j->reqs[i]->seq_end)
			dmn_states_clear(st, j->reqs[i]->seq_slot);
}
