/* auth.h: the bearer token for tcp listeners (issue 25, docs/isolation/auth.md): reading the
 * token file and comparing a presented token in constant time. */
#ifndef DMN_AUTH_H
#define DMN_AUTH_H

#include <stddef.h>

#define DMN_TOKEN_MIN 16
#define DMN_TOKEN_MAX 4096

/* Reads the token from path (first line, trailing whitespace trimmed) into buf (DMN_TOKEN_MAX+1
 * bytes). Refuses a missing file, a token shorter than DMN_TOKEN_MIN or longer than DMN_TOKEN_MAX,
 * and a file readable by others (mode & 0007). Returns 0, or -1 with a message in err. */
int dmn_auth_read_token(const char *path, char *buf, size_t *len, char *err, size_t errlen);

/* 1 when a (alen bytes) equals b (blen bytes); the time taken depends on blen only. */
int dmn_auth_token_eq(const char *a, size_t alen, const char *b, size_t blen);

#endif
