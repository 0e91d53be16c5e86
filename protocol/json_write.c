/* json_write.c: a cJSON tree written as compact JSON text into a growable buffer: the text
 * cJSON_PrintUnformatted writes (its escapes and number forms) without its costs on the hot path
 * of every message: integers (the header's ids, shapes, offsets) are written by hand instead of
 * through two snprintf calls and a sscanf each, and nothing is duplicated first. Where cJSON
 * loses a number this does not: integers up to 2^53 are exact (cJSON writes 15 digits when they
 * read back within its epsilon), and -0 is written 0. */
#include "message.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool proto_jw_reserve(proto_jw *w, size_t more)
{
	if (w->failed)
		return false;
	if (w->len + more <= w->cap)
		return true;
	size_t cap = w->cap ? w->cap * 2 : 256;
	while (cap < w->len + more)
		cap *= 2;
	char *p = w->heap ? realloc(w->p, cap) : malloc(cap);
	if (!p) {
		w->failed = true;
		return false;
	}
	if (!w->heap && w->len)
		memcpy(p, w->p, w->len);
	w->p = p;
	w->cap = cap;
	w->heap = true;
	return true;
}

void proto_jw_put(proto_jw *w, const char *s, size_t n)
{
	if (!proto_jw_reserve(w, n))
		return;
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

void proto_jw_free(proto_jw *w)
{
	if (w->heap)
		free(w->p);
	w->p = NULL;
	w->len = w->cap = 0;
	w->heap = false;
}

void proto_jw_int(proto_jw *w, int64_t v)
{
	char tmp[24];
	int n = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (!proto_jw_reserve(w, (size_t)n + 1))
		return;
	if (v < 0)
		w->p[w->len++] = '-';
	while (n)
		w->p[w->len++] = tmp[--n];
}

/* A number as cJSON prints it: integers exactly, others with 15 significant digits when that
 * reads back the same, else 17; NaN and infinities (which JSON has not) as null. */
static void put_number(proto_jw *w, double d)
{
	if (isnan(d) || isinf(d)) {
		proto_jw_put(w, "null", 4);
		return;
	}
	/* the range first: casting a double outside int64's range is undefined */
	if (fabs(d) < 9007199254740992.0 && d == (double)(int64_t)d) { /* 2^53 */
		proto_jw_int(w, (int64_t)d);
		return;
	}
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%1.15g", d);
	if (strtod(buf, NULL) != d)
		n = snprintf(buf, sizeof(buf), "%1.17g", d);
	proto_jw_put(w, buf, (size_t)n);
}

void proto_jw_str(proto_jw *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(s);
	if (!proto_jw_reserve(w, n + 2))
		return;
	w->p[w->len++] = '"';
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		const char *esc = NULL;
		switch (*c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default: break;
		}
		if (esc) {
			proto_jw_put(w, esc, 2);
		} else if (*c < 0x20) {
			char u[6] = {'\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15]};
			proto_jw_put(w, u, 6);
		} else if (proto_jw_reserve(w, 1)) {
			w->p[w->len++] = (char)*c;
		}
	}
	proto_jw_put(w, "\"", 1);
}

int proto_jw_fields(proto_jw *w, const cJSON *obj, const char *skip)
{
	int n = 0;
	for (const cJSON *c = obj->child; c; c = c->next) {
		if (skip && c->string && !strcmp(c->string, skip))
			continue;
		if (n++)
			proto_jw_put(w, ",", 1);
		proto_jw_str(w, c->string ? c->string : "");
		proto_jw_put(w, ":", 1);
		proto_jw_value(w, c);
	}
	return n;
}

void proto_jw_value(proto_jw *w, const cJSON *v)
{
	switch (v->type & 0xff) {
	case cJSON_False:
		proto_jw_put(w, "false", 5);
		return;
	case cJSON_True:
		proto_jw_put(w, "true", 4);
		return;
	case cJSON_NULL:
		proto_jw_put(w, "null", 4);
		return;
	case cJSON_Number:
		put_number(w, v->valuedouble);
		return;
	case cJSON_String:
		proto_jw_str(w, v->valuestring ? v->valuestring : "");
		return;
	case cJSON_Raw:
		if (v->valuestring)
			proto_jw_put(w, v->valuestring, strlen(v->valuestring));
		return;
	case cJSON_Object:
		proto_jw_put(w, "{", 1);
		proto_jw_fields(w, v, NULL);
		proto_jw_put(w, "}", 1);
		return;
	case cJSON_Array:
		proto_jw_put(w, "[", 1);
		for (const cJSON *c = v->child; c; c = c->next) {
			if (c != v->child)
				proto_jw_put(w, ",", 1);
			proto_jw_value(w, c);
		}
		proto_jw_put(w, "]", 1);
		return;
	default:
		w->failed = true; /* an invalid item: cJSON would not print it either */
	}
}
