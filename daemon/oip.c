/* oip.c: what the Open Inference Protocol's frontends share (oip.h): datatype names, the HTTP
 * status of each TSD1 status, a byte buffer for the answers, and the TSD1 requests without
 * tensors that health, metadata and statistics become. */
#include "oip.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(dmn_buf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1) {
		if (cap > SIZE_MAX / 2) {
			b->oom = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void dmn_buf_put(dmn_buf *b, const void *p, size_t n)
{
	if (!n || !grow(b, n))
		return;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
}

void dmn_buf_str(dmn_buf *b, const char *s)
{
	dmn_buf_put(b, s, strlen(s));
}

void dmn_buf_printf(dmn_buf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		dmn_buf_put(b, small, (size_t)n);
		return;
	}
	if (!grow(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* The length of the well-formed UTF-8 sequence at s[0..n) (n > 0, s[0] >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	if (!len || len > n)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	/* no overlong forms, surrogates or code points past U+10FFFF */
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
	    (s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return len;
}

void dmn_buf_json(dmn_buf *b, const char *s, size_t n)
{
	dmn_buf_put(b, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t u = c >= 0x80 ? utf8_len((const unsigned char *)s + i, n - i) : 0;
		if (u) { /* well-formed: as it is */
			i += u;
			continue;
		}
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			i++;
			continue;
		}
		dmn_buf_put(b, s + run, i - run);
		run = ++i;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			dmn_buf_put(b, e, 2);
		} else if (c < 0x20) {
			dmn_buf_printf(b, "\\u%04x", c);
		} else { /* a byte of no UTF-8 sequence (a client's text quoted in a message) */
			dmn_buf_str(b, "\\ufffd");
		}
	}
	dmn_buf_put(b, s + run, n - run);
	dmn_buf_put(b, "\"", 1);
}

void dmn_buf_free(dmn_buf *b)
{
	free(b->p);
	*b = (dmn_buf){0};
}

/* The protocol's datatypes; those tensord has tensors of carry theirs. */
static const struct {
	const char *name;
	int dt; /* tsd_dtype, or -1: not served */
} dtypes[] = {
	{"BOOL", TSD_BOOL}, {"UINT8", TSD_U8}, {"INT32", TSD_I32}, {"INT64", TSD_I64}, {"FP16", TSD_F16},
	{"FP32", TSD_F32},  {"UINT16", -1},    {"UINT32", -1},     {"UINT64", -1},     {"INT8", -1},
	{"INT16", -1},      {"FP64", -1},      {"BF16", -1},       {"BYTES", -1},
};

const char *dmn_oip_dtype(tsd_dtype dt)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (dtypes[i].dt == (int)dt)
			return dtypes[i].name;
	return "?";
}

bool dmn_oip_dtype_parse(const char *name, tsd_dtype *dt, const char **why)
{
	for (size_t i = 0; name && i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(name, dtypes[i].name)) {
			if (dtypes[i].dt < 0) {
				*why = "not served by tensord (BOOL, UINT8, INT32, INT64, FP16 and FP32 are)";
				return false;
			}
			*dt = (tsd_dtype)dtypes[i].dt;
			return true;
		}
	*why = "not a datatype of the protocol (BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32, FP64, BF16, BYTES)";
	return false;
}

int dmn_oip_http_code(tsd_status st)
{
	switch (st) {
	case TSD_OK:
		return 200;
	case TSD_BAD_REQUEST:
	case TSD_UNKNOWN_VERB:
	case TSD_SHAPE_MISMATCH:
	case TSD_TOO_LARGE:
	case TSD_VERSION_MISMATCH:
	case TSD_SEQUENCE_ENDED:
		return 400;
	case TSD_UNAUTHORISED:
		return 401;
	case TSD_UNKNOWN_MODEL:
		return 404;
	case TSD_SUPERSEDED:
		return 409;
	case TSD_BUSY:
	case TSD_TIMEOUT:
	case TSD_CANCELLED:
	case TSD_OUT_OF_MEMORY:
	case TSD_SHUTTING_DOWN:
	case TSD_UNAVAILABLE:
		return 503;
	default:
		return 500;
	}
}

int dmn_oip_grpc_code(tsd_status st)
{
	switch (st) {
	case TSD_OK:
		return 0;
	case TSD_BAD_REQUEST:
	case TSD_SHAPE_MISMATCH:
	case TSD_TOO_LARGE:
	case TSD_SEQUENCE_ENDED:
		return 3; /* INVALID_ARGUMENT */
	case TSD_UNKNOWN_MODEL:
		return 5; /* NOT_FOUND */
	case TSD_BUSY:
	case TSD_TIMEOUT:
	case TSD_SHUTTING_DOWN:
	case TSD_OUT_OF_MEMORY:
	case TSD_CANCELLED:
	case TSD_UNAVAILABLE:
		return 14; /* UNAVAILABLE */
	case TSD_UNAUTHORISED:
		return 16; /* UNAUTHENTICATED */
	default:
		return 13; /* INTERNAL */
	}
}

const char *dmn_oip_priority(uint64_t p)
{
	return p == 1 ? "realtime" : p < 3 ? "normal" : "bulk";
}

void *dmn_oip_msg_alloc(void *arg, size_t size)
{
	nng_msg **m = arg;
	if (nng_msg_alloc(m, size))
		return NULL;
	return nng_msg_body(*m);
}

cJSON *dmn_oip_infer_header(uint64_t id, const dmn_oip_ask *ask, const char *token)
{
	cJSON *h = cJSON_CreateObject();
	if (!h || !cJSON_AddNumberToObject(h, "id", (double)id) || !cJSON_AddStringToObject(h, "verb", "infer") ||
	    !cJSON_AddStringToObject(h, "model", ask->model) ||
	    (ask->version && !cJSON_AddNumberToObject(h, "version", (double)ask->version)) ||
	    (token && !cJSON_AddStringToObject(h, "token", token))) {
		cJSON_Delete(h);
		return NULL;
	}
	return h;
}

nng_msg *dmn_oip_verb_msg(const char *verb, uint64_t id, const char *key, const char *val, const char *token)
{
	cJSON *h = cJSON_CreateObject();
	if (!h || !cJSON_AddNumberToObject(h, "id", (double)id) || !cJSON_AddStringToObject(h, "verb", verb) ||
	    (key && !cJSON_AddStringToObject(h, key, val)) || (token && !cJSON_AddStringToObject(h, "token", token))) {
		cJSON_Delete(h);
		return NULL;
	}
	if (!strcmp(verb, "hello"))
		cJSON_AddNumberToObject(h, "version", TSD_PROTOCOL_VERSION);
	nng_msg *m = NULL;
	void *body;
	size_t len;
	proto_err pe;
	tsd_status s = proto_encode(h, NULL, 0, 0, dmn_oip_msg_alloc, &m, &body, &len, &pe);
	cJSON_Delete(h);
	if (s != TSD_OK && m) {
		nng_msg_free(m);
		m = NULL;
	}
	return m;
}
