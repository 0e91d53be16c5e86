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

void eng_sb_init(eng_strbuf *b);
void eng_sb_free(eng_strbuf *b);
void eng_sb_printf(eng_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void eng_sb_puts(eng_strbuf *b, const char *s);
/* Detach the string (caller frees); the buffer is reset. */
char *eng_sb_take(eng_strbuf *b);

#endif
