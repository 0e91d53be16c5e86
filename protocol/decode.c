/* decode.c: validating decoder of one message (message.h): every length, field, shape and byte
 * range is checked before a view into the message is handed out; errors name the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

#define BAD(...) proto_fail(err, TSD_BAD_REQUEST, __VA_ARGS__)

bool proto_json_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out)
{
	if (!cJSON_IsNumber(j))
		return false;
	double d = j->valuedouble;
	/* the range test first: casting an out-of-range double to int64 is undefined */
	if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d)
		return false;
	*out = (int64_t)d;
	return true;
}

static uint32_t rd_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static tsd_status parse_id(const cJSON *id, proto_msg *m, proto_err *err)
{
	if (cJSON_IsString(id)) {
		size_t n = strlen(id->valuestring);
		if (n > PROTO_MAX_ID)
			return BAD("id: %zu bytes, at most %d", n, PROTO_MAX_ID);
		m->id_is_str = true;
		memcpy(m->id, id->valuestring, n + 1);
		return TSD_OK;
	}
	int64_t v;
	/* integers beyond 2^53 would not survive a JSON double */
	if (!proto_json_int(id, -((int64_t)1 << 53), (int64_t)1 << 53, &v))
		return BAD("id: %s", id ? "not a string or an integer up to 2^53" : "missing");
	m->id_int = v;
	snprintf(m->id, sizeof(m->id), "%lld", (long long)v);
	return TSD_OK;
}

/* tensors[i]: name, dtype, shape, nbytes; offset checked against the message by the caller. */
static tsd_status parse_tensor(const cJSON *o, int i, proto_tensor *t, int64_t *off, proto_err *err)
{
	if (!cJSON_IsObject(o))
		return BAD("tensors[%d]: not an object", i);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
	if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > PROTO_MAX_NAME)
		return BAD("tensors[%d].name: %s", i, !name ? "missing" : !cJSON_IsString(name) ?
			   "not a string" : !name->valuestring[0] ? "empty" : "longer than 128 bytes");
	t->name = name->valuestring;
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
	if (!cJSON_IsString(dt))
		return BAD("tensors[%d] (%s).dtype: %s", i, t->name, dt ? "not a string" : "missing");
	if (!tsd_dtype_parse(dt->valuestring, &t->dtype))
		return BAD("tensors[%d] (%s).dtype: unknown dtype '%.32s'", i, t->name, dt->valuestring);
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
	if (!cJSON_IsArray(sh))
		return BAD("tensors[%d] (%s).shape: %s", i, t->name, sh ? "not an array" : "missing");
	int nd = cJSON_GetArraySize(sh);
	if (nd > TSD_MAX_DIMS)
		return BAD("tensors[%d] (%s).shape: rank %d, at most %d", i, t->name, nd, TSD_MAX_DIMS);
	t->ndim = nd;
	uint64_t numel = 1;
	bool overflow = false, zero = false;
	for (int d = 0; d < nd; d++) {
		const cJSON *e = cJSON_GetArrayItem(sh, d);
		if (cJSON_IsNumber(e) && e->valuedouble < 0)
			return BAD("tensors[%d] (%s).shape[%d]: %g is negative", i, t->name, d, e->valuedouble);
		if (!proto_json_int(e, 0, PROTO_MAX_DIM, &t->shape[d]))
			return BAD("tensors[%d] (%s).shape[%d]: not an integer in [0, 2^40]", i, t->name, d);
		overflow |= __builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel);
		zero |= t->shape[d] == 0;
	}
	uint64_t bytes;
	overflow |= __builtin_mul_overflow(numel, (uint64_t)tsd_dtype_size(t->dtype), &bytes);
	/* a zero dim makes the product 0 whatever overflowed (a wrapped product may read 0 too) */
	if (zero)
		bytes = 0;
	else if (overflow)
		return BAD("tensors[%d] (%s).shape: the byte size overflows", i, t->name);
	int64_t nb;
	if (!proto_json_int(cJSON_GetObjectItemCaseSensitive(o, "nbytes"), 0, INT64_MAX / 2, &nb))
		return BAD("tensors[%d] (%s).nbytes: missing or not a non-negative integer", i, t->name);
	if ((uint64_t)nb != bytes)
		return BAD("tensors[%d] (%s).nbytes: %lld, but shape x dtype is %llu bytes", i, t->name,
			   (long long)nb, (unsigned long long)bytes);
	t->nbytes = (size_t)nb;
	if (!proto_json_int(cJSON_GetObjectItemCaseSensitive(o, "offset"), 0, INT64_MAX / 2, off))
		return BAD("tensors[%d] (%s).offset: missing or not a non-negative integer", i, t->name);
	if (*off % PROTO_ALIGN)
		return BAD("tensors[%d] (%s).offset: %lld is not a multiple of %d", i, t->name,
			   (long long)*off, PROTO_ALIGN);
	return TSD_OK;
}

static int by_offset(const void *a, const void *b, void *arg)
{
	const int64_t *off = arg;
	int64_t x = off[*(const int *)a], y = off[*(const int *)b];
	return (x > y) - (x < y);
}

/* Payload ranges inside the message, pairwise disjoint; no bytes after the last but padding. */
static tsd_status place_payloads(proto_msg *m, const int64_t *off, const uint8_t *buf, size_t len,
				 size_t area, proto_err *err)
{
	int order[PROTO_MAX_TENSORS];
	size_t end = area;
	for (int i = 0; i < m->ntensors; i++) {
		proto_tensor *t = &m->tensors[i];
		order[i] = i;
		if ((uint64_t)off[i] > len - area || t->nbytes > len - area - (uint64_t)off[i])
			return BAD("tensors[%d] (%s): bytes [%lld, %lld) of the payload area are past the "
				   "end of the message (%zu bytes there)", i, t->name, (long long)off[i],
				   (long long)off[i] + (long long)t->nbytes, len - area);
		t->data = buf + area + off[i];
		if (area + off[i] + t->nbytes > end)
			end = area + (size_t)off[i] + t->nbytes;
	}
	qsort_r(order, (size_t)m->ntensors, sizeof(int), by_offset, (void *)off);
	for (int k = 1; k < m->ntensors; k++) {
		int a = order[k - 1], b = order[k];
		if ((uint64_t)off[a] + m->tensors[a].nbytes > (uint64_t)off[b])
			return BAD("tensors[%d] (%s) and tensors[%d] (%s): payloads overlap", a,
				   m->tensors[a].name, b, m->tensors[b].name);
	}
	if (len > (end + PROTO_ALIGN - 1) / PROTO_ALIGN * PROTO_ALIGN)
		return BAD("message: %zu bytes after the last payload", len - end);
	return TSD_OK;
}

static tsd_status decode_json(proto_msg *m, const uint8_t *buf, size_t len, proto_kind kind,
			      proto_err *err)
{
	const cJSON *j = m->json;
	if (!cJSON_IsObject(j))
		return BAD("header: not a JSON object");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	/* a reply to a request too broken to have an id carries a null one */
	tsd_status s = kind == PROTO_REPLY && cJSON_IsNull(id) ? TSD_OK : parse_id(id, m, err);
	if (s)
		return s;
	const cJSON *verb = cJSON_GetObjectItemCaseSensitive(j, "verb");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	if (kind == PROTO_REQUEST) {
		if (!cJSON_IsString(verb) || !verb->valuestring[0])
			return BAD("verb: %s", verb ? "not a non-empty string" : "missing");
		m->verb = verb->valuestring;
	} else {
		if (!cJSON_IsString(st) || !tsd_status_from_name(st->valuestring, &m->status))
			return BAD("status: %s", st ? "not a known status name" : "missing");
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		if (e && !cJSON_IsString(e))
			return BAD("error: not a string");
		m->error = e ? e->valuestring : NULL;
	}
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
	if (ts && !cJSON_IsArray(ts))
		return BAD("tensors: not an array");
	int n = ts ? cJSON_GetArraySize(ts) : 0;
	if (n > PROTO_MAX_TENSORS)
		return BAD("tensors: %d entries, at most %d", n, PROTO_MAX_TENSORS);
	int64_t off[PROTO_MAX_TENSORS];
	m->ntensors = n;
	for (int i = 0; i < n; i++) {
		if ((s = parse_tensor(cJSON_GetArrayItem(ts, i), i, &m->tensors[i], &off[i], err)))
			return s;
		for (int k = 0; k < i; k++)
			if (!strcmp(m->tensors[k].name, m->tensors[i].name))
				return BAD("tensors[%d].name: '%s' is also tensors[%d]", i, m->tensors[i].name, k);
	}
	size_t jl = rd_u32(buf + 4);
	size_t area = (PROTO_PREFIX + jl + PROTO_ALIGN - 1) / PROTO_ALIGN * PROTO_ALIGN;
	if (n && area > len)
		return BAD("message: %zu bytes end before the payload area at %zu", len, area);
	return n ? place_payloads(m, off, buf, len, area, err) :
		   len > area ? BAD("message: %zu bytes after the header", len - PROTO_PREFIX - jl) : TSD_OK;
}

tsd_status proto_decode(const void *data, size_t len, size_t max_len, proto_kind kind,
			proto_msg *m, proto_err *err)
{
	size_t max_header = kind == PROTO_REQUEST && max_len > PROTO_HEADER_MAX_DEFAULT ? PROTO_HEADER_MAX_DEFAULT : max_len;
	return proto_decode_hdr(data, len, max_len, max_header, kind, m, err);
}

tsd_status proto_decode_hdr(const void *data, size_t len, size_t max_len, size_t max_header, proto_kind kind,
			    proto_msg *m, proto_err *err)
{
	const uint8_t *buf = data;
	memset(m, 0, offsetof(proto_msg, tensors));
	if (len > max_len)
		return proto_fail(err, TSD_TOO_LARGE, "message: %zu bytes, at most %zu", len, max_len);
	if (len < PROTO_PREFIX)
		return BAD("message: %zu bytes, shorter than the 8-byte prefix", len);
	if (memcmp(buf, PROTO_MAGIC, 4))
		return BAD("message: bad magic (not \"TSD1\")");
	size_t jl = rd_u32(buf + 4);
	/* before anything is copied or parsed: cJSON's tree costs ~40x the text */
	if (jl > max_header)
		return proto_fail(err, TSD_TOO_LARGE, "header: %zu bytes of JSON, at most %zu (max_header_bytes)", jl,
				  max_header);
	if (jl > len - PROTO_PREFIX)
		return BAD("message: JSON length %zu past the end (%zu bytes follow)", jl, len - PROTO_PREFIX);
	/* a NUL-terminated copy: cJSON reads strings to their NUL; NULs inside the text stop the
	 * parse early and are caught by the end check */
	char *text = malloc(jl + 1);
	if (!text)
		return proto_fail(err, TSD_OUT_OF_MEMORY, "message: no memory for the header");
	memcpy(text, buf + PROTO_PREFIX, jl);
	text[jl] = 0;
	const char *end = NULL;
	m->json = cJSON_ParseWithLengthOpts(text, jl, &end, false);
	size_t at = end ? (size_t)(end - text) : 0;
	free(text);
	if (!m->json)
		return BAD("header: malformed JSON near byte %zu", at);
	while (at < jl && (buf[PROTO_PREFIX + at] == ' ' || buf[PROTO_PREFIX + at] == '\t' ||
			   buf[PROTO_PREFIX + at] == '\r' || buf[PROTO_PREFIX + at] == '\n'))
		at++;
	tsd_status s = at < jl ? BAD("header: bytes after the JSON value at %zu", at) :
				 decode_json(m, buf, len, kind, err);
	if (s)
		proto_msg_free(m);
	return s;
}

void proto_msg_free(proto_msg *m)
{
	cJSON_Delete(m->json);
	m->json = NULL;
	m->ntensors = 0;
}

const proto_tensor *proto_msg_tensor(const proto_msg *m, const char *name)
{
	for (int i = 0; i < m->ntensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return &m->tensors[i];
	return NULL;
}
