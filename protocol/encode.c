/* encode.c: writes one message (message.h) from a header object and tensors, straight into the
 * caller's buffer (an nng_msg body in the daemon), and builds reply headers. */
#include <stdlib.h>
#include <string.h>

#include "message.h"

static void *malloc_alloc(void *arg, size_t size)
{
	(void)arg;
	return malloc(size ? size : 1);
}

static size_t align_up(size_t n)
{
	return (n + PROTO_ALIGN - 1) / PROTO_ALIGN * PROTO_ALIGN;
}

/* The tensors' byte sizes into nbytes, checked; *area_len receives the payload area's size. */
static tsd_status tensor_sizes(const proto_out *ts, int n, size_t *nbytes, size_t *area_len, proto_err *err)
{
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		const proto_out *t = &ts[i];
		const char *why = !t->name || !t->name[0] ? "no name" : !tsd_dtype_valid(t->dtype) ?
			"bad dtype" : t->ndim < 0 || t->ndim > TSD_MAX_DIMS ? "bad rank" : NULL;
		uint64_t numel = 1;
		bool over = false, zero = false;
		for (int d = 0; !why && d < t->ndim; d++) {
			if (t->shape[d] < 0 || t->shape[d] > PROTO_MAX_DIM)
				why = "a dimension out of [0, 2^40]";
			else
				over |= __builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel);
			zero |= !why && t->shape[d] == 0;
		}
		uint64_t b = 0;
		over |= __builtin_mul_overflow(numel, (uint64_t)tsd_dtype_size(t->dtype), &b);
		if (zero)
			numel = b = 0; /* a wrapped product is no size: a zero dim is */
		else if (!why && over)
			why = "the byte size overflows";
		if (!why && numel && !t->data)
			why = "no data";
		if (!why && (b > SIZE_MAX / 2 || off > SIZE_MAX / 2 - b))
			why = "too large";
		if (why)
			return proto_fail(err, TSD_BAD_REQUEST, "encode: tensors[%d]: %s", i, why);
		nbytes[i] = (size_t)b;
		off = align_up(off + nbytes[i]);
	}
	*area_len = off;
	return TSD_OK;
}

/* The header's text: its fields (any "tensors" of its own replaced) and the tensors array with
 * each tensor's name, dtype, shape, offset and nbytes. */
static void header_text(proto_jw *w, const cJSON *header, const proto_out *ts, int n, const size_t *nbytes)
{
	proto_jw_put(w, "{", 1);
	int k = proto_jw_fields(w, header, "tensors");
	if (n) {
		proto_jw_put(w, k ? ",\"tensors\":[" : "\"tensors\":[", k ? 12 : 11);
		size_t off = 0;
		for (int i = 0; i < n; i++) {
			const proto_out *t = &ts[i];
			proto_jw_put(w, i ? ",{\"name\":" : "{\"name\":", i ? 9 : 8);
			proto_jw_str(w, t->name);
			proto_jw_put(w, ",\"dtype\":", 9);
			proto_jw_str(w, tsd_dtype_name(t->dtype));
			proto_jw_put(w, ",\"shape\":[", 10);
			for (int d = 0; d < t->ndim; d++) {
				if (d)
					proto_jw_put(w, ",", 1);
				proto_jw_int(w, t->shape[d]);
			}
			proto_jw_put(w, "],\"offset\":", 11);
			proto_jw_int(w, (int64_t)off);
			proto_jw_put(w, ",\"nbytes\":", 10);
			proto_jw_int(w, (int64_t)nbytes[i]);
			proto_jw_put(w, "}", 1);
			off = align_up(off + nbytes[i]);
		}
		proto_jw_put(w, "]", 1);
	}
	proto_jw_put(w, "}", 1);
}

tsd_status proto_encode(const cJSON *header, const proto_out *ts, int n, size_t max_len,
			proto_alloc_fn alloc, void *arg, void **out, size_t *out_len, proto_err *err)
{
	*out = NULL;
	*out_len = 0;
	if (!cJSON_IsObject(header) || n < 0 || n > PROTO_MAX_TENSORS)
		return proto_fail(err, TSD_BAD_REQUEST, "encode: %s", !cJSON_IsObject(header) ?
				  "the header is not an object" : "bad tensor count");
	size_t nbytes[PROTO_MAX_TENSORS], area_len = 0;
	tsd_status s = tensor_sizes(ts, n, nbytes, &area_len, err);
	if (s != TSD_OK)
		return s;
	char stack[2048];
	proto_jw w = {.p = stack, .cap = sizeof(stack)};
	header_text(&w, header, ts, n, nbytes);
	if (w.failed) {
		proto_jw_free(&w);
		return proto_fail(err, TSD_OUT_OF_MEMORY, "encode: no memory");
	}
	size_t jl = w.len;
	size_t area = align_up(PROTO_PREFIX + jl);
	/* the last payload is not padded: the message ends where its bytes do */
	size_t total = n ? area + area_len - align_up(nbytes[n - 1]) + nbytes[n - 1] : PROTO_PREFIX + jl;
	uint8_t *buf = NULL;
	if (jl > UINT32_MAX || (max_len && total > max_len))
		s = proto_fail(err, TSD_TOO_LARGE, "encode: %zu bytes, at most %zu", total, max_len);
	else if (!(buf = (alloc ? alloc : malloc_alloc)(arg, total)))
		s = proto_fail(err, TSD_OUT_OF_MEMORY, "encode: no memory for %zu bytes", total);
	if (s != TSD_OK) {
		proto_jw_free(&w);
		return s;
	}
	memcpy(buf, PROTO_MAGIC, 4);
	for (int k = 0; k < 4; k++)
		buf[4 + k] = (uint8_t)(jl >> (8 * k));
	memcpy(buf + PROTO_PREFIX, w.p, jl);
	proto_jw_free(&w);
	/* padding is zeroed: no stale memory of the daemon goes out on the wire */
	memset(buf + PROTO_PREFIX + jl, 0, (n ? area : total) - PROTO_PREFIX - jl);
	size_t off = area;
	for (int i = 0; i < n; i++) {
		if (nbytes[i])
			memcpy(buf + off, ts[i].data, nbytes[i]);
		size_t next = off + align_up(nbytes[i]);
		if (i + 1 < n)
			memset(buf + off + nbytes[i], 0, next - off - nbytes[i]);
		off = next;
	}
	*out = buf;
	*out_len = total;
	return TSD_OK;
}

cJSON *proto_reply_header(const proto_msg *req, tsd_status s, const char *msg)
{
	cJSON *h = cJSON_CreateObject();
	if (!h)
		return NULL;
	cJSON *id = !req || !req->json ? cJSON_CreateNull() : req->id_is_str ?
		cJSON_CreateString(req->id) : cJSON_CreateNumber((double)req->id_int);
	cJSON_AddItemToObject(h, "id", id);
	cJSON_AddStringToObject(h, "status", tsd_status_name(s));
	if (s != TSD_OK)
		cJSON_AddStringToObject(h, "error", msg ? msg : tsd_status_message(s));
	if (!id || !cJSON_GetObjectItemCaseSensitive(h, "status")) {
		cJSON_Delete(h);
		return NULL;
	}
	return h;
}
