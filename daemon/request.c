/* request.c: a request's life on the loop: decoded and checked (size, format, the peer's
 * credentials, the client's in-flight limit, draining), handed to its verb, answered once;
 * and the clients (connections) table with their credentials and closures. */
#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- clients ---- */

static bool id_allowed(const dmn_intlist *l, uint64_t id)
{
	for (int i = 0; i < l->n; i++)
		if ((uint64_t)l->v[i] == id)
			return true;
	return false;
}

dmn_client *dmn_client_get(dmn_srv *s, nng_pipe p)
{
	uint32_t id = nng_pipe_id(p);
	dmn_client **b = &s->clients[id % DMN_CLIENT_BUCKETS];
	for (dmn_client *c = *b; c; c = c->next)
		if (c->pipe == id)
			return c;
	dmn_client *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->pipe = id;
	/* ipc peers are checked by credentials; other transports (tcp, loopback unless configured)
	 * carry none and are allowed by being configured at all */
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &c->uid) == 0) {
		if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &c->gid))
			c->gid = UINT64_MAX;
		c->authorised = id_allowed(&s->cfg.allowed_uids, c->uid) || id_allowed(&s->cfg.allowed_gids, c->gid);
		if (!c->authorised)
			dmn_log(&s->log, DMN_LOG_WARN, "refusing a peer: uid %llu gid %llu not allowed",
				(unsigned long long)c->uid, (unsigned long long)c->gid);
	} else {
		c->uid = c->gid = UINT64_MAX;
		c->authorised = true;
	}
	c->next = *b;
	*b = c;
	return c;
}

static void client_forget(dmn_srv *s, dmn_client *c)
{
	dmn_client **b = &s->clients[c->pipe % DMN_CLIENT_BUCKETS];
	for (; *b; b = &(*b)->next)
		if (*b == c) {
			*b = c->next;
			free(c);
			return;
		}
}

static void client_put(dmn_srv *s, dmn_client *c)
{
	if (c && --c->inflight == 0 && c->gone)
		client_forget(s, c);
}

void dmn_on_pipe_gone(dmn_srv *s, uint32_t pipe)
{
	dmn_client *c = s->clients[pipe % DMN_CLIENT_BUCKETS];
	while (c && c->pipe != pipe)
		c = c->next;
	if (!c)
		return;
	c->gone = true;
	if (!c->inflight) {
		client_forget(s, c);
		return;
	}
	/* queued requests are dropped now; running ones are marked, and a batch made only of
	 * them is cancelled by the executor's abort hook */
	c->inflight++; /* keep c while walking */
	for (int i = 0; i < s->nmodels; i++) {
		dmn_model *m = s->models[i];
		for (int p = 0; p < DMN_NPRIO; p++)
			for (dmn_req *r = m->head[p], *n; r; r = n) {
				n = r->next;
				if (r->client == c) {
					dmn_dequeue(s, r);
					m->c.cancelled++;
					dmn_drop(s, r);
				}
			}
	}
	dmn_mark_gone(s, c);
	client_put(s, c);
}

/* ---- answering ---- */

static void req_free(dmn_srv *s, dmn_req *r)
{
	client_put(s, r->client);
	proto_msg_free(&r->pm);
	nng_msg_free(r->msg);
	if (r->reply)
		nng_msg_free(r->reply);
	/* kept for the next request: a request is ~8 KiB (its decoded header holds 64 tensor
	 * views), and recycling them keeps that churn out of the heap */
	if (s->nspare < DMN_SPARE_REQS) {
		r->next = s->spare;
		s->spare = r;
		s->nspare++;
	} else {
		free(r);
	}
}

void dmn_drop(dmn_srv *s, dmn_req *r)
{
	dmn_slot_recv(r->slot);
	req_free(s, r);
}

void dmn_finish(dmn_srv *s, dmn_req *r)
{
	if (r->sent) { /* answered by the executor: the slot is receiving again already */
		dmn_stats_count(s, r, r->st);
		req_free(s, r);
		return;
	}
	if (r->client && r->client->gone) {
		dmn_stats_count(s, r, TSD_CANCELLED);
		dmn_drop(s, r);
		return;
	}
	nng_msg *m = r->reply;
	r->reply = NULL;
	if (!m)
		m = dmn_reply_msg(r->decoded ? &r->pm : NULL, r->st == TSD_OK ? TSD_INTERNAL : r->st,
				  r->err[0] ? r->err : NULL, NULL, NULL, 0, 0);
	dmn_stats_count(s, r, r->st);
	if (!m) { /* out of memory even for an error: the client times out */
		dmn_log(&s->log, DMN_LOG_ERROR, "out of memory answering a request");
		dmn_drop(s, r);
		return;
	}
	dmn_slot_send(r->slot, m);
	req_free(s, r);
}

void dmn_fail(dmn_srv *s, dmn_req *r, tsd_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->st = st;
	if (r->reply) {
		nng_msg_free(r->reply);
		r->reply = NULL;
	}
	dmn_finish(s, r);
}

void dmn_reply_ok(dmn_srv *s, dmn_req *r, cJSON *extra, const proto_out *ts, int n)
{
	r->st = TSD_OK;
	r->reply = dmn_reply_msg(&r->pm, TSD_OK, NULL, extra, ts, n, 0);
	if (!r->reply) {
		r->st = TSD_OUT_OF_MEMORY;
		snprintf(r->err, sizeof(r->err), "out of memory building the reply");
	}
	dmn_finish(s, r);
}

const char *dmn_json_str(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- arrival ---- */

void dmn_on_request(dmn_srv *s, dmn_slot *sl)
{
	dmn_req *r = s->spare;
	if (r) {
		s->spare = r->next;
		s->nspare--;
		memset(r, 0, sizeof(*r));
	} else {
		r = calloc(1, sizeof(*r));
	}
	nng_msg *msg = sl->msg;
	sl->msg = NULL;
	if (!r) {
		nng_msg_free(msg);
		dmn_slot_recv(sl);
		return;
	}
	r->slot = sl;
	r->msg = msg;
	r->t_arrive = eng_now_ns();
	r->verb = DMN_V_COUNT;
	r->prio = DMN_PRIO_NORMAL;
	atomic_init(&r->gone, false);
	r->client = dmn_client_get(s, nng_msg_get_pipe(msg));
	if (r->client)
		r->client->inflight++;
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
