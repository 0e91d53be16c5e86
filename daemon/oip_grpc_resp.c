/* oip_grpc_resp.c: a TSD1 reply turned into the Open Inference Protocol's gRPC response. The
 * content is oip_resp.c's (the HTTP answer's JSON, Triton's JSON form of the same messages),
 * moved field by field into the protobuf-c message by its descriptor (the names are the same),
 * and infer outputs appended as raw_output_contents. Loop thread (cJSON parses here). */
#include "oip_grpc_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* generated from protocol/grpc_service.proto into $(BUILD)/gen (a library's header) */
#include <grpc_service.pb-c.h>

/* ---- JSON into a protobuf-c message, by its descriptor ---- */

static ProtobufCMessage *from_json(const ProtobufCMessageDescriptor *d, const cJSON *o);

static size_t elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	default:
		return 4;
	}
}

/* A JSON number, or a string of one (Triton writes 64-bit counts as either). */
static bool json_num(const cJSON *v, double *x)
{
	if (cJSON_IsNumber(v)) {
		*x = v->valuedouble;
		return true;
	}
	if (cJSON_IsString(v) && v->valuestring[0]) {
		char *end;
		*x = strtod(v->valuestring, &end);
		return !*end;
	}
	return false;
}

/* v into the field's storage at slot; false: v does not fit the field (left unset). */
static bool set_value(const ProtobufCFieldDescriptor *f, void *slot, const cJSON *v)
{
	double x = 0;
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		char num[32];
		const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
		if (!s && cJSON_IsNumber(v)) {
			snprintf(num, sizeof(num), "%lld", (long long)v->valuedouble);
			s = num;
		}
		char *c = s ? strdup(s) : NULL;
		if (!c)
			return false;
		*(char **)slot = c;
		return true;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if (!cJSON_IsBool(v))
			return false;
		*(protobuf_c_boolean *)slot = cJSON_IsTrue(v);
		return true;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *e =
			cJSON_IsString(v) ? protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, v->valuestring) : NULL;
		if (e)
			*(int32_t *)slot = e->value;
		else if (cJSON_IsNumber(v))
			*(int32_t *)slot = (int32_t)v->valueint;
		return e || cJSON_IsNumber(v);
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage *m = cJSON_IsObject(v) ? from_json(f->descriptor, v) : NULL;
		*(ProtobufCMessage **)slot = m;
		return m != NULL;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return false;
	default:
		if (!json_num(v, &x))
			return false;
		switch (f->type) {
		case PROTOBUF_C_TYPE_INT64:
		case PROTOBUF_C_TYPE_SINT64:
		case PROTOBUF_C_TYPE_SFIXED64:
			*(int64_t *)slot = (int64_t)x;
			break;
		case PROTOBUF_C_TYPE_UINT64:
		case PROTOBUF_C_TYPE_FIXED64:
			*(uint64_t *)slot = x > 0 ? (uint64_t)x : 0;
			break;
		case PROTOBUF_C_TYPE_UINT32:
		case PROTOBUF_C_TYPE_FIXED32:
			*(uint32_t *)slot = x > 0 ? (uint32_t)x : 0;
			break;
		case PROTOBUF_C_TYPE_FLOAT:
			*(float *)slot = (float)x;
			break;
		case PROTOBUF_C_TYPE_DOUBLE:
			*(double *)slot = x;
			break;
		default:
			*(int32_t *)slot = (int32_t)x;
			break;
		}
		return true;
	}
}

/* A repeated field from a JSON array, or a map (a repeated key/value entry) from an object. */
static void set_repeated(const ProtobufCFieldDescriptor *f, ProtobufCMessage *m, const cJSON *v)
{
	bool map = f->type == PROTOBUF_C_TYPE_MESSAGE && cJSON_IsObject(v);
	if (!cJSON_IsArray(v) && !map)
		return;
	size_t cap = (size_t)cJSON_GetArraySize(v), n = 0, esz = elem_size(f->type);
	char *arr = cap ? calloc(cap, esz) : NULL;
	if (!arr)
		return;
	const cJSON *e;
	cJSON_ArrayForEach(e, v)
	{
		if (map) {
			const ProtobufCMessageDescriptor *ed = f->descriptor;
			ProtobufCMessage *entry = calloc(1, ed->sizeof_message);
			if (!entry)
				break;
			ed->message_init(entry);
			/* an entry is {key = 1, value = 2} */
			cJSON key = {.type = cJSON_String, .valuestring = e->string};
			bool ok = set_value(&ed->fields[0], (char *)entry + ed->fields[0].offset, &key) &&
				  set_value(&ed->fields[1], (char *)entry + ed->fields[1].offset, e);
			if (!ok) { /* a value of another form (an HTTP-only parameter): left out */
				protobuf_c_message_free_unpacked(entry, NULL);
				continue;
			}
			((ProtobufCMessage **)arr)[n++] = entry;
		} else if (set_value(f, arr + n * esz, e)) {
			n++;
		}
	}
	*(size_t *)((char *)m + f->quantifier_offset) = n;
	*(void **)((char *)m + f->offset) = arr;
}

/* A new message of d from JSON object o (fields by name; those d lacks are skipped). The caller
 * frees it with protobuf_c_message_free_unpacked; NULL when out of memory. */
static ProtobufCMessage *from_json(const ProtobufCMessageDescriptor *d, const cJSON *o)
{
	ProtobufCMessage *m = calloc(1, d->sizeof_message);
	if (!m)
		return NULL;
	d->message_init(m);
	const cJSON *c;
	cJSON_ArrayForEach(c, o)
	{
		const ProtobufCFieldDescriptor *f = c->string ? protobuf_c_message_descriptor_get_field_by_name(d, c->string) : NULL;
		if (!f)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			set_repeated(f, m, c);
			continue;
		}
		if (!set_value(f, (char *)m + f->offset, c))
			continue;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
			*(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
		else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
			*(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
	}
	return m;
}

/* ---- bytes ---- */

static void put_varint(dmn_buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;
	do {
		t[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			t[n] |= 0x80;
		n++;
	} while (v);
	dmn_buf_put(b, t, n);
}

/* A length-delimited field (wire type 2) of number field. */
static void put_field(dmn_buf *b, unsigned field, const void *p, size_t n)
{
	put_varint(b, (uint64_t)field << 3 | 2);
	put_varint(b, n);
	dmn_buf_put(b, p, n);
}

static void pack(dmn_buf *b, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	if (!n)
		return;
	uint8_t *tmp = malloc(n);
	if (!tmp) {
		b->oom = true;
		return;
	}
	protobuf_c_message_pack(m, tmp);
	dmn_buf_put(b, tmp, n);
	free(tmp);
}

void dmn_grpc_stream_error(dmn_buf *out, const char *msg)
{
	put_field(out, 1, msg, strlen(msg)); /* ModelStreamInferResponse.error_message */
}

/* The message of d from JSON text j (the answer's), packed into out. */
static int pack_json(const ProtobufCMessageDescriptor *d, const cJSON *j, dmn_buf *out, char *err, size_t errlen)
{
	ProtobufCMessage *m = from_json(d, j);
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return DMN_GRPC_UNAVAILABLE;
	}
	pack(out, m);
	protobuf_c_message_free_unpacked(m, NULL);
	return DMN_GRPC_OK;
}

/* An output's plain parameters (the HTTP answer's: shared_memory_region, _byte_size, _offset)
 * as InferParameter objects; binary_data_size, which raw contents replace, dropped. */
static void output_params(cJSON *j)
{
	cJSON *o;
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "outputs"))
	{
		cJSON *ps = cJSON_GetObjectItemCaseSensitive(o, "parameters");
		if (!cJSON_IsObject(ps))
			continue;
		cJSON_DeleteItemFromObjectCaseSensitive(ps, "binary_data_size");
		for (cJSON *p = ps->child; p; p = p->next) {
			cJSON *w = cJSON_CreateObject();
			if (!w)
				continue;
			if (cJSON_IsString(p))
				cJSON_AddStringToObject(w, "string_param", p->valuestring);
			else if (cJSON_IsNumber(p))
				cJSON_AddNumberToObject(w, "int64_param", p->valuedouble);
			else if (cJSON_IsBool(p))
				cJSON_AddBoolToObject(w, "bool_param", cJSON_IsTrue(p));
			w->string = p->string; /* the key moves with it (the replacement does not copy it) */
			p->string = NULL;
			cJSON_ReplaceItemViaPointer(ps, p, w);
			p = w;
		}
	}
}

/* ModelInferResponse: the answer's JSON (outputs without their data) and each output's bytes
 * as raw_output_contents (field 6, in the outputs' order). */
static int infer_response(cJSON *j, const dmn_oip_answer *a, dmn_buf *out, char *err, size_t errlen)
{
	output_params(j);
	int rc = pack_json(&inference__model_infer_response__descriptor, j, out, err, errlen);
	for (int i = 0; !rc && i < a->nparts; i++)
		put_field(out, 6, a->part[i], a->part_len[i]);
	return rc;
}

/* The status code of an error answer: the daemon's status, else oip_resp.c's HTTP code. */
static int error_code(const dmn_oip_answer *a)
{
	if (a->status != TSD_OK)
		return dmn_oip_grpc_code(a->status);
	switch (a->code) {
	case 400:
	case 413:
		return DMN_GRPC_INVALID_ARGUMENT;
	case 401:
		return DMN_GRPC_UNAUTHENTICATED;
	case 404:
		return DMN_GRPC_NOT_FOUND;
	case 503:
		return DMN_GRPC_UNAVAILABLE;
	default:
		return DMN_GRPC_INTERNAL;
	}
}

/* A response of one bool field (ready, live) = 1. */
static void put_bool(dmn_buf *out, bool v)
{
	if (v)
		dmn_buf_put(out, "\x08\x01", 2); /* field 1, varint 1; false is the empty message */
}

static int answer(dmn_grpc_rpc rpc, const dmn_oip_ask *ask, const dmn_oip_answer *a, dmn_buf *out, char *err,
		  size_t errlen)
{
	bool ok = a->code == 200;
	if (rpc == DMN_GRPC_SERVER_READY || rpc == DMN_GRPC_SERVER_LIVE || rpc == DMN_GRPC_MODEL_READY) {
		/* not ready (or no such model or version): ready false, not an error */
		if (!ok && (a->status == TSD_UNAUTHORISED || a->json.oom)) {
			snprintf(err, errlen, "%s", a->status == TSD_UNAUTHORISED ? "unauthorised" : "out of memory");
			return error_code(a);
		}
		put_bool(out, ok);
		return DMN_GRPC_OK;
	}
	cJSON *j = a->json.p ? cJSON_ParseWithLength(a->json.p, a->json.len) : NULL;
	if (!ok) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		snprintf(err, errlen, "%s", cJSON_IsString(e) ? e->valuestring : "error");
		cJSON_Delete(j);
		return error_code(a);
	}
	if (a->empty) { /* unload: an empty message */
		cJSON_Delete(j);
		return DMN_GRPC_OK;
	}
	if (!j) {
		snprintf(err, errlen, "the answer did not parse");
		return DMN_GRPC_INTERNAL;
	}
	int rc;
	switch (rpc) {
	case DMN_GRPC_SERVER_META:
		rc = pack_json(&inference__server_metadata_response__descriptor, j, out, err, errlen);
		break;
	case DMN_GRPC_MODEL_META:
		rc = pack_json(&inference__model_metadata_response__descriptor, j, out, err, errlen);
		break;
	case DMN_GRPC_MODEL_CONFIG: {
		cJSON *w = cJSON_CreateObject();
		if (w)
			cJSON_AddItemReferenceToObject(w, "config", j);
		rc = w ? pack_json(&inference__model_config_response__descriptor, w, out, err, errlen) : DMN_GRPC_UNAVAILABLE;
		cJSON_Delete(w);
		break;
	}
	case DMN_GRPC_MODEL_STATS:
		rc = pack_json(&inference__model_statistics_response__descriptor, j, out, err, errlen);
		break;
	case DMN_GRPC_SHM_STATUS: { /* [{name, key, offset, byte_size}] into the map regions */
		cJSON *w = cJSON_CreateObject(), *rg = w ? cJSON_AddObjectToObject(w, "regions") : NULL, *e;
		cJSON_ArrayForEach(e, j)
		{
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
			if (rg && cJSON_IsString(n))
				cJSON_AddItemReferenceToObject(rg, n->valuestring, e);
		}
		rc = rg ? pack_json(&inference__system_shared_memory_status_response__descriptor, w, out, err, errlen)
			: DMN_GRPC_UNAVAILABLE;
		cJSON_Delete(w);
		break;
	}
	case DMN_GRPC_REPO_INDEX: {
		cJSON *w = cJSON_CreateObject();
		if (w)
			cJSON_AddItemReferenceToObject(w, "models", j);
		rc = w ? pack_json(&inference__repository_index_response__descriptor, w, out, err, errlen) : DMN_GRPC_UNAVAILABLE;
		cJSON_Delete(w);
		break;
	}
	default: /* INFER, STREAM_INFER */
		rc = infer_response(j, a, out, err, errlen);
		break;
	}
	(void)ask;
	cJSON_Delete(j);
	if (!rc && out->oom) {
		snprintf(err, errlen, "out of memory");
		rc = DMN_GRPC_UNAVAILABLE;
	}
	return rc;
}

int dmn_grpc_answer(dmn_grpc_rpc rpc, const dmn_oip_ask *ask, const void *reply, size_t len, dmn_buf *out, char *err,
		    size_t errlen)
{
	dmn_oip_answer a;
	dmn_oip_answer_make(ask, reply, len, &a);
	int rc;
	if (rpc != DMN_GRPC_STREAM_INFER) {
		rc = answer(rpc, ask, &a, out, err, errlen);
	} else {
		dmn_buf inner = {0};
		rc = answer(rpc, ask, &a, &inner, err, errlen);
		if (rc)
			dmn_grpc_stream_error(out, err);
		else
			put_field(out, 2, inner.p ? inner.p : "", inner.len); /* ModelStreamInferResponse.infer_response */
		rc = inner.oom || out->oom ? DMN_GRPC_UNAVAILABLE : DMN_GRPC_OK;
		dmn_buf_free(&inner);
		if (rc)
			snprintf(err, errlen, "out of memory");
	}
	dmn_oip_answer_free(&a);
	return rc;
}
