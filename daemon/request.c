/* request.c: a request's life on the loop: made (recycled from a pool of spares), answered
 * once through its channel (or dropped), counted by verb and outcome, freed; and the clients
 * (connections) table with their credentials and closures. */
#include "request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm_refs.h"

/* ---- clients ---- */

static bool id_allowed(const dmn_intlist *l, uint64_t id)
{
	for (int i = 0; i < l->n; i++)
		if ((uint64_t)l->v[i] == id)
			return true;
	return false;
}

/* The client of ch's connection (ch->msg still set: the transport may read the credentials
 * from it), made on first sight; NULL when out of memory. */
static dmn_client *client_get(dmn_srv *s, const dmn_chan *ch)
{
	uint32_t id = ch->conn;
	dmn_client **b = &s->clients[id % DMN_CLIENT_BUCKETS];
	for (dmn_client *c = *b; c; c = c->next)
		if (c->conn == id && c->ops == ch->ops)
			return c;
	dmn_client *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ops = ch->ops;
	c->conn = id;
	/* peers with credentials (ipc) are checked by them; other transports (tcp) carry none and
	 * are allowed by being configured at all, each request then checked for the token when
	 * tcp_token_file is set (auth.c) */
	if (ch->ops->peer(ch, &c->uid, &c->gid)) {
		c->creds = true;
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
	dmn_client **b = &s->clients[c->conn % DMN_CLIENT_BUCKETS];
	for (; *b; b = &(*b)->next)
		if (*b == c) {
			*b = c->next;
			dmn_shm_set_free(c->shm);
			free(c);
			return;
		}
}

void dmn_client_put(dmn_srv *s, dmn_client *c)
{
	if (c && --c->inflight == 0 && c->gone)
		client_forget(s, c);
}

dmn_client *dmn_client_closed(dmn_srv *s, const dmn_chan_ops *ops, uint32_t conn)
{
	dmn_client *c = s->clients[conn % DMN_CLIENT_BUCKETS];
	while (c && (c->conn != conn || c->ops != ops))
		c = c->next;
	if (!c)
		return NULL;
	c->gone = true;
	if (!c->inflight) {
		client_forget(s, c);
		return NULL;
	}
	c->inflight++; /* kept while the caller walks its requests */
	return c;
}

/* ---- answering ---- */

/* What r holds besides its memory: a file descriptor it came with, its regions. */
static void req_release(dmn_req *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	dmn_shm_use_free(r->shm);
	r->shm = NULL;
}

static void req_free(dmn_srv *s, dmn_req *r)
{
	req_release(r);
	dmn_client_put(s, r->client);
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

/* Count r's outcome: by verb and status, and the refusals by reason. */
static void count(dmn_srv *s, dmn_req *r, tsd_status st)
{
	int v = r->decoded ? (int)r->verb : DMN_V_COUNT;
	if (st < 0 || st >= TSD_STATUS_COUNT)
		st = TSD_INTERNAL;
	s->requests[v][st]++;
	/* refused before any work: the reasons an operator watches */
	if (st == TSD_BUSY || st == TSD_UNAUTHORISED || st == TSD_TOO_LARGE || st == TSD_SHUTTING_DOWN ||
	    st == TSD_TIMEOUT || st == TSD_SUPERSEDED || st == TSD_BAD_REQUEST || st == TSD_UNKNOWN_VERB ||
	    st == TSD_VERSION_MISMATCH)
		s->rejected[st]++;
}

void dmn_drop(dmn_srv *s, dmn_req *r)
{
	r->chan->ops->recv(r->chan);
	req_free(s, r);
}

void dmn_finish(dmn_srv *s, dmn_req *r)
{
	if (r->sent) { /* answered by the executor: its channel is receiving again already */
		count(s, r, r->st);
		req_free(s, r);
		return;
	}
	if (r->client && r->client->gone) {
		count(s, r, TSD_CANCELLED);
		dmn_drop(s, r);
		return;
	}
	nng_msg *m = r->reply;
	r->reply = NULL;
	if (!m)
		m = dmn_reply_msg(r->decoded ? &r->pm : NULL, r->st == TSD_OK ? TSD_INTERNAL : r->st,
				  r->err[0] ? r->err : NULL, NULL, NULL, 0, 0);
	count(s, r, r->st);
	if (!m) { /* out of memory even for an error: the client times out */
		dmn_log(&s->log, DMN_LOG_ERROR, "out of memory answering a request");
		dmn_drop(s, r);
		return;
	}
	r->chan->ops->send(r->chan, m);
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

dmn_req *dmn_req_new(dmn_srv *s, dmn_chan *ch)
{
	dmn_req *r = s->spare;
	if (r) {
		s->spare = r->next;
		s->nspare--;
		memset(r, 0, sizeof(*r));
	} else {
		r = calloc(1, sizeof(*r));
	}
	if (!r) {
		nng_msg_free(ch->msg);
		ch->msg = NULL;
		if (ch->fd >= 0)
			close(ch->fd);
		ch->fd = -1;
		ch->ops->recv(ch);
		return NULL;
	}
	r->chan = ch;
	r->fd = ch->fd; /* a descriptor that came with it (unix://) is the request's now */
	ch->fd = -1;
	r->t_arrive = eng_now_ns();
	r->verb = DMN_V_COUNT;
	r->prio = DMN_PRIO_NORMAL;
	atomic_init(&r->gone, false);
	r->client = client_get(s, ch);
	r->msg = ch->msg;
	ch->msg = NULL;
	if (r->client)
		r->client->inflight++;
	return r;
}

void dmn_req_free_lost(dmn_req *r)
{
	req_release(r);
	proto_msg_free(&r->pm);
	nng_msg_free(r->msg);
	if (r->reply)
		nng_msg_free(r->reply);
	free(r);
}

void dmn_requests_free(dmn_srv *s)
{
	for (dmn_req *r = s->spare, *n; r; r = n) {
		n = r->next;
		free(r);
	}
	s->spare = NULL;
	s->nspare = 0;
	for (int b = 0; b < DMN_CLIENT_BUCKETS; b++) {
		for (dmn_client *c = s->clients[b], *n; c; c = n) {
			n = c->next;
			dmn_shm_set_free(c->shm);
			free(c);
		}
		s->clients[b] = NULL;
	}
}
