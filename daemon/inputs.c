/* inputs.c: a request's tensors checked against a model version's inputs (and its train
 * target): names, dtypes, shapes, and the rows along the batch axis (loop). */
#include "registry.h"

#include <stdio.h>
#include <string.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

static tsd_status check_port(const proto_gnode *n, const proto_tensor *t, const char *what, int64_t *rows,
			     char *err, size_t errlen)
{
	if (t->dtype != n->dtype)
		return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH, "tensors (%s): dtype %s, the %s wants %s", t->name,
			   eng_dtype_name(t->dtype), what, eng_dtype_name(n->dtype));
	bool ok = t->ndim == n->ndim;
	for (int d = 0; ok && d < n->ndim; d++) {
		if (n->shape[d] != PROTO_BATCH) {
			ok = t->shape[d] == n->shape[d];
		} else if (*rows < 0) {
			*rows = t->shape[d];
		} else {
			ok = t->shape[d] == *rows;
		}
	}
	if (!ok) {
		char a[160], b[160];
		int at = 0, bt = 0;
		for (int d = 0; d < t->ndim && at < 140; d++)
			at += snprintf(a + at, sizeof(a) - (size_t)at, "%s%lld", d ? "," : "", (long long)t->shape[d]);
		for (int d = 0; d < n->ndim && bt < 140; d++)
			bt += snprintf(b + bt, sizeof(b) - (size_t)bt, "%s%lld", d ? "," : "", (long long)n->shape[d]);
		a[at] = b[bt] = 0;
		return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH,
			   "tensors (%s): shape [%s], the %s wants [%s] (-1: the batch size, the same in every input)",
			   t->name, a, what, b);
	}
	return TSD_OK;
}

tsd_status dmn_check_inputs(const dmn_mver *v, const proto_msg *m, bool train, uint64_t implicit, int64_t *rows,
			    char *err, size_t errlen)
{
	int64_t b = -1;
	tsd_status st;
	int expect = v->nin;
	for (int q = 0; q < v->nin; q++) {
		const proto_tensor *t = proto_msg_tensor(m, v->in[q].name);
		if (implicit >> q & 1) {
			if (t)
				return BAD("tensors: \"%s\" is the sequence's state: the daemon holds it (start the sequence "
					   "again to reset it)", v->in[q].name);
			expect--;
			continue;
		}
		if (!t)
			return BAD("tensors: input \"%s\" is missing", v->in[q].name);
		if ((st = check_port(&v->g.nodes[v->in[q].node], t, "model", &b, err, errlen)))
			return st;
	}
	if (train) {
		const proto_tensor *t = proto_msg_tensor(m, v->target);
		if (!t)
			return BAD("tensors: the train target \"%s\" is missing", v->target);
		proto_gnode tn = {.dtype = v->target_dtype, .ndim = v->target_ndim};
		memcpy(tn.shape, v->target_shape, sizeof(tn.shape));
		if ((st = check_port(&tn, t, "train target", &b, err, errlen)))
			return st;
		expect++;
	}
	if (m->ntensors != expect)
		for (int k = 0; k < m->ntensors; k++) {
			bool known = train && !strcmp(m->tensors[k].name, v->target);
			for (int q = 0; q < v->nin; q++)
				known |= !(implicit >> q & 1) && !strcmp(m->tensors[k].name, v->in[q].name);
			if (!known)
				return BAD("tensors[%d] (%s): not an input of the model", k, m->tensors[k].name);
		}
	if (!v->batched) {
		*rows = 1;
		return TSD_OK;
	}
	if (b < 1)
		return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH, "tensors: the batch size is %lld; at least 1", (long long)b);
	if (b > v->batch_max)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "tensors: %lld rows, the model's batch max is %d (split the request)",
			   (long long)b, v->batch_max);
	*rows = b;
	return TSD_OK;
}

