/* auth.c: the bearer token of tcp:// on the daemon's side: the token file read into the server,
 * and a request of a peer without credentials refused unless its "token" matches (constant-time
 * compare, protocol/token.c); a connection guessing is closed after DMN_TOKEN_TRIES answers. */
#include "auth.h"

#include "request.h"

#include <stdio.h>
#include <string.h>

int dmn_auth_load(dmn_srv *s, char *err, size_t errlen)
{
	if (!s->cfg.tcp_token_file[0]) {
		proto_token_clear(&s->token);
		return 0;
	}
	proto_token t;
	int rc = proto_token_read(&t, s->cfg.tcp_token_file, err, errlen);
	if (!rc)
		s->token = t;
	proto_token_clear(&t);
	return rc;
}

/* The header's "token" taken out (its bytes overwritten): no verb sees it, keeps it or echoes
 * it, and model.load's check for unknown fields passes. */
static void forget_token(dmn_req *r)
{
	cJSON *t; /* each, if the field is repeated */
	while ((t = cJSON_DetachItemFromObjectCaseSensitive(r->pm.json, "token"))) {
		if (cJSON_IsString(t))
			explicit_bzero(t->valuestring, strlen(t->valuestring));
		cJSON_Delete(t);
	}
}

bool dmn_auth_check(dmn_srv *s, dmn_req *r)
{
	dmn_client *c = r->client;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(r->pm.json, "token");
	const char *given = cJSON_IsString(t) ? t->valuestring : NULL;
	/* health needs no token: balancers' and orchestrators' probes carry none, and it tells
	 * nothing secret (ready, live, why not, model counts) */
	bool ok = c->creds || !s->token.len || r->verb == DMN_V_HEALTH ||
		  (given && proto_token_eq(&s->token, given, strlen(given)));
	bool present = given != NULL;
	forget_token(r); /* given is gone with it */
	if (ok)
		return true;
	s->auth_refused++;
	if (c->token_refused >= DMN_TOKEN_TRIES) {
		c->hung_up = true;
		s->hangup_token++;
		dmn_log(&s->log, DMN_LOG_WARN,
			"closing connection %u: %d requests without the right token "
			"(tcp_token_file)",
			(unsigned)c->conn, c->token_refused + 1);
		r->chan->ops->hangup(r->chan);
		dmn_drop(s, r);
		return false;
	}
	c->token_refused++;
	if (present)
		dmn_fail(s, r, TSD_UNAUTHORISED, "token does not match");
	else
		dmn_fail(s, r, TSD_UNAUTHORISED,
			 "token missing: tcp:// requests to this daemon carry a \"token\" "
			 "(clients: TENSORD_TOKEN_FILE or TENSORD_TOKEN)");
	return false;
}

void dmn_auth_clear(dmn_srv *s)
{
	proto_token_clear(&s->token);
}
