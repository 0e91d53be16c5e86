/* token.h: the bearer token of tcp:// (docs/isolation/auth.md), shared by the daemon (which
 * checks it) and the client library (which sends it): the reading rules and a constant-time compare. */
#ifndef PROTO_TOKEN_H
#define PROTO_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define PROTO_TOKEN_MIN 16 /* bytes: shorter is refused (too easy to guess) */
#define PROTO_TOKEN_MAX 4096

typedef struct proto_token {
	size_t len;			/* 0: none */
	char text[PROTO_TOKEN_MAX + 1]; /* NUL-terminated */
} proto_token;

/* tok = text (len bytes) with trailing spaces, tabs and CRs trimmed; refused (-1, a message in
 * err naming where, never the token) when the result is shorter than PROTO_TOKEN_MIN, longer
 * than PROTO_TOKEN_MAX, or holds a control character. tok is left as it was on failure. */
int proto_token_set(proto_token *tok, const char *text, size_t len, const char *where, char *err,
		    size_t errlen);
/* tok = the first line of the file at path, by proto_token_set's rules. Also refused: a file
 * that cannot be read, and one that others (not its owner or group) may access (mode & 0007). */
int proto_token_read(proto_token *tok, const char *path, char *err, size_t errlen);
/* Whether given (glen bytes) is tok; the time taken depends on tok's length only (no early
 * exit; the length difference is folded into the result). */
bool proto_token_eq(const proto_token *tok, const char *given, size_t glen);
/* Overwrite tok's bytes (explicit_bzero), len 0. */
void proto_token_clear(proto_token *tok);

#endif
