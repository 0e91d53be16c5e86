/* rows.c: can callers' rows share one launch? A walk of a lazy graph that proves each output's
 * row r (along one axis) depends on row r of the inputs only, and not on where in the batch the
 * row sits. The daemon runs it before it batches a graph it did not write (ONNX). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/nodeset.h"
#include "tensor.h"

/* What a node's value knows of the batch. NONE: it does not depend on the inputs (vary: the
 * axes along which it may change with position). ROWS: element i depends on the inputs' row
 * i[axis] / k only, where the node's axis has size B * k (k > 1: a batch axis merged with the
 * axis after it by a reshape, batch-major). */
enum { ROWS_PENDING, ROWS_NONE, ROWS_ROWS };

typedef struct rstate {
	uint8_t kind;
	int8_t axis;
	int64_t k;
	uint32_t vary;
} rstate;

typedef struct walk {
	eng_ctx *ctx;
	eng_nodeset seen;
	rstate *st;
	size_t cap;
	int64_t rows;
} walk;

static uint32_t big_axes(const eng_node *n)
{
	uint32_t m = 0;
	for (int d = 0; d < n->ndim; d++)
		if (n->shape[d] > 1)
			m |= 1u << d;
	return m;
}

static eng_status mixed(walk *w, const eng_node *n, const char *why)
{
	return eng_set_error(w->ctx, ENG_EINVAL, "rows of the batch meet: %s (%s node of shape rank %d)", why,
			     eng_op_name(n->op), n->ndim);
}

/* The index of n in the walk, added (pending) if new; -1 on ENOMEM. */
static int slot(walk *w, const eng_node *n)
{
	int i = eng_nodeset_index(&w->seen, n);
	if (i >= 0)
		return i;
	if (!eng_nodeset_add(&w->seen, n))
		return -1;
	if (w->seen.n > w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		rstate *a = realloc(w->st, cap * sizeof(*a));
		if (!a)
			return -1;
		w->st = a;
		w->cap = cap;
	}
	i = (int)w->seen.n - 1;
	w->st[i] = (rstate){.kind = ROWS_PENDING};
	return i;
}

/* A reshape of a ROWS value: where the batch rows land, if still along one axis. */
static eng_status reshape_rows(walk *w, const eng_node *n, const eng_node *s, rstate in, rstate *out)
{
	int64_t outer = 1, inner = 1;
	for (int d = 0; d < in.axis; d++)
		outer *= s->shape[d];
	for (int d = in.axis + 1; d < s->ndim; d++)
		inner *= s->shape[d];
	int64_t chunk = in.k * inner; /* elements of one row inside one outer block */
	int64_t before = 1;
	for (int d = 0; d < n->ndim; before *= n->shape[d], d++) {
		if (before != outer || n->shape[d] % w->rows)
			continue;
		int64_t after = 1;
		for (int e = d + 1; e < n->ndim; e++)
			after *= n->shape[e];
		if (chunk % after == 0 && chunk / after == n->shape[d] / w->rows) {
			*out = (rstate){.kind = ROWS_ROWS, .axis = (int8_t)d, .k = chunk / after};
			return ENG_OK;
		}
	}
	return mixed(w, n, "a reshape splits the batch axis");
}

/* Combine the sources of an elementwise node. */
static eng_status elementwise(walk *w, const eng_node *n, const rstate *const *src, rstate *out)
{
	const rstate *rows = NULL;
	uint32_t vary = 0;
	for (int i = 0; i < n->nsrc; i++) {
		if (src[i]->kind != ROWS_ROWS) {
			vary |= src[i]->vary;
		} else if (!rows) {
			rows = src[i];
		} else if (rows->axis != src[i]->axis || rows->k != src[i]->k) {
			return mixed(w, n, "values whose rows lie along different axes are combined");
		}
	}
	if (!rows) {
		*out = (rstate){.kind = ROWS_NONE, .vary = vary};
		return ENG_OK;
	}
	if (vary & (1u << rows->axis))
		return mixed(w, n, "a row is combined with a value that changes along the batch axis");
	*out = *rows;
	return ENG_OK;
}

static eng_status movement(walk *w, const eng_node *n, rstate in, rstate *out)
{
	const eng_node *s = n->src[0];
	if (in.kind == ROWS_NONE) {
		uint32_t vary = big_axes(n);
		if (n->op == ENG_OP_PERMUTE) {
			vary = 0;
			for (int d = 0; d < n->ndim; d++)
				if (in.vary & (1u << n->arg.perm[d]))
					vary |= 1u << d;
		} else if (n->op == ENG_OP_EXPAND || n->op == ENG_OP_SHRINK || n->op == ENG_OP_FLIP) {
			vary = in.vary & big_axes(n);
		} else if (n->op == ENG_OP_PAD) {
			vary = in.vary;
			for (int d = 0; d < n->ndim; d++)
				if (n->arg.pairs[d][0] || n->arg.pairs[d][1])
					vary |= 1u << d;
			vary &= big_axes(n);
		} else if (!in.vary) {
			vary = 0; /* RESHAPE: a constant stays constant */
		}
		*out = (rstate){.kind = ROWS_NONE, .vary = vary};
		return ENG_OK;
	}
	*out = in;
	switch (n->op) {
	case ENG_OP_RESHAPE:
		return reshape_rows(w, n, s, in, out);
	case ENG_OP_PERMUTE:
		for (int d = 0; d < n->ndim; d++)
			if (n->arg.perm[d] == in.axis)
				out->axis = (int8_t)d;
		return ENG_OK;
	case ENG_OP_EXPAND:
		return ENG_OK; /* the batch axis has size >= 2: it is never the one broadcast */
	case ENG_OP_PAD:
		if (n->arg.pairs[in.axis][0] || n->arg.pairs[in.axis][1])
			return mixed(w, n, "the batch axis is padded");
		return ENG_OK;
	case ENG_OP_SHRINK:
		if (n->arg.pairs[in.axis][0] != 0 || n->arg.pairs[in.axis][1] != s->shape[in.axis])
			return mixed(w, n, "the batch axis is sliced");
		return ENG_OK;
	default: /* FLIP */
		if (n->arg.axes & (1u << in.axis))
			return mixed(w, n, "the batch axis is reversed");
		return ENG_OK;
	}
}

/* n's state from its sources' (all known). */
static eng_status visit(walk *w, const eng_node *n, const rstate *const *src, rstate *out)
{
	switch (eng_op_kind_of(n->op)) {
	case ENG_KIND_LEAF:
		*out = (rstate){.kind = ROWS_NONE,
				.vary = n->op == ENG_OP_CONST   ? 0
					: n->op == ENG_OP_INDEX ? (1u << n->arg.axis) & big_axes(n)
								: big_axes(n)};
		return ENG_OK;
	case ENG_KIND_UNARY:
	case ENG_KIND_BINARY:
	case ENG_KIND_TERNARY:
		return elementwise(w, n, src, out);
	case ENG_KIND_REDUCE:
		if (src[0]->kind == ROWS_ROWS) {
			if (n->arg.axes & (1u << src[0]->axis))
				return mixed(w, n, "a reduction runs over the batch axis");
			*out = *src[0];
		} else {
			*out = (rstate){.kind = ROWS_NONE, .vary = src[0]->vary & ~n->arg.axes};
		}
		return ENG_OK;
	case ENG_KIND_MOVEMENT:
		return movement(w, n, *src[0], out);
	default:
		if (n->op == ENG_OP_ASSIGN)
			return mixed(w, n, "the graph writes into a buffer");
		*out = *src[0]; /* CONTIGUOUS, COPY, DETACH: the same value */
		return ENG_OK;
	}
}

/* Post-order walk from root with an explicit stack (graphs can be thousands of nodes deep). */
static eng_status walk_from(walk *w, const eng_node *root, int *root_slot)
{
	const eng_node **stack = NULL;
	size_t sp = 0, scap = 0;
	eng_status s = ENG_OK;
	int r = slot(w, root);
	if (r < 0)
		return eng_set_error(w->ctx, ENG_ENOMEM, "out of memory");
	*root_slot = r;
	if (w->st[r].kind != ROWS_PENDING)
		return ENG_OK;
	if (!(stack = malloc(64 * sizeof(*stack))))
		goto oom;
	scap = 64;
	stack[sp++] = root;
	while (sp) {
		const eng_node *n = stack[sp - 1];
		if (w->st[eng_nodeset_index(&w->seen, n)].kind != ROWS_PENDING) {
			sp--;
			continue;
		}
		const rstate *src[3];
		bool ready = true;
		for (int k = 0; k < n->nsrc; k++) {
			int j = slot(w, n->src[k]);
			if (j < 0)
				goto oom;
			if (w->st[j].kind != ROWS_PENDING)
				continue;
			ready = false;
			if (sp == scap) {
				const eng_node **a = realloc(stack, 2 * scap * sizeof(*a));
				if (!a)
					goto oom;
				stack = a;
				scap *= 2;
			}
			stack[sp++] = n->src[k];
		}
		if (!ready)
			continue;
		for (int k = 0; k < n->nsrc; k++)
			src[k] = &w->st[eng_nodeset_index(&w->seen, n->src[k])];
		rstate out;
		if ((s = visit(w, n, src, &out)))
			break;
		w->st[eng_nodeset_index(&w->seen, n)] = out;
		sp--;
	}
	free(stack);
	return s;
oom:
	free(stack);
	return eng_set_error(w->ctx, ENG_ENOMEM, "out of memory");
}

eng_status eng_rows_independent(eng_tensor *const *inputs, const int *in_axis, int nin, eng_tensor *const *outputs,
				int nout, int *out_axis)
{
	if (nin < 1 || nout < 1 || !inputs[0] || !outputs)
		return ENG_EINVAL;
	eng_ctx *ctx = inputs[0]->ctx;
	walk w = {.ctx = ctx, .rows = -1};
	eng_status s = ENG_OK;
	for (int i = 0; i < nin && !s; i++) {
		const eng_node *n = inputs[i] ? inputs[i]->node : NULL;
		if (!n || in_axis[i] < 0 || in_axis[i] >= n->ndim) {
			s = eng_set_error(ctx, ENG_EINVAL, "rows: input %d: no such axis %d", i, in_axis[i]);
		} else if (w.rows >= 0 && n->shape[in_axis[i]] != w.rows) {
			s = eng_set_error(ctx, ENG_EINVAL, "rows: input %d has %lld rows, input 0 %lld", i,
					  (long long)n->shape[in_axis[i]], (long long)w.rows);
		} else if ((w.rows = n->shape[in_axis[i]]) < 2) {
			s = eng_set_error(ctx, ENG_EINVAL, "rows: the check needs a batch of at least 2 rows");
		} else {
			int j = slot(&w, n);
			if (j < 0)
				s = eng_set_error(ctx, ENG_ENOMEM, "out of memory");
			else if (w.st[j].kind == ROWS_ROWS && w.st[j].axis != in_axis[i])
				s = eng_set_error(ctx, ENG_EINVAL, "rows: input %d is given twice with other axes", i);
			else
				w.st[j] = (rstate){.kind = ROWS_ROWS, .axis = (int8_t)in_axis[i], .k = 1};
		}
	}
	for (int q = 0; q < nout && !s; q++) {
		int r = 0;
		if (!outputs[q]) {
			s = ENG_EINVAL;
		} else if (!(s = walk_from(&w, outputs[q]->node, &r))) {
			rstate o = w.st[r];
			if (o.kind != ROWS_ROWS)
				s = eng_set_error(ctx, ENG_EINVAL, "output %d does not depend on the inputs' rows", q);
			else if (o.k != 1)
				s = eng_set_error(ctx, ENG_EINVAL,
						  "output %d has the batch merged with the axis after it (axis %d holds %lld per row)",
						  q, o.axis, (long long)o.k);
			else
				out_axis[q] = o.axis;
		} else if (s != ENG_ENOMEM) {
			char m[300];
			snprintf(m, sizeof(m), "%s", eng_errmsg(ctx));
			s = eng_set_error(ctx, s, "output %d: %s", q, m);
		}
	}
	free(w.st);
	eng_nodeset_free(&w.seen);
	return s;
}
