/* oip_grpc_req.c: an Open Inference Protocol gRPC request (protobuf-c, protocol/grpc_service.proto)
 * turned into the one TSD1 request the daemon runs: every field checked with its limit, tensors
 * from raw_input_contents or typed contents, Triton's priority and timeout parameters. Any
 * thread: cJSON is built and printed here, never parsed. */
#include "oip_grpc_msg.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* generated from protocol/grpc_service.proto into $(BUILD)/gen (a library's header) */
#include <grpc_service.pb-c.h>

#define SERVICE "/inference.GRPCInferenceService/"

static const char *const rpc_names[] = {
#define DMN_GRPC_NAME(e, name) name,
	DMN_GRPC_RPCS(DMN_GRPC_NAME)
#undef DMN_GRPC_NAME
};

dmn_grpc_rpc dmn_grpc_rpc_find(const char *path, size_t len)
{
	size_t sl = strlen(SERVICE);
	if (len <= sl || memcmp(path, SERVICE, sl))
		return DMN_GRPC_RPC_COUNT;
	for (int i = 0; i < DMN_GRPC_RPC_COUNT; i++)
		if (strlen(rpc_names[i]) == len - sl && !memcmp(path + sl, rpc_names[i], len - sl))
			return (dmn_grpc_rpc)i;
	return DMN_GRPC_RPC_COUNT;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

/* A model's name and version string into ask. */
static int model_ref(const char *name, const char *version, dmn_oip_ask *ask, char *err, size_t errlen)
{
	size_t n = strlen(name);
	if (!dmn_name_valid(name, n))
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "model name \"%.80s\": 1..%d bytes of [A-Za-z0-9_.-]", name,
			    DMN_OIP_NAME_MAX);
	memcpy(ask->model, name, n + 1);
	ask->version = 0;
	if (version[0]) {
		char *end;
		long long v = strtoll(version, &end, 10);
		if (*end || v < 1 || v > ((long long)1 << 53) || version[0] < '0' || version[0] > '9')
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "model version \"%.32s\": a version number (1, 2, ...)",
				    version);
		ask->version = v;
	}
	return DMN_GRPC_OK;
}

/* An integer parameter (int64_param or uint64_param, >= 0). */
static bool param_uint(const Inference__InferParameter *p, uint64_t *v)
{
	if (!p)
		return false;
	if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM) {
		*v = p->uint64_param;
		return true;
	}
	if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM && p->int64_param >= 0) {
		*v = (uint64_t)p->int64_param;
		return true;
	}
	return false;
}

/* A tensor's system shared-memory reference (Triton's shared_memory_region, _byte_size,
 * _offset parameters) as a TSD1 "sysshm" entry appended to list; 0 when it has none (*has
 * false), else a gRPC status with err. what: how err names the tensor. */
#define SHM_PARAMS_MAX 64
static int shm_ref(const char *const *keys, const Inference__InferParameter *const *vals, size_t n, const char *what,
		   cJSON *list, cJSON **entry, char *err, size_t errlen)
{
	const char *region = NULL;
	uint64_t size = 0, off = 0;
	bool has_size = false;
	*entry = NULL;
	for (size_t k = 0; k < n; k++) {
		const char *key = keys[k];
		const Inference__InferParameter *p = vals[k];
		if (!strcmp(key, "shared_memory_region")) {
			if (!p || p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s: shared_memory_region: a region name (string_param)",
					    what);
			region = p->string_param;
		} else if (!strcmp(key, "shared_memory_byte_size")) {
			if (!param_uint(p, &size))
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s: shared_memory_byte_size: a byte count", what);
			has_size = true;
		} else if (!strcmp(key, "shared_memory_offset")) {
			if (!param_uint(p, &off))
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s: shared_memory_offset: a byte count", what);
		} else if (!strncmp(key, "shared_memory_", 14)) {
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s: %.64s: not a shared-memory parameter (region, byte_size, offset)",
				    what, key);
		}
	}
	if (!region)
		return has_size ? fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s: shared_memory_byte_size without shared_memory_region", what)
				: DMN_GRPC_OK;
	if (!has_size)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s: shared_memory_region needs shared_memory_byte_size", what);
	cJSON *e = cJSON_CreateObject();
	if (!e)
		return fail(err, errlen, DMN_GRPC_UNAVAILABLE, "out of memory");
	cJSON_AddItemToArray(list, e);
	cJSON_AddStringToObject(e, "region", region);
	cJSON_AddNumberToObject(e, "offset", (double)off);
	cJSON_AddNumberToObject(e, "byte_size", (double)size);
	*entry = e;
	return DMN_GRPC_OK;
}

/* The request's parameters: priority, timeout, sequence_id, sequence_start, sequence_end (Triton's),
 * sequence_state (tensord's: the reply carries the state outputs). */
static int infer_params(const Inference__ModelInferRequest *r, cJSON *h, char *err, size_t errlen)
{
	for (size_t i = 0; i < r->n_parameters; i++) {
		const char *k = r->parameters[i]->key;
		const Inference__InferParameter *p = r->parameters[i]->value;
		uint64_t v;
		if (!strcmp(k, "priority")) {
			if (!param_uint(p, &v))
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
					    "parameters: priority: an integer >= 0 (1 the highest, 0 the default)");
			cJSON_AddStringToObject(h, "priority", dmn_oip_priority(v));
		} else if (!strcmp(k, "timeout")) {
			if (!param_uint(p, &v) || v > (uint64_t)3600000 * 1000)
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
					    "parameters: timeout: microseconds, an integer in [0, 3600 s]");
			cJSON_AddNumberToObject(h, "timeout_ms", (double)((v + 999) / 1000));
		} else if (!strcmp(k, "sequence_id")) {
			/* Triton's: an unsigned number (0: none) or a string; checked at the seam */
			if (p && p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
				cJSON_AddStringToObject(h, "sequence_id", p->string_param);
			else if (!param_uint(p, &v) || v > (UINT64_C(1) << 53))
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
					    "parameters: sequence_id: an integer in [0, 2^53] or a string");
			else if (v)
				cJSON_AddNumberToObject(h, "sequence_id", (double)v);
		} else if (!strcmp(k, "sequence_start") || !strcmp(k, "sequence_end") || !strcmp(k, "sequence_state")) {
			if (!p || p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "parameters: %s: a bool", k);
			if (p->bool_param)
				cJSON_AddTrueToObject(h, k);
		} else if (!strncmp(k, "shared_memory_", 14)) {
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "parameters: %.64s belongs on an input or output", k);
		}
		/* others are ignored, as Triton leaves them to the model */
	}
	return DMN_GRPC_OK;
}

/* The requested outputs into ask->sel (every one as raw contents; classification's top k). */
static int infer_outputs(const Inference__ModelInferRequest *r, dmn_oip_ask *ask, cJSON *shm_out, char *err,
			 size_t errlen)
{
	if (r->n_outputs > PROTO_GRAPH_MAX_OUTPUTS)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "outputs: at most %d", PROTO_GRAPH_MAX_OUTPUTS);
	for (size_t i = 0; i < r->n_outputs; i++) {
		const Inference__ModelInferRequest__InferRequestedOutputTensor *o = r->outputs[i];
		dmn_oip_sel *s = &ask->sel[i];
		size_t n = strlen(o->name);
		if (!n || n > PROTO_MAX_NAME)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "outputs[%zu]: name: 1..%d bytes", i, PROTO_MAX_NAME);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(ask->sel[j].name, o->name))
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "outputs[%zu]: \"%s\" is named twice", i, o->name);
		memcpy(s->name, o->name, n + 1);
		s->binary = 1;
		s->classes = 0;
		if (o->n_parameters > SHM_PARAMS_MAX)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "outputs[%zu] \"%s\": at most %d parameters", i, s->name,
				    SHM_PARAMS_MAX);
		const char *keys[SHM_PARAMS_MAX];
		const Inference__InferParameter *vals[SHM_PARAMS_MAX];
		for (size_t k = 0; k < o->n_parameters; k++) {
			keys[k] = o->parameters[k]->key;
			vals[k] = o->parameters[k]->value;
		}
		char what[200];
		snprintf(what, sizeof(what), "outputs[%zu] \"%s\"", i, s->name);
		cJSON *e;
		int rc = shm_ref(keys, vals, o->n_parameters, what, shm_out, &e, err, errlen);
		if (rc)
			return rc;
		if (e)
			cJSON_AddStringToObject(e, "name", s->name);
		for (size_t k = 0; k < o->n_parameters; k++) {
			uint64_t v;
			if (strcmp(o->parameters[k]->key, "classification"))
				continue;
			if (!param_uint(o->parameters[k]->value, &v) || v < 1 || v > (1u << 20))
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
					    "outputs[%zu] \"%s\": classification: a count in [1, 2^20]", i, s->name);
			s->classes = (int)v;
		}
	}
	ask->nsel = (int)r->n_outputs;
	return DMN_GRPC_OK;
}

/* Typed contents of input t (numel elements of dt) written out as its bytes (malloc'd *out). */
static int typed_contents(const Inference__InferTensorContents *c, const char *name, tsd_dtype dt, size_t numel, void **out,
			  char *err, size_t errlen)
{
	size_t have;
	switch (dt) {
	case TSD_BOOL: have = c->n_bool_contents; break;
	case TSD_U8: have = c->n_uint_contents; break;
	case TSD_I32: have = c->n_int_contents; break;
	case TSD_I64: have = c->n_int64_contents; break;
	case TSD_F32: have = c->n_fp32_contents; break;
	default:
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
			    "input \"%s\": %s data goes in raw_input_contents (there are no typed contents for it)", name,
			    dmn_oip_dtype(dt));
	}
	if (have != numel)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": contents has %zu %s elements, its shape %zu",
			    name, have, dmn_oip_dtype(dt), numel);
	size_t esz = tsd_dtype_size(dt);
	uint8_t *p = malloc(numel ? numel * esz : 1);
	if (!p)
		return fail(err, errlen, DMN_GRPC_UNAVAILABLE, "out of memory");
	for (size_t k = 0; k < numel; k++) {
		if (dt == TSD_BOOL) {
			p[k] = c->bool_contents[k] ? 1 : 0;
		} else if (dt == TSD_U8) {
			if (c->uint_contents[k] > 255) {
				free(p);
				return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\" element %zu: %u is not a UINT8", name,
					    k, c->uint_contents[k]);
			}
			p[k] = (uint8_t)c->uint_contents[k];
		}
	}
	if (dt == TSD_I32)
		memcpy(p, c->int_contents, numel * 4);
	else if (dt == TSD_I64)
		memcpy(p, c->int64_contents, numel * 8);
	else if (dt == TSD_F32)
		memcpy(p, c->fp32_contents, numel * 4);
	*out = p;
	return DMN_GRPC_OK;
}

typedef struct in_tensor {
	bool in_shm; /* in system shared memory: a "sysshm" entry, no proto_out */
	int64_t shape[TSD_MAX_DIMS];
	void *owned; /* typed contents written out */
} in_tensor;

/* Input i of r checked into po[i] (its data raw or written out into t->owned), or, in system
 * shared memory, into an entry of shm_in (t->in_shm). */
static int infer_input(const dmn_oip_limits *lim, const Inference__ModelInferRequest *r, size_t i, size_t raw_i,
		       in_tensor *t, proto_out *po, cJSON *shm_in, char *err, size_t errlen)
{
	const Inference__ModelInferRequest__InferInputTensor *in = r->inputs[i];
	size_t n = strlen(in->name);
	if (!n || n > PROTO_MAX_NAME)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "inputs[%zu]: name: 1..%d bytes", i, PROTO_MAX_NAME);
	for (size_t j = 0; j < i; j++)
		if (!strcmp(r->inputs[j]->name, in->name))
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "inputs[%zu]: \"%s\" is given twice", i, in->name);
	const char *why;
	tsd_dtype dt;
	if (!dmn_oip_dtype_parse(in->datatype, &dt, &why))
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": datatype \"%.32s\": %s", in->name, in->datatype,
			    why);
	if (in->n_shape > TSD_MAX_DIMS)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": shape: at most %d dimensions", in->name,
			    TSD_MAX_DIMS);
	size_t numel = 1, esz = tsd_dtype_size(dt);
	for (size_t d = 0; d < in->n_shape; d++) {
		int64_t v = in->shape[d];
		if (v < 0 || v > PROTO_MAX_DIM)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": shape[%zu] %lld: an integer in [0, 2^40]",
				    in->name, d, (long long)v);
		if (v && numel > lim->max_message / esz / (size_t)v)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": shape: more data than max_message_bytes "
				    "(%zu) holds", in->name, lim->max_message);
		numel *= (size_t)v;
		t->shape[d] = v;
	}
	if (in->n_parameters > SHM_PARAMS_MAX)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": at most %d parameters", in->name,
			    SHM_PARAMS_MAX);
	const char *keys[SHM_PARAMS_MAX];
	const Inference__InferParameter *vals[SHM_PARAMS_MAX];
	for (size_t k = 0; k < in->n_parameters; k++) {
		keys[k] = in->parameters[k]->key;
		vals[k] = in->parameters[k]->value;
	}
	char what[200];
	snprintf(what, sizeof(what), "input \"%s\"", in->name);
	cJSON *e;
	int src = shm_ref(keys, vals, in->n_parameters, what, shm_in, &e, err, errlen);
	if (src)
		return src;
	if (e) { /* its bytes are in the region: no contents here */
		if (in->contents)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": shared_memory_region and contents", in->name);
		cJSON *sh = cJSON_AddArrayToObject(e, "shape");
		cJSON_AddStringToObject(e, "name", in->name);
		cJSON_AddStringToObject(e, "dtype", tsd_dtype_name(dt));
		for (size_t d = 0; sh && d < in->n_shape; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)in->shape[d]));
		t->in_shm = true;
		return DMN_GRPC_OK;
	}
	*po = (proto_out){.name = in->name, .dtype = dt, .ndim = (int)in->n_shape, .shape = t->shape};
	size_t nbytes = numel * esz;
	if (r->n_raw_input_contents) {
		if (in->contents)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": both contents and raw_input_contents",
				    in->name);
		const ProtobufCBinaryData *raw = &r->raw_input_contents[raw_i];
		if (raw->len != nbytes)
			return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
				    "input \"%s\": raw_input_contents[%zu] has %zu bytes, but shape and datatype %s make %zu",
				    in->name, raw_i, raw->len, dmn_oip_dtype(dt), nbytes);
		po->data = raw->len ? (const void *)raw->data : "";
		return DMN_GRPC_OK;
	}
	if (!in->contents)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "input \"%s\": no data (contents or raw_input_contents)",
			    in->name);
	int rc = typed_contents(in->contents, in->name, dt, numel, &t->owned, err, errlen);
	po->data = t->owned;
	return rc;
}

static int infer_msg(const dmn_oip_limits *lim, const Inference__ModelInferRequest *r, uint64_t id, const char *token,
		     dmn_oip_ask *ask, nng_msg **out, char *err, size_t errlen)
{
	int rc = model_ref(r->model_name, r->model_version, ask, err, errlen);
	if (rc)
		return rc;
	size_t idl = strlen(r->id);
	if (idl > PROTO_MAX_ID)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "id: at most %d bytes", PROTO_MAX_ID);
	memcpy(ask->id, r->id, idl + 1);
	ask->has_id = idl > 0;
	ask->binary_out = true;
	if (!r->n_inputs || r->n_inputs > PROTO_MAX_TENSORS)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "inputs: 1..%d tensors, not %zu", PROTO_MAX_TENSORS, r->n_inputs);
	size_t in_shm = 0; /* inputs in system shared memory take no raw contents (Triton's rule) */
	for (size_t i = 0; i < r->n_inputs; i++) {
		bool has = false;
		for (size_t k = 0; k < r->inputs[i]->n_parameters; k++)
			has = has || !strcmp(r->inputs[i]->parameters[k]->key, "shared_memory_region");
		in_shm += has;
	}
	if (r->n_raw_input_contents && r->n_raw_input_contents != r->n_inputs - in_shm)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT,
			    "raw_input_contents: %zu, for %zu inputs not in shared memory (one each, or none)",
			    r->n_raw_input_contents, r->n_inputs - in_shm);
	cJSON *h = dmn_oip_infer_header(id, ask, token), *shm = h ? cJSON_AddObjectToObject(h, "sysshm") : NULL;
	cJSON *shm_in = shm ? cJSON_AddArrayToObject(shm, "inputs") : NULL, *shm_out = shm_in ? cJSON_AddArrayToObject(shm, "outputs") : NULL;
	if (!shm_out) {
		cJSON_Delete(h);
		return fail(err, errlen, DMN_GRPC_UNAVAILABLE, "out of memory");
	}
	if ((rc = infer_outputs(r, ask, shm_out, err, errlen))) {
		cJSON_Delete(h);
		return rc;
	}
	in_tensor *ts = calloc(r->n_inputs, sizeof(*ts));
	proto_out *po = calloc(r->n_inputs, sizeof(*po));
	size_t nt = 0;
	if (!ts || !po) {
		rc = fail(err, errlen, DMN_GRPC_UNAVAILABLE, "out of memory");
		goto done;
	}
	if ((rc = infer_params(r, h, err, errlen)))
		goto done;
	size_t npo = 0;
	for (; nt < r->n_inputs; nt++) {
		if ((rc = infer_input(lim, r, nt, npo, &ts[nt], &po[npo], shm_in, err, errlen))) {
			nt++;
			goto done;
		}
		npo += !ts[nt].in_shm;
	}
	if (!cJSON_GetArraySize(shm_in) && !cJSON_GetArraySize(shm_out))
		cJSON_DeleteItemFromObjectCaseSensitive(h, "sysshm");
	void *mb;
	size_t ml;
	proto_err pe;
	tsd_status st = proto_encode(h, po, (int)npo, lim->max_message, dmn_oip_msg_alloc, out, &mb, &ml, &pe);
	if (st != TSD_OK) {
		if (*out)
			nng_msg_free(*out);
		*out = NULL;
		rc = fail(err, errlen, st == TSD_OUT_OF_MEMORY ? DMN_GRPC_UNAVAILABLE : DMN_GRPC_INVALID_ARGUMENT, "%s", pe.msg);
	}
done:
	for (size_t k = 0; ts && k < nt; k++)
		free(ts[k].owned);
	free(ts);
	free(po);
	cJSON_Delete(h);
	return rc;
}

/* The unpacked message of rpc's request type, or NULL. */
static ProtobufCMessage *unpack(const ProtobufCMessageDescriptor *d, const void *body, size_t len)
{
	return protobuf_c_message_unpack(d, NULL, len, body);
}

static nng_msg *verb(const char *v, uint64_t id, const char *key, const char *val, const char *token)
{
	return dmn_oip_verb_msg(v, id, key, val, token);
}

int dmn_grpc_request(dmn_grpc_rpc rpc, const dmn_oip_limits *lim, const void *body, size_t len, uint64_t id,
		     const char *token, dmn_oip_ask *ask, nng_msg **out, char *err, size_t errlen)
{
	static const ProtobufCMessageDescriptor *const req[DMN_GRPC_RPC_COUNT] = {
		[DMN_GRPC_SERVER_LIVE] = &inference__server_live_request__descriptor,
		[DMN_GRPC_SERVER_READY] = &inference__server_ready_request__descriptor,
		[DMN_GRPC_MODEL_READY] = &inference__model_ready_request__descriptor,
		[DMN_GRPC_SERVER_META] = &inference__server_metadata_request__descriptor,
		[DMN_GRPC_MODEL_META] = &inference__model_metadata_request__descriptor,
		[DMN_GRPC_INFER] = &inference__model_infer_request__descriptor,
		[DMN_GRPC_STREAM_INFER] = &inference__model_infer_request__descriptor,
		[DMN_GRPC_MODEL_CONFIG] = &inference__model_config_request__descriptor,
		[DMN_GRPC_MODEL_STATS] = &inference__model_statistics_request__descriptor,
		[DMN_GRPC_REPO_INDEX] = &inference__repository_index_request__descriptor,
		[DMN_GRPC_REPO_LOAD] = &inference__repository_model_load_request__descriptor,
		[DMN_GRPC_REPO_UNLOAD] = &inference__repository_model_unload_request__descriptor,
		[DMN_GRPC_SHM_STATUS] = &inference__system_shared_memory_status_request__descriptor,
		[DMN_GRPC_SHM_REGISTER] = &inference__system_shared_memory_register_request__descriptor,
		[DMN_GRPC_SHM_UNREGISTER] = &inference__system_shared_memory_unregister_request__descriptor,
	};
	*out = NULL;
	*ask = (dmn_oip_ask){0};
	if ((unsigned)rpc >= DMN_GRPC_RPC_COUNT)
		return fail(err, errlen, DMN_GRPC_UNIMPLEMENTED, "not a method of inference.GRPCInferenceService");
	switch (rpc) {
	default:
		break;
	}
	ProtobufCMessage *m = unpack(req[rpc], body, len);
	if (!m)
		return fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "the %s request does not parse (protobuf)",
			    req[rpc]->short_name);
	int rc = DMN_GRPC_OK;
	switch (rpc) {
	case DMN_GRPC_SERVER_LIVE:
		ask->kind = DMN_OIP_LIVE;
		*out = verb("health", id, NULL, NULL, token);
		break;
	case DMN_GRPC_SERVER_READY:
		ask->kind = DMN_OIP_READY;
		*out = verb("health", id, NULL, NULL, token);
		break;
	case DMN_GRPC_SERVER_META:
		ask->kind = DMN_OIP_SERVER_META;
		*out = verb("hello", id, NULL, NULL, token);
		break;
	case DMN_GRPC_MODEL_READY:
	case DMN_GRPC_MODEL_META:
	case DMN_GRPC_MODEL_CONFIG: {
		/* the three requests are {name = 1, version = 2} */
		const Inference__ModelReadyRequest *q = (const Inference__ModelReadyRequest *)m;
		ask->kind = rpc == DMN_GRPC_MODEL_READY  ? DMN_OIP_MODEL_READY
			    : rpc == DMN_GRPC_MODEL_META ? DMN_OIP_MODEL_META
							 : DMN_OIP_MODEL_CONFIG;
		if (!(rc = model_ref(q->name, q->version, ask, err, errlen)))
			*out = verb("model.list", id, NULL, NULL, token);
		break;
	}
	case DMN_GRPC_MODEL_STATS: {
		const Inference__ModelStatisticsRequest *q = (const Inference__ModelStatisticsRequest *)m;
		ask->kind = DMN_OIP_STATS;
		if (!q->name[0] || !(rc = model_ref(q->name, q->version, ask, err, errlen)))
			*out = verb("stats", id, NULL, NULL, token);
		break;
	}
	case DMN_GRPC_REPO_INDEX:
		ask->kind = DMN_OIP_REPO_INDEX;
		*out = verb("repo.index", id, NULL, NULL, token);
		break;
	case DMN_GRPC_REPO_LOAD: { /* the model repository's (config repository): answered when it serves */
		const Inference__RepositoryModelLoadRequest *q = (const Inference__RepositoryModelLoadRequest *)m;
		ask->kind = DMN_OIP_LOAD;
		if (!(rc = model_ref(q->model_name, "", ask, err, errlen)))
			*out = verb("repo.load", id, "name", ask->model, token);
		break;
	}
	case DMN_GRPC_REPO_UNLOAD: {
		const Inference__RepositoryModelUnloadRequest *q = (const Inference__RepositoryModelUnloadRequest *)m;
		ask->kind = DMN_OIP_UNLOAD;
		if (!(rc = model_ref(q->model_name, "", ask, err, errlen)))
			*out = verb("model.unload", id, "name", ask->model, token);
		break;
	}
	case DMN_GRPC_SHM_STATUS:
	case DMN_GRPC_SHM_UNREGISTER: { /* both {name = 1}; "" every region */
		const char *name = ((const Inference__SystemSharedMemoryStatusRequest *)m)->name;
		ask->kind = rpc == DMN_GRPC_SHM_STATUS ? DMN_OIP_SHM_STATUS : DMN_OIP_SHM_UNREGISTER;
		if (name[0] && !dmn_name_valid(name, strlen(name)))
			rc = fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "name: 1..64 bytes of [A-Za-z0-9_.-]");
		else
			*out = verb(rpc == DMN_GRPC_SHM_STATUS ? "sysshm.status" : "sysshm.unregister", id, name[0] ? "name" : NULL,
				    name, token);
		break;
	}
	case DMN_GRPC_SHM_REGISTER: {
		const Inference__SystemSharedMemoryRegisterRequest *q = (const Inference__SystemSharedMemoryRegisterRequest *)m;
		ask->kind = DMN_OIP_SHM_REGISTER;
		cJSON *h = cJSON_CreateObject();
		if (h && cJSON_AddNumberToObject(h, "id", (double)id) && cJSON_AddStringToObject(h, "verb", "sysshm.register") &&
		    cJSON_AddStringToObject(h, "name", q->name) && cJSON_AddStringToObject(h, "key", q->key) &&
		    cJSON_AddNumberToObject(h, "offset", (double)q->offset) &&
		    cJSON_AddNumberToObject(h, "byte_size", (double)q->byte_size) &&
		    (!token || cJSON_AddStringToObject(h, "token", token))) {
			void *mb;
			size_t ml;
			proto_err pe;
			if (proto_encode(h, NULL, 0, 0, dmn_oip_msg_alloc, out, &mb, &ml, &pe) != TSD_OK) {
				if (*out)
					nng_msg_free(*out);
				*out = NULL;
				rc = fail(err, errlen, DMN_GRPC_INVALID_ARGUMENT, "%s", pe.msg);
			}
		}
		cJSON_Delete(h);
		break;
	}
	default: /* INFER, STREAM_INFER */
		ask->kind = DMN_OIP_INFER;
		rc = infer_msg(lim, (const Inference__ModelInferRequest *)m, id, token, ask, out, err, errlen);
		break;
	}
	protobuf_c_message_free_unpacked(m, NULL);
	if (!rc && !*out)
		rc = fail(err, errlen, DMN_GRPC_UNAVAILABLE, "out of memory");
	return rc;
}
