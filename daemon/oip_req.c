/* oip_req.c: an Open Inference Protocol infer request (JSON tensors, Triton's binary tensor data
 * extension) turned into the TSD1 infer request the daemon runs: every field checked with its
 * limit, the JSON data written out as the tensor's bytes, binary data taken from after the JSON
 * (docs/PROTOCOL.md, "Open Inference Protocol"). Loop thread (cJSON's parser). */
#include "oip.h"
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct in_tensor {
	bool in_shm;          /* in system shared memory: a "sysshm" reference, no bytes here */
	const char *name;
	tsd_dtype dt;
	int ndim;
	int64_t shape[TSD_MAX_DIMS];
	size_t nbytes;
	const cJSON *data;    /* JSON data, or NULL: binary */
	const void *bin;      /* binary: into the body */
	void *owned;          /* JSON: the bytes written out */
} in_tensor;

typedef struct parse {
	const dmn_oip_limits *lim;
	cJSON *shm_in, *shm_out; /* the TSD1 "sysshm" references made (arrays of the header) */
	char *err;
	size_t errlen;
	int code;
} parse;

static int fail(parse *p, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parse *p, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err, p->errlen, fmt, ap);
	va_end(ap);
	p->code = code;
	return code;
}

/* A JSON integer in [lo, hi]. */
static bool json_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out)
{
	return proto_json_int(v, lo, hi, out);
}

static const cJSON *field(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Writes one JSON element v as element k of t (checked against its datatype). */
static bool put_elem(parse *p, in_tensor *t, const cJSON *v, size_t k)
{
	uint8_t *dst = (uint8_t *)t->owned;
	if (t->dt == TSD_BOOL) {
		if (cJSON_IsBool(v)) {
			dst[k] = cJSON_IsTrue(v);
			return true;
		}
		int64_t b;
		if (json_int(v, 0, 1, &b)) {
			dst[k] = (uint8_t)b;
			return true;
		}
		fail(p, 400, "inputs: \"%s\" element %zu: BOOL data is true, false, 0 or 1", t->name, k);
		return false;
	}
	if (!cJSON_IsNumber(v)) {
		fail(p, 400, "inputs: \"%s\" element %zu: %s data must be numbers", t->name, k, dmn_oip_dtype(t->dt));
		return false;
	}
	double d = v->valuedouble;
	int64_t i;
	switch (t->dt) {
	case TSD_F32: {
		float f = (float)d;
		memcpy(dst + 4 * k, &f, 4);
		return true;
	}
	case TSD_F16: {
		uint16_t h = tsd_f16_bits(d);
		memcpy(dst + 2 * k, &h, 2);
		return true;
	}
	case TSD_U8:
		if (!json_int(v, 0, 255, &i))
			break;
		dst[k] = (uint8_t)i;
		return true;
	case TSD_I32:
		if (!json_int(v, INT32_MIN, INT32_MAX, &i))
			break;
		int32_t i32 = (int32_t)i;
		memcpy(dst + 4 * k, &i32, 4);
		return true;
	case TSD_I64:
		/* a JSON number is read as a double: exact to 2^53 */
		if (!json_int(v, -((int64_t)1 << 53), (int64_t)1 << 53, &i))
			break;
		memcpy(dst + 8 * k, &i, 8);
		return true;
	default:
		break;
	}
	fail(p, 400, "inputs: \"%s\" element %zu: %g is not a %s value%s", t->name, k, d, dmn_oip_dtype(t->dt),
	     t->dt == TSD_I64 ? " (as JSON, |x| <= 2^53; larger ones go as binary data)" : "");
	return false;
}

/* The data of t: a flat array of numel elements, or nested arrays in the shape's order. */
static bool put_data(parse *p, in_tensor *t, const cJSON *a, size_t numel, size_t *k)
{
	for (const cJSON *v = a->child; v; v = v->next) {
		if (cJSON_IsArray(v)) {
			if (!put_data(p, t, v, numel, k))
				return false;
			continue;
		}
		if (*k >= numel) {
			fail(p, 400, "inputs: \"%s\": data has more elements than its shape's %zu", t->name, numel);
			return false;
		}
		if (!put_elem(p, t, v, (*k)++))
			return false;
	}
	return true;
}

/* One "inputs" entry; *bin_used: the binary data it takes. */
static int parse_input(parse *p, const cJSON *e, int idx, in_tensor *t, size_t *bin_total)
{
	static const char *const keys[] = {"name", "shape", "datatype", "parameters", "data"};
	static const char *const pkeys[] = {"binary_data_size", "shared_memory_region", "shared_memory_byte_size",
					    "shared_memory_offset"};
	if (!cJSON_IsObject(e))
		return fail(p, 400, "inputs[%d]: an object", idx);
	const char *bad = dmn_json_unknown(e, keys, sizeof(keys) / sizeof(keys[0]));
	if (bad)
		return fail(p, 400, "inputs[%d]: unknown field \"%.64s\" (name, shape, datatype, parameters, data)", idx, bad);
	const cJSON *n = field(e, "name"), *sh = field(e, "shape"), *dt = field(e, "datatype"),
		    *pa = field(e, "parameters"), *data = field(e, "data");
	if (!cJSON_IsString(n) || !n->valuestring[0] || strlen(n->valuestring) > PROTO_MAX_NAME)
		return fail(p, 400, "inputs[%d]: name: a string of 1..%d bytes", idx, PROTO_MAX_NAME);
	t->name = n->valuestring;
	const char *why;
	if (!cJSON_IsString(dt))
		return fail(p, 400, "inputs[%d] \"%s\": datatype: a string (\"FP32\", ...)", idx, t->name);
	if (!dmn_oip_dtype_parse(dt->valuestring, &t->dt, &why))
		return fail(p, 400, "inputs[%d] \"%s\": datatype \"%.32s\": %s", idx, t->name, dt->valuestring, why);
	if (!cJSON_IsArray(sh))
		return fail(p, 400, "inputs[%d] \"%s\": shape: an array of dimensions", idx, t->name);
	size_t numel = 1;
	t->ndim = 0;
	for (const cJSON *d = sh->child; d; d = d->next) {
		int64_t v;
		if (t->ndim == TSD_MAX_DIMS)
			return fail(p, 400, "inputs[%d] \"%s\": shape: at most %d dimensions", idx, t->name, TSD_MAX_DIMS);
		if (!json_int(d, 0, PROTO_MAX_DIM, &v))
			return fail(p, 400, "inputs[%d] \"%s\": shape[%d]: an integer in [0, 2^40]", idx, t->name, t->ndim);
		t->shape[t->ndim++] = v;
		if (v && numel > p->lim->max_message / (size_t)v)
			return fail(p, 413, "inputs[%d] \"%s\": shape: more elements than max_message_bytes (%zu) holds",
				    idx, t->name, p->lim->max_message);
		numel *= (size_t)v;
	}
	size_t esz = tsd_dtype_size(t->dt);
	if (numel > p->lim->max_message / esz)
		return fail(p, 413, "inputs[%d] \"%s\": %zu elements of %s are past max_message_bytes (%zu)", idx, t->name,
			    numel, dmn_oip_dtype(t->dt), p->lim->max_message);
	t->nbytes = numel * esz;
	const cJSON *bs = NULL;
	if (pa) {
		if (!cJSON_IsObject(pa))
			return fail(p, 400, "inputs[%d] \"%s\": parameters: an object", idx, t->name);
		bad = dmn_json_unknown(pa, pkeys, sizeof(pkeys) / sizeof(pkeys[0]));
		if (bad)
			return fail(p, 400, "inputs[%d] \"%s\": parameters: unknown \"%.64s\" (binary_data_size, "
				    "shared_memory_region, shared_memory_byte_size, shared_memory_offset)", idx, t->name, bad);
		bs = field(pa, "binary_data_size");
		const cJSON *reg = field(pa, "shared_memory_region");
		if (reg) {
			int64_t size, off = 0;
			const cJSON *jo = field(pa, "shared_memory_offset");
			if (data || bs)
				return fail(p, 400, "inputs[%d] \"%s\": shared_memory_region with data or binary_data_size", idx,
					    t->name);
			if (!cJSON_IsString(reg) || !json_int(field(pa, "shared_memory_byte_size"), 0, INT64_MAX / 2, &size) ||
			    (jo && !json_int(jo, 0, INT64_MAX / 2, &off)))
				return fail(p, 400, "inputs[%d] \"%s\": shared_memory_region (a name) needs shared_memory_byte_size "
					    "(and shared_memory_offset, if any: a byte count)", idx, t->name);
			cJSON *e = cJSON_CreateObject(), *sa = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
			if (!sa) {
				cJSON_Delete(e);
				return fail(p, 503, "out of memory");
			}
			cJSON_AddItemToArray(p->shm_in, e);
			cJSON_AddStringToObject(e, "name", t->name);
			cJSON_AddStringToObject(e, "dtype", tsd_dtype_name(t->dt));
			for (int d = 0; d < t->ndim; d++)
				cJSON_AddItemToArray(sa, cJSON_CreateNumber((double)t->shape[d]));
			cJSON_AddStringToObject(e, "region", reg->valuestring);
			cJSON_AddNumberToObject(e, "offset", (double)off);
			cJSON_AddNumberToObject(e, "byte_size", (double)size);
			t->in_shm = true;
			return 0;
		}
	}
	if (bs) {
		int64_t size;
		if (data)
			return fail(p, 400, "inputs[%d] \"%s\": both data and binary_data_size", idx, t->name);
		if (!json_int(bs, 0, INT64_MAX, &size))
			return fail(p, 400, "inputs[%d] \"%s\": binary_data_size: a byte count", idx, t->name);
		if ((uint64_t)size != t->nbytes)
			return fail(p, 400, "inputs[%d] \"%s\": binary_data_size %lld, but shape and datatype make %zu bytes",
				    idx, t->name, (long long)size, t->nbytes);
		*bin_total += t->nbytes;
		return 0;
	}
	if (!cJSON_IsArray(data))
		return fail(p, 400, "inputs[%d] \"%s\": data (an array) or parameters.binary_data_size is required", idx,
			    t->name);
	t->data = data;
	if (t->nbytes && !(t->owned = malloc(t->nbytes)))
		return fail(p, 503, "out of memory");
	size_t k = 0;
	if (!put_data(p, t, data, numel, &k))
		return p->code;
	if (k != numel)
		return fail(p, 400, "inputs[%d] \"%s\": data has %zu elements, its shape %zu", idx, t->name, k, numel);
	return 0;
}

static int parse_outputs(parse *p, const cJSON *o, dmn_oip_ask *ask)
{
	static const char *const keys[] = {"name", "parameters"};
	static const char *const pkeys[] = {"binary_data", "classification", "shared_memory_region",
					    "shared_memory_byte_size", "shared_memory_offset"};
	if (!cJSON_IsArray(o))
		return fail(p, 400, "outputs: an array");
	int i = 0;
	for (const cJSON *e = o->child; e; e = e->next, i++) {
		if (i == PROTO_GRAPH_MAX_OUTPUTS)
			return fail(p, 400, "outputs: at most %d", PROTO_GRAPH_MAX_OUTPUTS);
		dmn_oip_sel *s = &ask->sel[i];
		const char *bad = cJSON_IsObject(e) ? dmn_json_unknown(e, keys, sizeof(keys) / sizeof(keys[0])) : NULL;
		if (!cJSON_IsObject(e) || bad)
			return fail(p, 400, "outputs[%d]: an object of name and parameters%s%.64s", i, bad ? ", not " : "",
				    bad ? bad : "");
		const cJSON *n = field(e, "name"), *pa = field(e, "parameters");
		if (!cJSON_IsString(n) || !n->valuestring[0] || strlen(n->valuestring) > PROTO_MAX_NAME)
			return fail(p, 400, "outputs[%d]: name: a string of 1..%d bytes", i, PROTO_MAX_NAME);
		for (int j = 0; j < i; j++)
			if (!strcmp(ask->sel[j].name, n->valuestring))
				return fail(p, 400, "outputs[%d]: \"%s\" is named twice", i, n->valuestring);
		snprintf(s->name, sizeof(s->name), "%s", n->valuestring);
		s->binary = -1;
		s->classes = 0;
		if (!pa)
			continue;
		if (!cJSON_IsObject(pa))
			return fail(p, 400, "outputs[%d] \"%s\": parameters: an object", i, s->name);
		if ((bad = dmn_json_unknown(pa, pkeys, sizeof(pkeys) / sizeof(pkeys[0]))))
			return fail(p, 400, "outputs[%d] \"%s\": parameters: unknown \"%.64s\" (binary_data, classification, "
				    "shared_memory_region, shared_memory_byte_size, shared_memory_offset)", i, s->name, bad);
		const cJSON *reg = field(pa, "shared_memory_region");
		if (reg) {
			int64_t size, off = 0;
			const cJSON *jo = field(pa, "shared_memory_offset");
			if (!cJSON_IsString(reg) || !json_int(field(pa, "shared_memory_byte_size"), 1, INT64_MAX / 2, &size) ||
			    (jo && !json_int(jo, 0, INT64_MAX / 2, &off)))
				return fail(p, 400, "outputs[%d] \"%s\": shared_memory_region (a name) needs shared_memory_byte_size "
					    "(and shared_memory_offset, if any: a byte count)", i, s->name);
			if (field(pa, "classification"))
				return fail(p, 400, "outputs[%d] \"%s\": classification into shared memory is not served", i, s->name);
			cJSON *e = cJSON_CreateObject();
			if (!e)
				return fail(p, 503, "out of memory");
			cJSON_AddItemToArray(p->shm_out, e);
			cJSON_AddStringToObject(e, "name", s->name);
			cJSON_AddStringToObject(e, "region", reg->valuestring);
			cJSON_AddNumberToObject(e, "offset", (double)off);
			cJSON_AddNumberToObject(e, "byte_size", (double)size);
		}
		const cJSON *b = field(pa, "binary_data"), *c = field(pa, "classification");
		if (b) {
			if (!cJSON_IsBool(b))
				return fail(p, 400, "outputs[%d] \"%s\": binary_data: true or false", i, s->name);
			s->binary = cJSON_IsTrue(b);
		}
		int64_t k;
		if (c) {
			if (!json_int(c, 1, 1 << 20, &k))
				return fail(p, 400, "outputs[%d] \"%s\": classification: a count in [1, 2^20]", i, s->name);
			s->classes = (int)k;
		}
	}
	ask->nsel = i;
	return 0;
}

/* The request's "parameters": binary_data_output, priority, timeout, sequence_id, sequence_start,
 * sequence_end (Triton's), sequence_state (tensord's: the reply carries the state outputs). */
static int parse_params(parse *p, const cJSON *pa, dmn_oip_ask *ask, cJSON *h)
{
	if (!cJSON_IsObject(pa))
		return fail(p, 400, "parameters: an object");
	for (const cJSON *c = pa->child; c; c = c->next) {
		int64_t v;
		if (!strcmp(c->string, "binary_data_output")) {
			if (!cJSON_IsBool(c))
				return fail(p, 400, "parameters: binary_data_output: true or false");
			ask->binary_out = cJSON_IsTrue(c);
		} else if (!strcmp(c->string, "priority")) {
			/* Triton's: 1 the highest, 0 the model's default; tensord has three levels */
			if (!json_int(c, 0, INT64_MAX, &v))
				return fail(p, 400, "parameters: priority: an integer >= 0 (1 the highest, 0 the default)");
			cJSON_AddStringToObject(h, "priority", dmn_oip_priority((uint64_t)v));
		} else if (!strcmp(c->string, "timeout")) {
			if (!json_int(c, 0, (int64_t)3600000 * 1000, &v))
				return fail(p, 400, "parameters: timeout: microseconds, an integer in [0, 3600 s]");
			cJSON_AddNumberToObject(h, "timeout_ms", (double)((v + 999) / 1000));
		} else if (!strcmp(c->string, "sequence_id")) {
			/* Triton's: an unsigned number (0: none) or a string; checked at the seam */
			if (!cJSON_IsString(c) && !cJSON_IsNumber(c))
				return fail(p, 400, "parameters: sequence_id: a number or a string");
			if (!cJSON_IsNumber(c) || c->valuedouble != 0)
				cJSON_AddItemToObject(h, "sequence_id", cJSON_Duplicate(c, false));
		} else if (!strcmp(c->string, "sequence_start") || !strcmp(c->string, "sequence_end") ||
			   !strcmp(c->string, "sequence_state")) {
			if (!cJSON_IsBool(c))
				return fail(p, 400, "parameters: %s: true or false", c->string);
			if (cJSON_IsTrue(c))
				cJSON_AddTrueToObject(h, c->string);
		} else if (!strcmp(c->string, "shared_memory_region")) {
			return fail(p, 400, "parameters: shared_memory_region belongs on an input or output");
		}
		/* others are ignored, as Triton leaves them to the model */
	}
	return 0;
}

int dmn_oip_infer_msg(const dmn_oip_limits *lim, const void *body, size_t len, size_t json_len, uint64_t id,
		      const char *token, dmn_oip_ask *ask, nng_msg **out, char *err, size_t errlen)
{
	parse p = {.lim = lim, .err = err, .errlen = errlen};
	*out = NULL;
	ask->kind = DMN_OIP_INFER;
	ask->has_id = false;
	ask->nsel = 0;
	if (json_len > len)
		return fail(&p, 400, "Inference-Header-Content-Length: %zu bytes, past the body's %zu", json_len, len);
	if (json_len > lim->max_json)
		return fail(&p, 413, "the request's JSON is %zu bytes, at most %zu (oip_json_max_bytes; send tensors as "
			    "binary data)", json_len, lim->max_json);
	cJSON *j = cJSON_ParseWithLength(body, json_len);
	if (!j) {
		const char *at = cJSON_GetErrorPtr();
		size_t off = at && at >= (const char *)body && at <= (const char *)body + json_len ? (size_t)(at - (const char *)body) : 0;
		return fail(&p, 400, "the request's JSON is malformed (near byte %zu of %zu)", off, json_len);
	}
	in_tensor ts[PROTO_MAX_TENSORS];
	int nt = 0;
	cJSON *h = dmn_oip_infer_header(id, ask, token);
	int rc = 0;
	if (!h) {
		rc = fail(&p, 503, "out of memory");
		goto done;
	}
	if (!cJSON_IsObject(j)) {
		rc = fail(&p, 400, "the request's JSON: an object");
		goto done;
	}
	static const char *const keys[] = {"id", "inputs", "outputs", "parameters", "model_name", "model_version"};
	const char *bad = dmn_json_unknown(j, keys, sizeof(keys) / sizeof(keys[0]));
	if (bad) {
		rc = fail(&p, 400, "unknown field \"%.64s\" (id, inputs, outputs, parameters)", bad);
		goto done;
	}
	const cJSON *v = field(j, "id");
	if (v) {
		if (!cJSON_IsString(v) || strlen(v->valuestring) > PROTO_MAX_ID) {
			rc = fail(&p, 400, "id: a string of at most %d bytes", PROTO_MAX_ID);
			goto done;
		}
		snprintf(ask->id, sizeof(ask->id), "%s", v->valuestring);
		ask->has_id = true;
	}
	if ((v = field(j, "parameters")) && (rc = parse_params(&p, v, ask, h)))
		goto done;
	cJSON *shm = cJSON_CreateObject();
	p.shm_in = shm ? cJSON_AddArrayToObject(shm, "inputs") : NULL;
	p.shm_out = shm ? cJSON_AddArrayToObject(shm, "outputs") : NULL;
	if (!p.shm_out) {
		cJSON_Delete(shm);
		rc = fail(&p, 503, "out of memory");
		goto done;
	}
	cJSON_AddItemToObject(h, "sysshm", shm); /* taken out again below when empty */
	if ((v = field(j, "outputs")) && (rc = parse_outputs(&p, v, ask)))
		goto done;
	const cJSON *ins = field(j, "inputs");
	if (!cJSON_IsArray(ins) || !ins->child) {
		rc = fail(&p, 400, "inputs: a non-empty array of tensors");
		goto done;
	}
	size_t bin_total = 0;
	for (const cJSON *e = ins->child; e; e = e->next, nt++) {
		if (nt == PROTO_MAX_TENSORS) {
			rc = fail(&p, 400, "inputs: at most %d tensors", PROTO_MAX_TENSORS);
			goto done;
		}
		ts[nt] = (in_tensor){0};
		if ((rc = parse_input(&p, e, nt, &ts[nt], &bin_total))) {
			nt++;
			goto done;
		}
		for (int k = 0; k < nt; k++)
			if (!strcmp(ts[k].name, ts[nt].name)) {
				rc = fail(&p, 400, "inputs[%d]: \"%s\" is given twice", nt, ts[nt].name);
				nt++;
				goto done;
			}
	}
	if (bin_total != len - json_len) {
		rc = fail(&p, 400, "binary data: the body has %zu bytes after the JSON, the inputs' binary_data_size add up to %zu",
			  len - json_len, bin_total);
		goto done;
	}
	if (!cJSON_GetArraySize(p.shm_in) && !cJSON_GetArraySize(p.shm_out))
		cJSON_DeleteItemFromObjectCaseSensitive(h, "sysshm");
	proto_out po[PROTO_MAX_TENSORS];
	int npo = 0;
	const uint8_t *at = (const uint8_t *)body + json_len;
	for (int k = 0; k < nt; k++) {
		if (ts[k].in_shm)
			continue;
		if (!ts[k].data) {
			ts[k].bin = at;
			at += ts[k].nbytes;
		}
		po[npo] = (proto_out){.name = ts[k].name, .dtype = ts[k].dt, .ndim = ts[k].ndim, .shape = ts[k].shape,
				      .data = ts[k].data ? ts[k].owned : ts[k].bin};
		if (!po[npo].data) /* an empty tensor */
			po[npo].data = "";
		npo++;
	}
	void *mb;
	size_t mlen;
	proto_err pe;
	tsd_status st = proto_encode(h, po, npo, lim->max_message, dmn_oip_msg_alloc, out, &mb, &mlen, &pe);
	if (st != TSD_OK) {
		if (*out)
			nng_msg_free(*out);
		*out = NULL;
		rc = fail(&p, st == TSD_TOO_LARGE ? 413 : 400, "%s", pe.msg);
	}
done:
	for (int k = 0; k < nt; k++)
		free(ts[k].owned);
	cJSON_Delete(h);
	cJSON_Delete(j);
	return rc;
}

int dmn_oip_shm_register_msg(const void *body, size_t len, const char *name, uint64_t id, const char *token,
			     nng_msg **out, char *err, size_t errlen)
{
	static const char *const keys[] = {"key", "offset", "byte_size"};
	parse p = {.err = err, .errlen = errlen};
	*out = NULL;
	if (len > 65536)
		return fail(&p, 413, "the register request is %zu bytes, at most 65536", len);
	cJSON *j = cJSON_ParseWithLength(body, len), *h = cJSON_CreateObject();
	const char *bad = cJSON_IsObject(j) ? dmn_json_unknown(j, keys, 3) : NULL;
	const cJSON *k = field(j, "key"), *o = field(j, "offset"), *b = field(j, "byte_size");
	int64_t off = 0, size;
	int rc = 0;
	if (!cJSON_IsObject(j) || bad || !cJSON_IsString(k) || (o && !json_int(o, 0, INT64_MAX / 2, &off)) ||
	    !json_int(b, 1, INT64_MAX / 2, &size)) {
		rc = fail(&p, 400, "register: a JSON object {\"key\": a POSIX shm name, \"offset\": bytes, \"byte_size\": bytes}%s%.64s",
			  bad ? "; unknown field " : "", bad ? bad : "");
	} else if (!h) {
		rc = fail(&p, 503, "out of memory");
	} else {
		cJSON_AddNumberToObject(h, "id", (double)id);
		cJSON_AddStringToObject(h, "verb", "sysshm.register");
		cJSON_AddStringToObject(h, "name", name);
		cJSON_AddStringToObject(h, "key", k->valuestring);
		cJSON_AddNumberToObject(h, "offset", (double)off);
		cJSON_AddNumberToObject(h, "byte_size", (double)size);
		if (token)
			cJSON_AddStringToObject(h, "token", token);
		void *mb;
		size_t ml;
		proto_err pe;
		if (proto_encode(h, NULL, 0, 0, dmn_oip_msg_alloc, out, &mb, &ml, &pe) != TSD_OK) {
			if (*out)
				nng_msg_free(*out);
			*out = NULL;
			rc = fail(&p, 400, "%s", pe.msg);
		}
	}
	cJSON_Delete(h);
	cJSON_Delete(j);
	return rc;
}
