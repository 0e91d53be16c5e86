/* arrival.c: a request's arrival on the loop (the inbox's ARRIVED lane): decoded and checked
 * (size, format, the peer's credentials, the verb, draining, the client's in-flight limit),
 * then handed to its verb's handler (verbs.c). */
#include "verbs.h"

#include <stdio.h>

void dmn_on_request(dmn_srv *s, dmn_chan *ch)
{
	dmn_req *r = dmn_req_new(s, ch);
	if (!r)
		return;
	nng_msg *msg = r->msg;
	proto_err e;
	tsd_status st = proto_decode(nng_msg_body(msg), nng_msg_len(msg), (size_t)s->cfg.max_message_bytes,
				     PROTO_REQUEST, &r->pm, &e);
	if (st != TSD_OK) {
		dmn_fail(s, r, st, "%s", e.msg);
		return;
	}
	r->decoded = true;
	r->verb = dmn_verb_find(r->pm.verb);
	if (!r->client) {
		dmn_fail(s, r, TSD_OUT_OF_MEMORY, "out of memory");
	} else if (!r->client->authorised) {
		dmn_fail(s, r, TSD_UNAUTHORISED, "uid %llu gid %llu is not allowed (config allowed_uids, allowed_gids)",
			 (unsigned long long)r->client->uid, (unsigned long long)r->client->gid);
	} else if (r->verb == DMN_V_COUNT) {
		dmn_fail(s, r, TSD_UNKNOWN_VERB, "verb: unknown verb \"%.64s\"", r->pm.verb);
	} else if (s->draining && r->verb != DMN_V_HEALTH && r->verb != DMN_V_STATS && r->verb != DMN_V_HELLO) {
		dmn_fail(s, r, TSD_SHUTTING_DOWN, "the daemon is shutting down");
	} else if (r->client->inflight > s->cfg.client_inflight_max) {
		dmn_fail(s, r, TSD_BUSY, "this client has %d requests in flight (client_inflight_max)",
			 r->client->inflight - 1);
	} else {
		dmn_verb_run(s, r);
	}
}
