/* tensorctl_model.c: the daemon's models as model.list describes them: inputs and outputs with
 * dtype, shape and batch axis, batching, trainability, state pairs; for replay, bench and train. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

/* One {"name", "dtype", "shape"} entry into p; false when malformed. */
static bool port_parse(const cJSON *e, tctl_port *p)
{
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
	if (!cJSON_IsString(nm) || strlen(nm->valuestring) > TCTL_NAME_MAX || !cJSON_IsString(dt) ||
	    !tsd_dtype_parse(dt->valuestring, &p->dtype) || !cJSON_IsArray(sh) ||
	    cJSON_GetArraySize(sh) > TSD_MAX_DIMS)
		return false;
	snprintf(p->name, sizeof(p->name), "%s", nm->valuestring);
	p->ndim = 0;
	p->batch_axis = -1;
	p->outer = p->inner = p->row_numel = 1;
	for (const cJSON *d = sh->child; d; d = d->next) {
		if (!cJSON_IsNumber(d))
			return false;
		int64_t v = (int64_t)d->valuedouble;
		if (v < 0) {
			if (p->batch_axis >= 0)
				return false;
			p->batch_axis = p->ndim;
		} else {
			p->row_numel *= (size_t)v;
			*(p->batch_axis < 0 ? &p->outer : &p->inner) *= (size_t)v;
		}
		p->shape[p->ndim++] = v;
	}
	if (p->batch_axis < 0)
		p->outer = 1, p->inner = p->row_numel;
	return true;
}

static bool ports_parse(const cJSON *arr, tctl_port *ps, int *n)
{
	*n = 0;
	for (const cJSON *e = cJSON_IsArray(arr) ? arr->child : NULL; e; e = e->next)
		if (*n == TCTL_MAX_TENSORS || !port_parse(e, &ps[(*n)++]))
			return false;
	return true;
}

/* The index of the port called name, or -1. */
static int port_index(const tctl_port *ps, int n, const char *name)
{
	for (int k = 0; name && k < n; k++)
		if (!strcmp(ps[k].name, name))
			return k;
	return -1;
}

/* The "sequence" object's state pairs as bits of x's inputs and outputs; false when a pair
 * names no port of x. */
static bool state_parse(const cJSON *seq, tctl_model *x)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(seq, "state"))
	{
		const char *in = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "input"));
		const char *out =
			cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "output"));
		int i = port_index(x->in, x->nin, in), o = port_index(x->out, x->nout, out);
		if (i < 0 || o < 0)
			return false;
		x->state_in |= 1ull << i;
		x->state_out |= 1ull << o;
	}
	return true;
}

int tctl_models_fetch(tsd_client *c, tctl_model **ms, int *n)
{
	*ms = NULL;
	*n = 0;
	tsd_reply *r;
	tsd_status s = tsd_client_call_verb(c, "model.list", &r);
	int rc = tctl_outcome(c, s, r);
	if (rc) {
		tsd_reply_free(r);
		return rc;
	}
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "models");
	int cnt = cJSON_GetArraySize(arr);
	tctl_model *m = calloc(cnt ? (size_t)cnt : 1, sizeof(*m));
	if (!m) {
		tsd_reply_free(r);
		fprintf(stderr, "tensorctl: out of memory\n");
		return TCTL_EXIT_IO;
	}
	int k = 0;
	for (const cJSON *e = cJSON_IsArray(arr) ? arr->child : NULL; e; e = e->next, k++) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *bm = cJSON_GetObjectItemCaseSensitive(e, "batch_max");
		tctl_model *x = &m[k];
		if (!cJSON_IsString(nm) || strlen(nm->valuestring) >= sizeof(x->name) ||
		    !ports_parse(cJSON_GetObjectItemCaseSensitive(e, "inputs"), x->in, &x->nin) ||
		    !ports_parse(cJSON_GetObjectItemCaseSensitive(e, "outputs"), x->out,
				 &x->nout) ||
		    !state_parse(cJSON_GetObjectItemCaseSensitive(e, "sequence"), x)) {
			fprintf(stderr, "tensorctl: model.list: entry %d is malformed\n", k);
			free(m);
			tsd_reply_free(r);
			return TCTL_EXIT_DAEMON;
		}
		snprintf(x->name, sizeof(x->name), "%s", nm->valuestring);
		x->batched = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "batched"));
		x->trainable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "trainable"));
		const cJSON *tg = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "train"), "target"), "name");
		if (cJSON_IsString(tg))
			snprintf(x->target, sizeof(x->target), "%s", tg->valuestring);
		x->batch_max = cJSON_IsNumber(bm) && bm->valueint > 0 ? bm->valueint : 1;
		if (!x->batched) {
			x->batch_max = 1;
			for (int i = 0; i < x->nin; i++) /* no batch axis: the row is the tensor */
				x->in[i].batch_axis = -1;
		}
	}
	tsd_reply_free(r);
	*ms = m;
	*n = cnt;
	return TCTL_EXIT_OK;
}

const tctl_model *tctl_model_find(const tctl_model *ms, int n, const char *name, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(ms[i].name) == len && !memcmp(ms[i].name, name, len))
			return &ms[i];
	return NULL;
}
