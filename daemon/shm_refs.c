/* shm_refs.c: an infer request's references into shared-memory regions: its client's (the
 * header's "shm" field, docs/PROTOCOL.md "Shared memory") and the server's system regions
 * (Triton's, "sysshm"): inputs become tensor views over the mapping (or, in an unsealed region,
 * over a copy made under the SIGBUS guard), outputs become destinations the executor writes;
 * every reference is checked against its region before it is used, and each holds its region
 * mapped until the request is freed. */
#include "shm_refs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

void dmn_shm_use_free(dmn_shm_use *u)
{
	if (!u)
		return;
	for (int k = 0; k < u->nheld; k++)
		dmn_shm_unref(u->held[k]);
	for (int k = 0; k < u->ncopies; k++)
		free(u->copies[k]);
	free(u);
}

/* Where a field's references look: the connection's regions or the server's. */
typedef struct refset {
	const char *field;       /* "shm" or "sysshm" */
	const dmn_shm_set *set;
	const char *none;        /* how an unknown region is explained */
} refset;

/* The region named by entry e's "region" (what: how the error names e), held by u. */
static dmn_shm_region *hold(dmn_shm_use *u, const refset *rs, const cJSON *e, const char *what, char *err,
			    size_t errlen)
{
	const char *name = dmn_json_str(e, "region");
	if (!name) {
		BAD("%s.region: the name of a registered region (a string)", what);
		return NULL;
	}
	dmn_shm_region *g = dmn_shm_find(rs->set, name);
	if (!g) {
		BAD("%s.region: no region \"%.64s\" %s", what, name, rs->none);
		return NULL;
	}
	dmn_shm_ref(g);
	u->held[u->nheld++] = g;
	return g;
}

/* Optional field k of e: a count >= 0 (0 when absent). */
static bool count_of(const cJSON *e, const char *k, uint64_t *out)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, k);
	int64_t v = 0;
	if (o && !proto_json_int(o, 0, INT64_MAX / 2, &v))
		return false;
	*out = (uint64_t)v;
	return true;
}

/* e an object of only the fields known[0..n) (what names it): 0, or -1 with err set. */
static int entry_fields(const cJSON *e, const char *const *known, size_t n, const char *what, char *err, size_t errlen)
{
	if (!cJSON_IsObject(e)) {
		size_t at = (size_t)snprintf(err, errlen, "%s: an object {", what);
		for (size_t i = 0; i < n && at < errlen; i++)
			at += (size_t)snprintf(err + at, errlen - at, "%s%s", i ? ", " : "", known[i]);
		if (at < errlen)
			snprintf(err + at, errlen - at, "}");
		return -1;
	}
	const char *bad = dmn_json_unknown(e, known, n);
	if (bad) {
		BAD("%s: unknown field \"%.32s\"", what, bad);
		return -1;
	}
	return 0;
}

/* One input reference: a view appended to the request's tensors. */
static tsd_status input_ref(dmn_req *r, const refset *rs, const cJSON *e, int k, char *err, size_t errlen)
{
	static const char *const known[] = {"name", "dtype", "shape", "region", "offset", "byte_size"};
	char what[48];
	snprintf(what, sizeof(what), "%s.inputs[%d]", rs->field, k);
	if (entry_fields(e, known, 6, what, err, errlen))
		return TSD_BAD_REQUEST;
	const char *name = dmn_json_str(e, "name");
	if (!name || !*name || strlen(name) > PROTO_MAX_NAME)
		return BAD("%s.name: 1..%d bytes", what, PROTO_MAX_NAME);
	if (proto_msg_tensor(&r->pm, name))
		return BAD("%s.name: \"%s\" is also a tensor of the message", what, name);
	const char *dt = dmn_json_str(e, "dtype");
	tsd_dtype dtype;
	if (!dt || !tsd_dtype_parse(dt, &dtype))
		return BAD("%s.dtype: a dtype name (float32, float16, int32, int64, uint8, bool)", what);
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
	int nd = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : -1;
	if (nd < 0 || nd > TSD_MAX_DIMS)
		return BAD("%s.shape: an array of at most %d integers", what, TSD_MAX_DIMS);
	proto_tensor *t = &r->pm.tensors[r->pm.ntensors];
	memset(t, 0, sizeof(*t));
	uint64_t nbytes = tsd_dtype_size(dtype);
	for (int d = 0; d < nd; d++) {
		int64_t v;
		if (!proto_json_int(cJSON_GetArrayItem(sh, d), 0, PROTO_MAX_DIM, &v))
			return BAD("%s.shape[%d]: an integer in [0, 2^40]", what, d);
		t->shape[d] = v;
		if (__builtin_mul_overflow(nbytes, (uint64_t)v, &nbytes))
			return BAD("%s.shape: too many bytes", what);
	}
	uint64_t off = 0, size = 0;
	if (!count_of(e, "offset", &off))
		return BAD("%s.offset: an integer >= 0", what);
	if (!count_of(e, "byte_size", &size) || (cJSON_GetObjectItemCaseSensitive(e, "byte_size") && size != nbytes))
		return BAD("%s.byte_size: %llu, but dtype and shape make %llu bytes", what, (unsigned long long)size,
			   (unsigned long long)nbytes);
	dmn_shm_region *g = hold(r->shm, rs, e, what, err, errlen);
	if (!g)
		return TSD_BAD_REQUEST;
	void *p = dmn_shm_span(g, off, nbytes, tsd_dtype_size(dtype), what, err, errlen);
	if (!p)
		return TSD_BAD_REQUEST;
	if (dmn_shm_unsealed(g)) { /* its owner may shrink it: the bytes are taken now, guarded */
		void *c = aligned_alloc(64, ((size_t)nbytes + 63) / 64 * 64 + 64);
		if (!c)
			return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory copying %s", what);
		r->shm->copies[r->shm->ncopies++] = c;
		if (!dmn_copy_guarded(c, p, (size_t)nbytes))
			return BAD("%s: region \"%s\" was shrunk by its owner", what, dmn_shm_name(g));
		p = c;
	}
	t->name = name;
	t->dtype = dtype;
	t->ndim = nd;
	t->data = p;
	t->nbytes = (size_t)nbytes;
	r->pm.ntensors++;
	return TSD_OK;
}

/* One output reference: its region and offset; its size is checked once the rows are known. */
static tsd_status output_ref(dmn_req *r, const refset *rs, const cJSON *e, int k, char *err, size_t errlen)
{
	static const char *const known[] = {"name", "region", "offset", "byte_size"};
	char what[48];
	snprintf(what, sizeof(what), "%s.outputs[%d]", rs->field, k);
	if (entry_fields(e, known, 4, what, err, errlen))
		return TSD_BAD_REQUEST;
	const char *name = dmn_json_str(e, "name");
	if (!name || !*name)
		return BAD("%s.name: the name of one of the model's outputs", what);
	for (int q = 0; q < r->shm->nout; q++)
		if (!strcmp(r->shm->out[q].name, name))
			return BAD("%s.name: output \"%.64s\" is named twice", what, name);
	uint64_t off = 0, cap = 0;
	if (!count_of(e, "offset", &off))
		return BAD("%s.offset: an integer >= 0", what);
	if (!count_of(e, "byte_size", &cap))
		return BAD("%s.byte_size: an integer >= 0", what);
	dmn_shm_region *g = hold(r->shm, rs, e, what, err, errlen);
	if (!g)
		return TSD_BAD_REQUEST;
	if (!dmn_shm_writable(g))
		return BAD("%s.region: region \"%s\" was registered read-only (writable: true for outputs)", what,
			   dmn_shm_name(g));
	r->shm->out[r->shm->nout++] = (dmn_shm_out){.name = name, .g = g, .offset = off, .cap = cap};
	return TSD_OK;
}

/* One field's references (j: its object). */
static tsd_status refs_of(dmn_req *r, const refset *rs, const cJSON *j, char *err, size_t errlen)
{
	static const char *const known[] = {"inputs", "outputs"};
	if (!cJSON_IsObject(j))
		return BAD("%s: an object {inputs, outputs}", rs->field);
	const char *bad = dmn_json_unknown(j, known, 2);
	if (bad)
		return BAD("%s: unknown field \"%.32s\"", rs->field, bad);
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "inputs");
	const cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "outputs");
	int nin = in ? (cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1) : 0;
	int nout = out ? (cJSON_IsArray(out) ? cJSON_GetArraySize(out) : -1) : 0;
	if (nin < 0 || nin > PROTO_MAX_TENSORS - r->pm.ntensors)
		return BAD("%s.inputs: an array of at most %d entries (with the message's %d tensors, %d in all)", rs->field,
			   PROTO_MAX_TENSORS - r->pm.ntensors, r->pm.ntensors, PROTO_MAX_TENSORS);
	if (nout < 0 || nout > PROTO_GRAPH_MAX_OUTPUTS - r->shm->nout)
		return BAD("%s.outputs: an array of at most %d entries", rs->field, PROTO_GRAPH_MAX_OUTPUTS);
	tsd_status st = TSD_OK;
	for (int k = 0; k < nin && st == TSD_OK; k++)
		st = input_ref(r, rs, cJSON_GetArrayItem(in, k), k, err, errlen);
	for (int k = 0; k < nout && st == TSD_OK; k++)
		st = output_ref(r, rs, cJSON_GetArrayItem(out, k), k, err, errlen);
	return st;
}

tsd_status dmn_shm_refs(dmn_req *r, const dmn_shm_set *sys, char *err, size_t errlen)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->pm.json, "shm");
	const cJSON *js = cJSON_GetObjectItemCaseSensitive(r->pm.json, "sysshm");
	if (!j && !js)
		return TSD_OK;
	if (js && !sys)
		return BAD("sysshm: system shared memory is off on this server (config oip_shm)");
	if (!(r->shm = calloc(1, sizeof(*r->shm))))
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	refset mine = {"shm", r->client ? r->client->shm : NULL, "registered on this connection (shm.register, unix:// only)"};
	refset server = {"sysshm", sys, "registered in system shared memory (sysshm.register)"};
	tsd_status st = j ? refs_of(r, &mine, j, err, errlen) : TSD_OK;
	if (st == TSD_OK && js)
		st = refs_of(r, &server, js, err, errlen);
	return st;
}

tsd_status dmn_shm_outputs(dmn_req *r, const dmn_mver *v, char *err, size_t errlen)
{
	for (int q = 0; r->shm && q < r->shm->nout; q++) {
		dmn_shm_out *o = &r->shm->out[q];
		int p = 0;
		while (p < v->nout && strcmp(v->out[p].name, o->name))
			p++;
		if (p == v->nout)
			return BAD("shm.outputs[%d].name: \"%.64s\" is not an output of the model", q, o->name);
		const proto_gnode *n = &v->g.nodes[v->out[p].node];
		uint64_t nbytes = tsd_dtype_size(n->dtype);
		for (int d = 0; d < n->ndim; d++)
			nbytes *= (uint64_t)(n->shape[d] == PROTO_BATCH ? r->rows : n->shape[d]); /* validated sizes */
		char what[48];
		snprintf(what, sizeof(what), "shm output %d (%.16s)", q, o->name);
		if (o->cap && nbytes > o->cap)
			return BAD("%s: byte_size %llu, but the output takes %llu bytes", what, (unsigned long long)o->cap,
				   (unsigned long long)nbytes);
		if (!(o->dst = dmn_shm_span(o->g, o->offset, nbytes, tsd_dtype_size(n->dtype), what, err, errlen)))
			return TSD_BAD_REQUEST;
		o->nbytes = (size_t)nbytes;
	}
	return TSD_OK;
}

const dmn_shm_out *dmn_shm_out_of(const dmn_req *r, const char *name)
{
	for (int q = 0; r->shm && q < r->shm->nout; q++)
		if (!strcmp(r->shm->out[q].name, name))
			return &r->shm->out[q];
	return NULL;
}

dmn_shm_region *dmn_shm_region_of(const dmn_req *r, const void *p)
{
	for (int k = 0; r->shm && k < r->shm->nheld; k++) {
		const uint8_t *b = dmn_shm_base(r->shm->held[k]);
		if ((const uint8_t *)p >= b && (const uint8_t *)p < b + dmn_shm_size(r->shm->held[k]))
			return r->shm->held[k];
	}
	return NULL;
}
