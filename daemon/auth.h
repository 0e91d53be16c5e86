/* auth.h: the bearer token of tcp:// on the daemon's side (issue 25, docs/isolation/auth.md): the
 * configured token file read at start and at SIGHUP, and each request of a peer without
 * credentials checked against it right after its header is decoded. */
#ifndef DMN_AUTH_H
#define DMN_AUTH_H

#include "types.h"

/* Wrong or missing tokens answered on one connection; the next request closes it unanswered. */
#define DMN_TOKEN_TRIES 3

/* s->token = the token in cfg.tcp_token_file (none when the key is empty); 0, or -1 with a
 * message naming the file (never the token) and s->token unchanged. */
int dmn_auth_load(dmn_srv *s, char *err, size_t errlen);
/* Loop, after r's header is decoded: true when r may go on (its peer has credentials, no token
 * is configured, or r's "token" matches). Else r is answered unauthorised ("token missing" or
 * "token does not match"), or, after DMN_TOKEN_TRIES such answers on its connection, dropped
 * and the connection closed; false, and r is gone. */
bool dmn_auth_check(dmn_srv *s, dmn_req *r);
/* Overwrite the token in memory (at exit). */
void dmn_auth_clear(dmn_srv *s);

#endif
