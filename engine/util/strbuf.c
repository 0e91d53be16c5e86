/* strbuf.c: a growable string for rendering source and messages (see strbuf.h). */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eng_strbuf_init(eng_strbuf *b) { memset(b, 0, sizeof(*b)); }

void eng_strbuf_free(eng_strbuf *b)
{
	free(b->s);
	eng_strbuf_init(b);
}

static bool reserve(eng_strbuf *b, size_t extra)
{
	if (b->failed)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t nc = b->cap ? b->cap : 256;
	while (nc < b->len + extra + 1)
		nc *= 2;
	char *ns = realloc(b->s, nc);
	if (!ns) {
		b->failed = true;
		return false;
	}
	b->s = ns;
	b->cap = nc;
	return true;
}

void eng_strbuf_printf(eng_strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void eng_strbuf_puts(eng_strbuf *b, const char *s)
{
	size_t n = strlen(s);
	if (!reserve(b, n))
		return;
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

char *eng_strbuf_take(eng_strbuf *b)
{
	char *s = b->s;
	if (!s)
		s = calloc(1, 1);
	eng_strbuf_init(b);
	return s;
}
