/* token.c: the bearer token's reading rules (a file's first line, trimmed, 16..4096 bytes, not
 * accessible by others) and its constant-time compare; used by the daemon and the client library. */
#include "token.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int proto_token_set(proto_token *tok, const char *text, size_t len, const char *where, char *err,
		    size_t errlen)
{
	while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\r'))
		len--;
	if (len > PROTO_TOKEN_MAX) {
		snprintf(err, errlen, "the token in %s is longer than %d bytes", where,
			 PROTO_TOKEN_MAX);
		return -1;
	}
	if (len < PROTO_TOKEN_MIN) {
		snprintf(err, errlen, "the token in %s is %zu bytes: at least %d are needed", where,
			 len, PROTO_TOKEN_MIN);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
			snprintf(err, errlen, "the token in %s has a control character at byte %zu",
				 where, i);
			return -1;
		}
	memcpy(tok->text, text, len);
	tok->text[len] = '\0';
	tok->len = len;
	return 0;
}

int proto_token_read(proto_token *tok, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	struct stat st;
	if (!f || fstat(fileno(f), &st) != 0) {
		snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	if (st.st_mode & 0007) {
		fclose(f);
		snprintf(err, errlen,
			 "token file %s is accessible by others (mode %03o): chmod o-rwx %s", path,
			 (unsigned)(st.st_mode & 0777), path);
		return -1;
	}
	char line[PROTO_TOKEN_MAX + 2];
	size_t n = 0;
	int c;
	/* one byte past the limit is read, so that a longer line is told from one at the limit */
	while ((c = fgetc(f)) != EOF && c != '\n' && n < sizeof line)
		line[n++] = (char)c;
	fclose(f);
	if (n == sizeof line) {
		explicit_bzero(line, sizeof line);
		snprintf(err, errlen, "the token in %s is longer than %d bytes", path,
			 PROTO_TOKEN_MAX);
		return -1;
	}
	int rc = proto_token_set(tok, line, n, path, err, errlen);
	explicit_bzero(line, sizeof line);
	return rc;
}

bool proto_token_eq(const proto_token *tok, const char *given, size_t glen)
{
	/* walks tok's length whatever given is; a byte past given's end compares as 0 */
	volatile unsigned char diff = (unsigned char)(glen != tok->len);
	for (size_t i = 0; i < tok->len; i++) {
		unsigned char x = i < glen ? (unsigned char)given[i] : 0;
		diff |= (unsigned char)(x ^ (unsigned char)tok->text[i]);
	}
	return diff == 0 && tok->len > 0;
}

void proto_token_clear(proto_token *tok)
{
	explicit_bzero(tok->text, sizeof tok->text);
	tok->len = 0;
}
