/* strbuf.h: a growable string for rendering source and messages. */
#ifndef ENG_STRBUF_H
#define ENG_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct eng_strbuf {
	char *s;
	size_t len, cap;
	bool failed; /* an allocation failed; s holds what fit */
} eng_strbuf;

void eng_strbuf_init(eng_strbuf *b);
void eng_strbuf_free(eng_strbuf *b);
void eng_strbuf_printf(eng_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void eng_strbuf_puts(eng_strbuf *b, const char *s);
/* Detach the string (caller frees); the buffer is reset. */
char *eng_strbuf_take(eng_strbuf *b);

#endif
