/* oip_grpc.c: the Open Inference Protocol's gRPC frontend on gRPC's C core: the server and its
 * completion queue (a thread of its own), calls (unary, and ModelStreamInfer's stream, answered
 * in the order its requests came), each request message turned into one TSD1 request
 * (oip_grpc_msg.h) posted at the seam as a channel of its own, and the TSD1 reply handed back to
 * the loop (decoded there) and sent as the response. RPCs and statuses: docs/PROTOCOL.md, "Open
 * Inference Protocol", "gRPC". */
#include "oip_grpc.h"

#include <arpa/inet.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "oip_grpc_msg.h"
#include "peeruid.h"

#define NEW_CALLS 8 /* calls asked of gRPC at a time */

typedef struct gcall gcall;
typedef struct gitem gitem;
typedef struct gpeer gpeer;

/* A completion queue tag: what completed, for which call. */
typedef enum op_kind { OP_NEW, OP_RECV, OP_SEND, OP_CLOSE, OP_SHUTDOWN } op_kind;
typedef struct gop {
	op_kind kind;
	gcall *c;
} gop;

/* A client address (one HTTP/2 connection): the daemon's connection while it has calls. */
struct gpeer {
	char addr[128];
	uint32_t id;
	int calls;  /* calls not over */
	int refs;   /* calls and items not freed */
	int held;   /* items not freed (dmn_chan.held) */
	bool linked;
	gpeer *next;
};

/* One request message: the channel posted at the seam, then its answer. */
struct gitem {
	dmn_chan chan; /* first: posted on ARRIVED */
	gcall *c;
	dmn_oip_ask ask;
	nng_msg *reply;       /* handed over by send, not yet made into the answer */
	bool in_daemon;       /* posted and not answered (send) or given up (recv) */
	bool ready;           /* the answer is made: out, or code and err */
	bool counted_sending;
	int code;
	dmn_buf out;
	char err[1024];
	gitem *next;          /* the done list */
	gitem *qnext;         /* the call's queue */
	gitem *lprev, *lnext; /* t->items */
};

struct gcall {
	dmn_oip_grpc *t;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	gop op_new, op_recv, op_send, op_close;
	dmn_grpc_rpc rpc;
	bool stream;
	gpeer *peer;
	char token[4097];
	grpc_byte_buffer *rbuf, *sbuf;
	grpc_slice status;
	bool has_status;
	int cancelled;
	bool recv_busy, send_busy, close_busy, md_sent, half_closed, status_sent, over, recv_paused;
	gitem *sent;          /* the item being sent */
	int queued;           /* items received and not yet sent */
	gitem *qhead, *qtail; /* in the order they came */
	gcall *lprev, *lnext; /* t->calls */
};

struct dmn_oip_grpc {
	const dmn_config *cfg;
	dmn_logger *log;
	dmn_inbox *ib;
	uv_loop_t *loop;
	uv_thread_t loop_tid;
	grpc_server *server;
	grpc_completion_queue *cq;
	uv_thread_t thr;
	bool thr_live;
	int port;
	uv_async_t wake;    /* answers handed over off the loop */
	bool wake_live;
	bool closing;       /* loop */
	gop op_shutdown;
	pthread_mutex_t mu; /* guards what follows and every call, item and peer */
	bool closed_flag;   /* closed: nothing more is posted or handed to the loop */
	gitem *done_head, *done_tail;
	gpeer *peers;
	uint32_t next_conn;
	uint64_t next_id;
	gcall *calls;
	gitem *items;
	atomic_int sending;
	int stream_max;     /* a stream's requests waiting for their answer before it is not read */
	dmn_oip_limits lim;
	atomic_llong st_calls, st_requests, st_errors;
};

static const dmn_chan_ops grpc_ops;

static bool on_loop(const dmn_oip_grpc *t)
{
	uv_thread_t self = uv_thread_self();
	return uv_thread_equal(&self, &t->loop_tid);
}

/* A loopback caller's uid from the kernel's socket table, on q's channel (system shared memory
 * maps only that uid's objects): gRPC names the peer "ipv4:A:P" or "ipv6:[A]:P"; our end of a
 * loopback connection is the address it dialled (taken as the peer's own) at our port. */
static void local_uid(const dmn_oip_grpc *t, const gpeer *p, gitem *q)
{
	char host[64];
	const char *a = p->addr;
	bool v6 = !strncmp(a, "ipv6:[", 6);
	if (!v6 && strncmp(a, "ipv4:", 5))
		return;
	const char *h = a + (v6 ? 6 : 5), *end = v6 ? strchr(h, ']') : strrchr(h, ':');
	if (!end || (size_t)(end - h) >= sizeof(host))
		return;
	memcpy(host, h, (size_t)(end - h));
	host[end - h] = 0;
	const char *ps = v6 ? strrchr(end, ':') : end;
	long port = ps ? strtol(ps + 1, NULL, 10) : 0;
	if (v6 && !strncmp(host, "::ffff:", 7) && strchr(host + 7, '.')) { /* a v4 peer on a dual-stack listener */
		memmove(host, host + 7, strlen(host + 7) + 1);
		v6 = false;
	}
	struct sockaddr_storage peer = {0}, local = {0};
	if (v6) {
		struct sockaddr_in6 *pa = (struct sockaddr_in6 *)&peer, *la = (struct sockaddr_in6 *)&local;
		pa->sin6_family = la->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, host, &pa->sin6_addr) != 1)
			return;
		la->sin6_addr = pa->sin6_addr;
		pa->sin6_port = htons((uint16_t)port);
		la->sin6_port = htons((uint16_t)t->port);
	} else {
		struct sockaddr_in *pa = (struct sockaddr_in *)&peer, *la = (struct sockaddr_in *)&local;
		pa->sin_family = la->sin_family = AF_INET;
		if (inet_pton(AF_INET, host, &pa->sin_addr) != 1)
			return;
		la->sin_addr = pa->sin_addr;
		pa->sin_port = htons((uint16_t)port);
		la->sin_port = htons((uint16_t)t->port);
	}
	q->chan.has_local_uid = dmn_tcp_peer_uid((struct sockaddr *)&peer, (struct sockaddr *)&local, &q->chan.local_uid);
}

/* ---- peers (t->mu held) ---- */

static gpeer *peer_get(dmn_oip_grpc *t, grpc_call *call)
{
	char *a = grpc_call_get_peer(call);
	const char *addr = a ? a : "?";
	gpeer *p;
	for (p = t->peers; p; p = p->next)
		if (!strncmp(p->addr, addr, sizeof(p->addr) - 1))
			break;
	if (!p && (p = calloc(1, sizeof(*p)))) {
		snprintf(p->addr, sizeof(p->addr), "%s", addr);
		p->id = ++t->next_conn;
		p->linked = true;
		p->next = t->peers;
		t->peers = p;
	}
	gpr_free(a);
	return p;
}

static void peer_unlink(dmn_oip_grpc *t, gpeer *p)
{
	for (gpeer **pp = &t->peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	p->linked = false;
}

static void peer_put(gpeer *p)
{
	if (!--p->refs && !p->linked)
		free(p);
}

/* ---- items and calls (t->mu held) ---- */

static gitem *item_new(gcall *c)
{
	dmn_oip_grpc *t = c->t;
	gitem *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->c = c;
	q->chan.ops = &grpc_ops;
	q->chan.fd = -1;
	q->lnext = t->items;
	if (t->items)
		t->items->lprev = q;
	t->items = q;
	c->peer->refs++;
	c->peer->held++;
	if (c->qtail)
		c->qtail->qnext = q;
	else
		c->qhead = q;
	c->qtail = q;
	c->queued++;
	return q;
}

/* q is out of its call's queue and not in the daemon (the caller then sees whether its call
 * can go: call_maybe_free). */
static void item_free(gitem *q)
{
	dmn_oip_grpc *t = q->c->t;
	gcall *c = q->c;
	if (q->counted_sending)
		atomic_fetch_sub(&t->sending, 1);
	if (q->chan.msg)
		nng_msg_free(q->chan.msg);
	if (q->reply)
		nng_msg_free(q->reply);
	dmn_buf_free(&q->out);
	if (q->lprev)
		q->lprev->lnext = q->lnext;
	else
		t->items = q->lnext;
	if (q->lnext)
		q->lnext->lprev = q->lprev;
	c->peer->held--;
	peer_put(c->peer);
	free(q);
}

/* A call that is over: its answers made go nowhere (those still in the daemon wait for it). */
static void drop_ready(gcall *c)
{
	gitem **pp = &c->qhead, *last = NULL;
	while (*pp) {
		gitem *q = *pp;
		if (q->ready) {
			*pp = q->qnext;
			c->queued--;
			item_free(q);
		} else {
			last = q;
			pp = &q->qnext;
		}
	}
	c->qtail = last;
}

static void call_maybe_free(gcall *c)
{
	if (!c->over || c->recv_busy || c->send_busy || c->close_busy || c->qhead || c->sent)
		return;
	dmn_oip_grpc *t = c->t;
	if (c->lprev)
		c->lprev->lnext = c->lnext;
	else
		t->calls = c->lnext;
	if (c->lnext)
		c->lnext->lprev = c->lprev;
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->peer)
		peer_put(c->peer);
	free(c);
}

static grpc_byte_buffer *buffer_of(dmn_buf *b)
{
	grpc_slice s = b->len ? grpc_slice_new(b->p, b->len, free) : grpc_empty_slice();
	if (b->len)
		*b = (dmn_buf){0}; /* the slice owns it */
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

/* Send c's next answer, or its status once a stream's client sent its last request. */
static void pump(gcall *c)
{
	if (c->over) {
		drop_ready(c);
		return;
	}
	if (c->send_busy || c->status_sent)
		return;
	gitem *q = c->qhead;
	grpc_op ops[3];
	size_t n = 0;
	memset(ops, 0, sizeof(ops));
	if (!(q && q->ready) && !(!q && c->stream && c->half_closed))
		return;
	if (!c->md_sent) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		c->md_sent = true;
	}
	int code = 0;
	if (q) {
		c->qhead = q->qnext;
		if (!c->qhead)
			c->qtail = NULL;
		c->queued--;
		c->sent = q;
		code = q->code;
		if (!code) {
			c->sbuf = buffer_of(&q->out);
			ops[n].op = GRPC_OP_SEND_MESSAGE;
			ops[n++].data.send_message.send_message = c->sbuf;
		}
	}
	if (!c->stream || !q || code) { /* a stream ends only when its requests did, or cannot be answered */
		ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
		ops[n].data.send_status_from_server.status = (grpc_status_code)code;
		if (code) {
			c->status = grpc_slice_from_copied_string(q->err);
			c->has_status = true;
			ops[n].data.send_status_from_server.status_details = &c->status;
		}
		n++;
		c->status_sent = true;
	}
	c->send_busy = true;
	if (grpc_call_start_batch(c->call, ops, n, &c->op_send, NULL) != GRPC_CALL_OK) {
		c->send_busy = false;
		c->over = true; /* cannot be answered: treated as gone */
		if (c->sbuf)
			grpc_byte_buffer_destroy(c->sbuf);
		c->sbuf = NULL;
		if (c->has_status)
			grpc_slice_unref(c->status);
		c->has_status = false;
		if (c->sent) {
			item_free(c->sent);
			c->sent = NULL;
		}
		drop_ready(c);
	}
}

/* The answer of q (loop, t->mu not held): the daemon's reply (taken), or none (given up). */
static void finish(gitem *q, nng_msg *reply)
{
	gcall *c = q->c;
	dmn_oip_grpc *t = c->t;
	dmn_buf out = {0};
	char err[1024];
	int code;
	if (!reply) {
		code = DMN_GRPC_UNAVAILABLE;
		snprintf(err, sizeof(err), "the request was given up (its client went away, or the server is closing)");
	} else {
		code = dmn_grpc_answer(c->rpc, &q->ask, nng_msg_body(reply), nng_msg_len(reply), &out, err, sizeof(err));
		nng_msg_free(reply);
	}
	if (code && c->stream) { /* answered on the stream, which goes on */
		dmn_buf_free(&out);
		dmn_grpc_stream_error(&out, err);
		code = 0;
	}
	pthread_mutex_lock(&t->mu);
	q->in_daemon = false;
	q->ready = true;
	q->code = code;
	q->out = out;
	snprintf(q->err, sizeof(q->err), "%s", code ? err : "");
	pump(c);
	call_maybe_free(c);
	pthread_mutex_unlock(&t->mu);
}

static void on_wake(uv_async_t *h)
{
	dmn_oip_grpc *t = h->data;
	pthread_mutex_lock(&t->mu);
	gitem *q = t->done_head;
	t->done_head = t->done_tail = NULL;
	pthread_mutex_unlock(&t->mu);
	for (gitem *next; q; q = next) {
		next = q->next;
		nng_msg *r = q->reply;
		q->reply = NULL;
		finish(q, r);
	}
}

/* ---- the channel's ops ---- */

static void ch_send(dmn_chan *ch, nng_msg *reply)
{
	gitem *q = (gitem *)ch;
	dmn_oip_grpc *t = q->c->t;
	pthread_mutex_lock(&t->mu);
	q->counted_sending = true;
	atomic_fetch_add(&t->sending, 1);
	if (t->closed_flag) { /* the loop is gone: dropped (freed when its call ends, or at stop) */
		nng_msg_free(reply);
		q->in_daemon = false;
		q->ready = true;
		q->code = DMN_GRPC_UNAVAILABLE;
		snprintf(q->err, sizeof(q->err), "the server is shutting down");
		if (q->c->over) {
			drop_ready(q->c);
			call_maybe_free(q->c);
		}
		pthread_mutex_unlock(&t->mu);
		return;
	}
	if (on_loop(t)) {
		pthread_mutex_unlock(&t->mu);
		finish(q, reply);
		return;
	}
	q->reply = reply;
	q->next = NULL;
	if (t->done_tail)
		t->done_tail->next = q;
	else
		t->done_head = q;
	t->done_tail = q;
	uv_async_send(&t->wake);
	pthread_mutex_unlock(&t->mu);
}

static void ch_recv(dmn_chan *ch)
{
	finish((gitem *)ch, NULL);
}

static bool ch_peer(const dmn_chan *ch, uint64_t *uid, uint64_t *gid)
{
	(void)ch, (void)uid, (void)gid;
	return false; /* tcp: no credentials (the bearer token, when configured) */
}

static void ch_hangup(dmn_chan *ch)
{
	gitem *q = (gitem *)ch;
	dmn_oip_grpc *t = q->c->t;
	pthread_mutex_lock(&t->mu);
	if (!q->c->over)
		grpc_call_cancel_with_status(q->c->call, GRPC_STATUS_UNAVAILABLE,
					     "closed by the server: too many requests in flight", NULL);
	pthread_mutex_unlock(&t->mu);
}

static void ch_close_after(dmn_chan *ch)
{
	(void)ch; /* gRPC's messages are delimited: nothing to resync */
}

static const dmn_chan_ops grpc_ops = {
	.name = "grpc",
	.send = ch_send,
	.recv = ch_recv,
	.peer = ch_peer,
	.hangup = ch_hangup,
	.close_after = ch_close_after,
};

/* ---- the completion queue's thread (t->mu held unless said) ---- */

static void new_call(dmn_oip_grpc *t)
{
	gcall *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->t = t;
	c->op_new = (gop){OP_NEW, c};
	c->op_recv = (gop){OP_RECV, c};
	c->op_send = (gop){OP_SEND, c};
	c->op_close = (gop){OP_CLOSE, c};
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	if (grpc_server_request_call(t->server, &c->call, &c->details, &c->md, t->cq, t->cq, &c->op_new) != GRPC_CALL_OK) {
		grpc_call_details_destroy(&c->details);
		grpc_metadata_array_destroy(&c->md);
		free(c);
	}
}

static void start_recv(gcall *c)
{
	grpc_op op;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->rbuf;
	c->recv_busy = true;
	c->recv_paused = false;
	if (grpc_call_start_batch(c->call, &op, 1, &c->op_recv, NULL) != GRPC_CALL_OK) {
		c->recv_busy = false;
		grpc_call_cancel_with_status(c->call, GRPC_STATUS_INTERNAL, "the request could not be read", NULL);
	}
}

/* An answer made by the frontend itself: an error (on a stream, an error response). */
static void item_error(gcall *c, gitem *q, int code, const char *err)
{
	c->t->st_errors++;
	q->ready = true;
	if (c->stream) {
		dmn_grpc_stream_error(&q->out, err);
	} else {
		q->code = code;
		snprintf(q->err, sizeof(q->err), "%s", err);
	}
}

/* The request's bearer token ("authorization: Bearer T"). */
static void take_token(gcall *c)
{
	c->token[0] = 0;
	for (size_t i = 0; i < c->md.count; i++) {
		const grpc_metadata *m = &c->md.metadata[i];
		size_t kl = GRPC_SLICE_LENGTH(m->key), vl = GRPC_SLICE_LENGTH(m->value);
		const char *v = (const char *)GRPC_SLICE_START_PTR(m->value);
		if (kl == 13 && !memcmp(GRPC_SLICE_START_PTR(m->key), "authorization", 13) && vl > 7 &&
		    !strncasecmp(v, "Bearer ", 7) && vl - 7 < sizeof(c->token)) {
			memcpy(c->token, v + 7, vl - 7);
			c->token[vl - 7] = 0;
		}
	}
}

static void on_close(dmn_oip_grpc *t, gcall *c);

static void on_new(dmn_oip_grpc *t, gcall *c, bool ok)
{
	if (!ok || t->closed_flag) { /* the server is shutting down */
		if (c->call)
			grpc_call_unref(c->call);
		grpc_call_details_destroy(&c->details);
		grpc_metadata_array_destroy(&c->md);
		free(c);
		return;
	}
	new_call(t);
	t->st_calls++;
	c->lnext = t->calls;
	if (t->calls)
		t->calls->lprev = c;
	t->calls = c;
	c->rpc = dmn_grpc_rpc_find((const char *)GRPC_SLICE_START_PTR(c->details.method), GRPC_SLICE_LENGTH(c->details.method));
	c->stream = c->rpc == DMN_GRPC_STREAM_INFER;
	take_token(c);
	if (!(c->peer = peer_get(t, c->call))) {
		grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNAVAILABLE, "out of memory", NULL);
		c->over = true;
		call_maybe_free(c);
		return;
	}
	c->peer->refs++;
	c->peer->calls++;
	grpc_op op;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	c->close_busy = true;
	if (grpc_call_start_batch(c->call, &op, 1, &c->op_close, NULL) != GRPC_CALL_OK) {
		on_close(t, c);
		return;
	}
	if (c->rpc == DMN_GRPC_RPC_COUNT) {
		gitem *q = item_new(c);
		char err[256];
		snprintf(err, sizeof(err), "unknown method %.*s (not one of inference.GRPCInferenceService's)",
			 (int)(GRPC_SLICE_LENGTH(c->details.method) < 160 ? GRPC_SLICE_LENGTH(c->details.method) : 160),
			 (const char *)GRPC_SLICE_START_PTR(c->details.method));
		c->stream = false;
		if (q)
			item_error(c, q, DMN_GRPC_UNIMPLEMENTED, err);
		else
			grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNIMPLEMENTED, err, NULL);
		pump(c);
		return;
	}
	start_recv(c);
}

static void on_recv(dmn_oip_grpc *t, gcall *c)
{
	grpc_byte_buffer *b = c->rbuf;
	c->rbuf = NULL;
	if (!b || c->over) { /* the client's last message came (or the call ended) */
		if (b)
			grpc_byte_buffer_destroy(b);
		c->recv_busy = false;
		c->half_closed = true;
		if (!c->stream && !c->qhead && !c->sent && !c->status_sent && !c->over) {
			gitem *q = item_new(c);
			if (q)
				item_error(c, q, DMN_GRPC_INVALID_ARGUMENT, "no request message");
		}
		pump(c);
		call_maybe_free(c);
		return;
	}
	t->st_requests++;
	uint64_t id = ++t->next_id;
	/* translated without the lock (c stays: recv_busy) */
	pthread_mutex_unlock(&t->mu);
	grpc_byte_buffer_reader r;
	grpc_slice s = grpc_empty_slice();
	bool read = grpc_byte_buffer_reader_init(&r, b);
	if (read) {
		s = grpc_byte_buffer_reader_readall(&r);
		grpc_byte_buffer_reader_destroy(&r);
	}
	grpc_byte_buffer_destroy(b);
	dmn_oip_ask ask;
	nng_msg *m = NULL;
	char err[1024];
	int code = read ? dmn_grpc_request(c->rpc, &t->lim, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), id,
					   c->token[0] ? c->token : NULL, &ask, &m, err, sizeof(err))
			: DMN_GRPC_INTERNAL;
	if (!read)
		snprintf(err, sizeof(err), "the message could not be read");
	grpc_slice_unref(s);
	pthread_mutex_lock(&t->mu);
	c->recv_busy = false;
	gitem *q = c->over ? NULL : item_new(c);
	if (!q) {
		if (m)
			nng_msg_free(m);
		if (!c->over)
			grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNAVAILABLE, "out of memory", NULL);
		call_maybe_free(c);
		return;
	}
	q->ask = ask;
	if (code) {
		item_error(c, q, code, err);
	} else if (t->closed_flag) {
		nng_msg_free(m);
		item_error(c, q, DMN_GRPC_UNAVAILABLE, "the server is shutting down");
	} else {
		q->chan.msg = m;
		if (c->rpc == DMN_GRPC_SHM_REGISTER)
			local_uid(t, c->peer, q);
		q->chan.conn = c->peer->id;
		q->chan.held = c->peer->held;
		q->in_daemon = true;
		dmn_inbox_post(t->ib, DMN_LANE_ARRIVED, &q->chan.in); /* under t->mu: never after the inbox closed */
	}
	if (c->stream) {
		if (c->queued < t->stream_max)
			start_recv(c);
		else
			c->recv_paused = true; /* read again once answers went out */
	}
	pump(c);
	call_maybe_free(c);
}

static void on_send(dmn_oip_grpc *t, gcall *c)
{
	c->send_busy = false;
	if (c->sbuf)
		grpc_byte_buffer_destroy(c->sbuf);
	c->sbuf = NULL;
	if (c->has_status)
		grpc_slice_unref(c->status);
	c->has_status = false;
	gitem *q = c->sent;
	c->sent = NULL;
	if (q)
		item_free(q);
	if (c->stream && c->recv_paused && !c->over && !c->half_closed && c->queued < t->stream_max)
		start_recv(c);
	pump(c);
	call_maybe_free(c);
}

static void on_close(dmn_oip_grpc *t, gcall *c)
{
	c->close_busy = false;
	c->over = true;
	gpeer *p = c->peer;
	if (!--p->calls && p->linked) {
		/* the client has no call left: the daemon forgets it (a new call is a new connection) */
		peer_unlink(t, p);
		dmn_closed *e = t->closed_flag ? NULL : calloc(1, sizeof(*e));
		if (e) {
			e->ops = &grpc_ops;
			e->conn = p->id;
			dmn_inbox_post(t->ib, DMN_LANE_CLOSED, &e->in);
		}
	}
	drop_ready(c);
	call_maybe_free(c);
}

static void cq_main(void *arg)
{
	dmn_oip_grpc *t = arg;
	for (;;) {
		grpc_event ev = grpc_completion_queue_next(t->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		gop *op = ev.tag;
		if (op->kind == OP_SHUTDOWN) {
			grpc_completion_queue_shutdown(t->cq);
			continue;
		}
		gcall *c = op->c;
		pthread_mutex_lock(&t->mu);
		switch (op->kind) {
		case OP_NEW:
			on_new(t, c, ev.success);
			break;
		case OP_RECV:
			on_recv(t, c);
			break;
		case OP_SEND:
			on_send(t, c);
			break;
		default:
			on_close(t, c);
			break;
		}
		pthread_mutex_unlock(&t->mu);
	}
}

/* ---- life ---- */

dmn_oip_grpc *dmn_oip_grpc_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop, char *err,
				 size_t errlen)
{
	const char *url = cfg->oip_grpc_listen;
	if (!url[0])
		return NULL;
	dmn_oip_grpc *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->cfg = cfg;
	t->log = log;
	t->ib = ib;
	t->loop = loop;
	t->loop_tid = uv_thread_self();
	t->lim.max_message = (size_t)cfg->max_message_bytes;
	t->lim.max_json = (size_t)cfg->oip_json_max_bytes;
	t->stream_max = cfg->client_inflight_max > 0 && cfg->client_inflight_max < INT_MAX ? (int)cfg->client_inflight_max : 64;
	t->op_shutdown.kind = OP_SHUTDOWN;
	pthread_mutex_init(&t->mu, NULL);
	grpc_init();
	t->cq = grpc_completion_queue_create_for_next(NULL);
	/* a request message past max_message_bytes is refused by gRPC (RESOURCE_EXHAUSTED); calls at
	 * once on one connection are client_inflight_max (HTTP/2 holds the next ones at the client
	 * rather than the daemon answering them busy); the port is this daemon's alone (gRPC would
	 * share it with SO_REUSEPORT) */
	grpc_arg args[] = {
		{.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
		 .value.integer = cfg->max_message_bytes > INT_MAX ? INT_MAX : (int)cfg->max_message_bytes},
		{.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = -1},
		{.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
		{.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_CONCURRENT_STREAMS, .value.integer = t->stream_max},
		{.type = GRPC_ARG_POINTER}, /* the quota, if any */
	};
	grpc_channel_args ca = {.num_args = sizeof(args) / sizeof(args[0]) - 1, .args = args};
	/* partial_bytes_max, when set, bounds the memory gRPC's connections take, all together */
	grpc_resource_quota *quota = NULL;
	if (cfg->partial_bytes_max) {
		quota = grpc_resource_quota_create("tensord-oip-grpc");
		grpc_resource_quota_resize(quota, (size_t)cfg->partial_bytes_max);
		args[ca.num_args++] = (grpc_arg){.type = GRPC_ARG_POINTER, .key = GRPC_ARG_RESOURCE_QUOTA,
						 .value.pointer = {.p = quota, .vtable = grpc_resource_quota_arg_vtable()}};
	}
	t->server = grpc_server_create(&ca, NULL);
	if (quota)
		grpc_resource_quota_unref(quota); /* the server holds it */
	grpc_server_register_completion_queue(t->server, t->cq, NULL);
	const char *addr = !strncmp(url, "grpc://", 7) ? url + 7 : url;
	grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
	t->port = grpc_server_add_http2_port(t->server, addr, cr);
	grpc_server_credentials_release(cr);
	if (t->port <= 0) {
		snprintf(err, errlen, "oip_grpc_listen %s: cannot listen there (in use, or not an address of this host)", url);
		goto fail;
	}
	int rv = uv_async_init(loop, &t->wake, on_wake);
	if (rv) {
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		goto fail;
	}
	t->wake.data = t;
	t->wake_live = true;
	grpc_server_start(t->server);
	pthread_mutex_lock(&t->mu);
	for (int i = 0; i < NEW_CALLS; i++)
		new_call(t);
	pthread_mutex_unlock(&t->mu);
	if ((rv = uv_thread_create(&t->thr, cq_main, t))) {
		snprintf(err, errlen, "oip_grpc_listen: a thread: %s", uv_strerror(rv));
		goto fail;
	}
	t->thr_live = true;
	dmn_log(log, DMN_LOG_INFO, "Open Inference Protocol over gRPC on %s (port %d)", url, t->port);
	return t;
fail:
	dmn_oip_grpc_close(t);
	uv_run(loop, UV_RUN_NOWAIT); /* the closes */
	dmn_oip_grpc_stop(t);
	return NULL;
}

int dmn_oip_grpc_port(const dmn_oip_grpc *t)
{
	return t ? t->port : 0;
}

/* Answers of calls already over go (at close and stop, when answers were given up). */
static void drop_over(dmn_oip_grpc *t)
{
	for (gcall *c = t->calls, *next; c; c = next) {
		next = c->lnext;
		if (c->over) {
			drop_ready(c);
			call_maybe_free(c);
		}
	}
}

void dmn_oip_grpc_close(dmn_oip_grpc *t)
{
	if (!t || t->closing)
		return;
	t->closing = true;
	pthread_mutex_lock(&t->mu);
	t->closed_flag = true;
	gitem *q = t->done_head;
	t->done_head = t->done_tail = NULL;
	for (; q; q = q->next) { /* answers that came too late: dropped when their call ends */
		nng_msg_free(q->reply);
		q->reply = NULL;
		q->in_daemon = false;
		q->ready = true;
		q->code = DMN_GRPC_UNAVAILABLE;
	}
	drop_over(t);
	pthread_mutex_unlock(&t->mu);
	if (t->wake_live)
		uv_close((uv_handle_t *)&t->wake, NULL);
	/* every call ends now (the drain is over: what a client did not take is dropped) */
	grpc_server_shutdown_and_notify(t->server, t->cq, &t->op_shutdown);
	grpc_server_cancel_all_calls(t->server);
}

void dmn_oip_grpc_stop(dmn_oip_grpc *t)
{
	if (!t)
		return;
	/* requests the daemon never answered are lost (the executor stopped): their calls end
	 * without them */
	pthread_mutex_lock(&t->mu);
	for (gitem *q = t->items; q; q = q->lnext)
		if (q->in_daemon) {
			q->in_daemon = false;
			q->ready = true;
			q->code = DMN_GRPC_UNAVAILABLE;
		}
	drop_over(t);
	pthread_mutex_unlock(&t->mu);
	if (t->thr_live) {
		uv_thread_join(&t->thr);
	} else if (t->cq) { /* it never ran: the shutdown's completions here */
		cq_main(t);
	}
	/* what is left (nothing, when every call ended) */
	while (t->calls) {
		gcall *c = t->calls;
		c->over = true;
		c->recv_busy = c->send_busy = c->close_busy = false;
		if (c->sent)
			item_free(c->sent);
		c->sent = NULL;
		for (gitem *q = c->qhead, *next; q; q = next) {
			next = q->qnext;
			item_free(q);
		}
		c->qhead = c->qtail = NULL;
		call_maybe_free(c);
	}
	while (t->peers) {
		gpeer *p = t->peers;
		t->peers = p->next;
		free(p);
	}
	if (t->server)
		grpc_server_destroy(t->server);
	if (t->cq)
		grpc_completion_queue_destroy(t->cq);
	grpc_shutdown_blocking();
	pthread_mutex_destroy(&t->mu);
	free(t);
}

int dmn_oip_grpc_sending(const dmn_oip_grpc *t)
{
	return t ? atomic_load(&((dmn_oip_grpc *)t)->sending) : 0;
}

void dmn_oip_grpc_get_stats(dmn_oip_grpc *t, dmn_oip_grpc_stats *st)
{
	*st = (dmn_oip_grpc_stats){0};
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	for (const gpeer *p = t->peers; p; p = p->next)
		st->open++;
	pthread_mutex_unlock(&t->mu);
	st->calls = t->st_calls;
	st->requests = t->st_requests;
	st->errors = t->st_errors;
}
