/* auth.c: the bearer token for tcp listeners: the token file's reading rules and a
 * constant-time compare (no early exit, the length difference folded into the result). */
#include "auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int dmn_auth_read_token(const char *path, char *buf, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
		return -1;
	}
	if (st.st_mode & 0007) {
		snprintf(err, errlen, "token file %s is accessible by others (mode %03o): chmod o-rwx", path,
			 (unsigned)(st.st_mode & 0777));
		return -1;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
		return -1;
	}
	char line[DMN_TOKEN_MAX + 2];
	size_t n = 0;
	int c;
	while ((c = fgetc(f)) != EOF && c != '\n' && n < sizeof line - 1)
		line[n++] = (char)c;
	fclose(f);
	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		n--;
	if (n > DMN_TOKEN_MAX || (c != EOF && c != '\n')) {
		snprintf(err, errlen, "token in %s is longer than %d bytes", path, DMN_TOKEN_MAX);
		return -1;
	}
	if (n < DMN_TOKEN_MIN) {
		snprintf(err, errlen, "token in %s is %zu bytes: at least %d are needed", path, n, DMN_TOKEN_MIN);
		return -1;
	}
	memcpy(buf, line, n);
	buf[n] = '\0';
	*len = n;
	return 0;
}

int dmn_auth_token_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	/* Walks b's length whatever a is; a byte past a's end compares as 0 against b's. */
	volatile unsigned char diff = (unsigned char)(alen != blen);
	for (size_t i = 0; i < blen; i++) {
		unsigned char x = i < alen ? (unsigned char)a[i] : 0;
		diff |= (unsigned char)(x ^ (unsigned char)b[i]);
	}
	return diff == 0;
}
