/* token.c: the tcp bearer token on the client's side (docs/isolation/auth.md): read when a
 * tcp:// client opens, from $TENSORD_TOKEN_FILE (the daemon's reading rules, protocol/token.c)
 * or else $TENSORD_TOKEN, and added to every request's header as "token"; never for ipc://. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"

tsd_status tsd_client_token_load(tsd_client *c, char *err, size_t errlen)
{
	if (strncmp(c->url, "tcp://", 6))
		return TSD_OK;
	const char *path = getenv("TENSORD_TOKEN_FILE"), *text = getenv("TENSORD_TOKEN");
	if (!(path && path[0]) && !(text && text[0]))
		return TSD_OK; /* none: a daemon that wants one answers unauthorised */
	if (!(c->token = malloc(sizeof(*c->token)))) {
		snprintf(err, errlen, "out of memory");
		return TSD_OUT_OF_MEMORY;
	}
	int rc = path && path[0] ? proto_token_read(c->token, path, err, errlen)
				 : proto_token_set(c->token, text, strlen(text), "$TENSORD_TOKEN",
						   err, errlen);
	if (rc) {
		free(c->token);
		c->token = NULL;
		return TSD_BAD_REQUEST;
	}
	return TSD_OK;
}

void tsd_client_token_free(tsd_client *c)
{
	if (c->token)
		proto_token_clear(c->token);
	free(c->token);
	c->token = NULL;
}

tsd_status tsd_client_token_add(tsd_client *c, const cJSON *header, cJSON **copy)
{
	/* a header with a token of its own keeps it */
	if (!c->token || cJSON_GetObjectItemCaseSensitive(header, "token"))
		return TSD_OK;
	if (!*copy && !(*copy = cJSON_Duplicate(header, true)))
		return tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
	if (!cJSON_AddStringToObject(*copy, "token", c->token->text))
		return tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
	return TSD_OK;
}
