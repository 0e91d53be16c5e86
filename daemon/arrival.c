/* arrival.c: a request's arrival on the loop (the inbox's ARRIVED lane): its connection checked
 * first (a refused peer is answered unparsed, and closed if it sends more than one at a time; a
 * connection being closed gets nothing more; one far past its cap is closed), then decoded and
 * checked (size, format, the tcp token of a peer without credentials (auth.c), the verb,
 * draining, the client's in-flight limit), then handed to its verb's handler (verbs.c).
 * The limits: docs/isolation/connections.md and auth.md. */
#include "auth.h"
#include "verbs.h"

#include <stdio.h>

/* Requests in flight plus replies not yet taken past which a connection is closed rather than
 * answered busy: twice client_inflight_max, with room for 64 busy answers on a small cap (a
 * client that reads but sent a burst at once gets busy, not a hang-up). */
static int hangup_at(const dmn_srv *s)
{
	int64_t cap = s->cfg.client_inflight_max;
	return (int)(cap + (cap > 64 ? cap : 64));
}

void dmn_on_request(dmn_srv *s, dmn_chan *ch)
{
	dmn_req *r = dmn_req_new(s, ch);
	if (!r)
		return;
	dmn_client *c = r->client;
	if (!c) {
		dmn_fail(s, r, TSD_OUT_OF_MEMORY, "out of memory");
		return;
	}
	if (c->hung_up) { /* closing: nothing more is queued for it */
		dmn_drop(s, r);
		return;
	}
	if (!c->authorised) {
		/* before its header is parsed. One request at a time (it waits for each answer): each
		 * is answered unauthorised, with no id. More at once: the connection is closed now and
		 * they are dropped, nothing queued (closing after every answer would lose the next
		 * request of a client that sends as soon as it reads) */
		if (ch->held > 1) {
			c->hung_up = true;
			s->hangup_refused++;
			ch->ops->hangup(ch);
			dmn_drop(s, r);
			return;
		}
		ch->ops->close_after(ch); /* a stream transport: answered, then closed */
		dmn_fail(s, r, TSD_UNAUTHORISED, "uid %llu gid %llu is not allowed (config allowed_uids, allowed_gids)",
			 (unsigned long long)c->uid, (unsigned long long)c->gid);
		return;
	}
	int held = ch->held > c->inflight ? ch->held : c->inflight;
	if (held > hangup_at(s)) {
		c->hung_up = true;
		s->hangup_flood++;
		dmn_log(&s->log, DMN_LOG_WARN,
			"closing connection %u: %d requests and replies not taken, past twice client_inflight_max (%lld)",
			(unsigned)c->conn, held, (long long)s->cfg.client_inflight_max);
		ch->ops->hangup(ch);
		dmn_drop(s, r);
		return;
	}
	nng_msg *msg = r->msg;
	proto_err e;
	tsd_status st = proto_decode_hdr(nng_msg_body(msg), nng_msg_len(msg), (size_t)s->cfg.max_message_bytes,
					 (size_t)s->cfg.max_header_bytes, PROTO_REQUEST, &r->pm, &e);
	if (st != TSD_OK) {
		ch->ops->close_after(ch); /* a stream transport cannot trust what follows */
		dmn_fail(s, r, st, "%s", e.msg);
		return;
	}
	r->decoded = true;
	r->verb = dmn_verb_find(r->pm.verb);
	if (!dmn_auth_check(s, r)) /* a peer without credentials: the tcp token, before anything runs */
		return;
	if (r->fd >= 0 && r->verb != DMN_V_SHM_REGISTER) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "file descriptors are not accepted on this verb (only shm.register takes one)");
		return;
	}
	if (r->verb == DMN_V_COUNT) {
		dmn_fail(s, r, TSD_UNKNOWN_VERB, "verb: unknown verb \"%.64s\"", r->pm.verb);
	} else if (s->draining && r->verb != DMN_V_HEALTH && r->verb != DMN_V_STATS && r->verb != DMN_V_HELLO) {
		dmn_fail(s, r, TSD_SHUTTING_DOWN, "the daemon is shutting down");
	} else if (held > s->cfg.client_inflight_max) {
		dmn_fail(s, r, TSD_BUSY,
			 "this client has %d requests in flight or replies not taken (client_inflight_max %lld)",
			 held - 1, (long long)s->cfg.client_inflight_max);
	} else {
		dmn_verb_run(s, r);
	}
}
