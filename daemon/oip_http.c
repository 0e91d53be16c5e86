/* oip_http.c: the Open Inference Protocol's HTTP/REST frontend on h2o (its libuv flavour, on the
 * daemon's loop): listening and connections, the routes of KServe v2 and Triton's extensions,
 * each request turned into one TSD1 request (oip.h) posted at the seam as a channel of its own,
 * and the TSD1 reply (handed back to the loop when the executor made it) sent as the answer.
 * Routes and statuses: docs/PROTOCOL.md, "Open Inference Protocol". */
#include "oip_http.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <h2o.h>
#include <zlib.h>

#include "oip.h"
#include "peeruid.h"
#include "sockfile.h"
#include "util.h"

#define CONN_BUCKETS 256

typedef struct oip_conn oip_conn;
typedef struct oip_call oip_call;

struct dmn_oip_http {
	const dmn_config *cfg;
	dmn_logger *log;
	dmn_inbox *ib;
	uv_loop_t *loop;
	uv_thread_t loop_tid;
	h2o_globalconf_t gconf;
	h2o_context_t ctx;
	h2o_accept_ctx_t actx;
	bool ctx_live;           /* h2o_context_init ran, dispose not yet */
	uv_tcp_t listener;
	bool listening;
	int port;
	uv_async_t wake;         /* answers made off the loop */
	bool wake_live;
	uv_timer_t reap;         /* at close: waits for the last connection, then disposes h2o */
	bool reap_live;
	bool closing;
	pthread_mutex_t mu;      /* guards done and closed_flag */
	oip_call *done_head, *done_tail;
	bool closed_flag;
	atomic_int sending;
	oip_conn *conns[CONN_BUCKETS]; /* by peer address (loop) */
	int nconns;
	uint32_t next_conn;
	uint64_t next_id;
	oip_call *live;          /* every call not yet freed (those left at stop are freed there) */
	dmn_oip_limits lim;
	/* figures (loop writes; read anywhere) */
	atomic_llong st_accepted, st_refused, st_requests, st_errors;
};

struct oip_conn {
	uv_tcp_t tcp;            /* first: h2o's close callback gets the handle */
	dmn_oip_http *t;
	uint32_t id;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	int held;                /* calls not yet freed */
	bool sock_gone;
	bool used;               /* a request came: its closing goes to the daemon */
	oip_conn *next;
};

struct oip_call {
	dmn_chan chan;           /* first: posted on ARRIVED */
	dmn_oip_http *t;
	oip_conn *conn;
	h2o_req_t *req;          /* NULL once h2o disposed it */
	dmn_oip_ask ask;
	nng_msg *reply;          /* the answer's bytes (its binary parts point into it) */
	dmn_oip_answer ans;
	bool req_gone, daemon_done, answered, counted_sending;
	int phase;               /* 1: a raw binary request's model.list, before its infer */
	char *inflated;          /* a compressed body, inflated */
	const uint8_t *body;     /* the (inflated) body while req lives */
	size_t body_len;
	const char *token;       /* "Authorization: Bearer" (in the request's pool), or NULL */
	oip_call *next;          /* done list */
	oip_call *lprev, *lnext; /* t->live */
};

static const dmn_chan_ops oip_ops;

static bool on_loop(const dmn_oip_http *t)
{
	uv_thread_t self = uv_thread_self();
	return uv_thread_equal(&self, &t->loop_tid);
}

/* ---- connections ---- */

static unsigned peer_hash(const struct sockaddr_storage *a, socklen_t n)
{
	const unsigned char *p = (const unsigned char *)a;
	unsigned h = 2166136261u;
	for (socklen_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h % CONN_BUCKETS;
}

static oip_conn *conn_find(dmn_oip_http *t, const struct sockaddr_storage *a, socklen_t n)
{
	for (oip_conn *c = t->conns[peer_hash(a, n)]; c; c = c->next)
		if (c->peerlen == n && !memcmp(&c->peer, a, n) && !c->sock_gone)
			return c;
	return NULL;
}

static void conn_unlink(dmn_oip_http *t, oip_conn *c)
{
	for (oip_conn **pp = &t->conns[peer_hash(&c->peer, c->peerlen)]; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			return;
		}
}

/* Same host (address without the port): peer_connections_max. */
static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr,
			       sizeof(struct in_addr));
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
		       sizeof(struct in6_addr));
}

static void conn_maybe_free(oip_conn *c)
{
	if (c->sock_gone && !c->held)
		free(c);
}

/* h2o closed the socket (the handle's close callback). */
static void on_sock_closed(uv_handle_t *h)
{
	oip_conn *c = (oip_conn *)h;
	dmn_oip_http *t = c->t;
	conn_unlink(t, c);
	c->sock_gone = true;
	t->nconns--;
	if (c->used && !t->closing) {
		dmn_closed *e = calloc(1, sizeof(*e));
		if (e) {
			e->ops = &oip_ops;
			e->conn = c->id;
			dmn_inbox_post(t->ib, DMN_LANE_CLOSED, &e->in);
		}
	}
	conn_maybe_free(c);
}

static void on_accept(uv_stream_t *l, int status)
{
	dmn_oip_http *t = l->data;
	if (status || t->closing)
		return;
	oip_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->t = t;
	if (uv_tcp_init(t->loop, &c->tcp)) {
		free(c);
		return;
	}
	if (uv_accept(l, (uv_stream_t *)&c->tcp)) {
		c->sock_gone = true;
		uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
		return;
	}
	int n = (int)sizeof(c->peer);
	uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &n);
	c->peerlen = (socklen_t)n;
	uv_tcp_nodelay(&c->tcp, 1);
	if (t->cfg->peer_connections_max) {
		int same = 0;
		for (int b = 0; b < CONN_BUCKETS; b++)
			for (oip_conn *o = t->conns[b]; o; o = o->next)
				same += same_host(&o->peer, &c->peer);
		if (same >= t->cfg->peer_connections_max) {
			t->st_refused++;
			c->sock_gone = true;
			uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
			return;
		}
	}
	c->id = ++t->next_conn;
	unsigned hb = peer_hash(&c->peer, c->peerlen);
	c->next = t->conns[hb];
	t->conns[hb] = c;
	t->nconns++;
	t->st_accepted++;
	h2o_socket_t *sock = h2o_uv_socket_create((uv_stream_t *)&c->tcp, on_sock_closed);
	h2o_accept(&t->actx, sock);
}

/* ---- calls: one request's life ---- */

static void call_free(oip_call *q)
{
	dmn_oip_http *t = q->t;
	if (q->counted_sending)
		atomic_fetch_sub(&t->sending, 1);
	if (q->reply)
		nng_msg_free(q->reply);
	if (q->chan.msg)
		nng_msg_free(q->chan.msg);
	dmn_oip_answer_free(&q->ans);
	free(q->inflated);
	oip_conn *c = q->conn;
	if (q->lprev)
		q->lprev->lnext = q->lnext;
	else
		t->live = q->lnext;
	if (q->lnext)
		q->lnext->lprev = q->lprev;
	free(q);
	if (c) {
		c->held--;
		conn_maybe_free(c);
	}
}

/* The request's memory pool went (answered and written, or its connection closed). */
static void on_req_dispose(void *p)
{
	oip_call *q = *(oip_call **)p;
	q->req = NULL;
	q->req_gone = true;
	q->body = NULL;
	if (q->daemon_done)
		call_free(q);
}

static void add_header(h2o_req_t *req, const char *name, const char *val, size_t n)
{
	h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 1, NULL, val, n);
}

static const char *reason(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Internal Server Error";
	}
}

static h2o_generator_t generator = {NULL, NULL};

/* Send q's answer (q->ans) on its request. */
static void respond(oip_call *q)
{
	h2o_req_t *req = q->req;
	dmn_oip_answer *a = &q->ans;
	q->answered = true;
	req->res.status = a->code;
	req->res.reason = reason(a->code);
	h2o_iovec_t bufs[DMN_OIP_PARTS + 1];
	size_t n = 0;
	if (!a->empty || a->code != 200) {
		if (a->nparts) {
			char len[32];
			int l = snprintf(len, sizeof(len), "%zu", a->json.len);
			add_header(req, "content-type", "application/octet-stream", 24);
			add_header(req, "inference-header-content-length", h2o_strdup(&req->pool, len, (size_t)l).base, (size_t)l);
		} else {
			add_header(req, "content-type", "application/json", 16);
		}
		bufs[n++] = h2o_iovec_init(a->json.p ? a->json.p : "", a->json.len);
		for (int i = 0; i < a->nparts; i++)
			if (a->part_len[i])
				bufs[n++] = h2o_iovec_init(a->part[i], a->part_len[i]);
	}
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += bufs[i].len;
	req->res.content_length = total;
	h2o_start_response(req, &generator);
	h2o_send(req, bufs, n, H2O_SEND_STATE_FINAL);
}

/* Answer q now with an error the frontend found (the daemon never saw q). */
static void respond_error(oip_call *q, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void respond_error(oip_call *q, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	q->t->st_errors++;
	dmn_oip_answer_error(&q->ans, code, "%s", msg);
	respond(q);
}

static void post(oip_call *q, nng_msg *m)
{
	q->chan.msg = m;
	q->chan.fd = -1;
	q->chan.conn = q->conn->id;
	q->chan.held = q->conn->held;
	q->daemon_done = false;
	q->conn->used = true;
	dmn_inbox_post(q->t->ib, DMN_LANE_ARRIVED, &q->chan.in);
}

static int raw_binary_infer(oip_call *q, const nng_msg *list, char *err, size_t errlen);

/* Loop: the daemon's reply to q (send), or none (reply NULL: recv). */
static void finish(oip_call *q, nng_msg *reply)
{
	q->daemon_done = true;
	if (q->req_gone) {
		if (reply)
			nng_msg_free(reply);
		call_free(q);
		return;
	}
	if (!reply) {
		dmn_oip_answer_error(&q->ans, 503, "the request was given up (its connection is closing)");
		respond(q);
		return;
	}
	if (q->phase == 1) { /* a raw binary request: the model's input known, now its infer */
		char err[512];
		q->phase = 2;
		int code = raw_binary_infer(q, reply, err, sizeof(err));
		nng_msg_free(reply);
		if (q->counted_sending) {
			q->counted_sending = false;
			atomic_fetch_sub(&q->t->sending, 1);
		}
		if (code) {
			dmn_oip_answer_error(&q->ans, code, "%s", err);
			respond(q);
		}
		return;
	}
	q->reply = reply;
	dmn_oip_answer_make(&q->ask, nng_msg_body(reply), nng_msg_len(reply), &q->ans);
	respond(q);
}

static void on_wake(uv_async_t *h)
{
	dmn_oip_http *t = h->data;
	pthread_mutex_lock(&t->mu);
	oip_call *q = t->done_head;
	t->done_head = t->done_tail = NULL;
	pthread_mutex_unlock(&t->mu);
	for (oip_call *next; q; q = next) {
		next = q->next;
		nng_msg *r = q->reply;
		q->reply = NULL;
		finish(q, r);
	}
}

/* ---- the channel's ops ---- */

static void ch_send(dmn_chan *c, nng_msg *reply)
{
	oip_call *q = (oip_call *)c;
	dmn_oip_http *t = q->t;
	if (on_loop(t)) {
		q->counted_sending = true;
		atomic_fetch_add(&t->sending, 1);
		finish(q, reply);
		return;
	}
	pthread_mutex_lock(&t->mu);
	if (t->closed_flag) { /* the loop is closing: q is left to stop (untouched here: the loop may dispose its request) */
		pthread_mutex_unlock(&t->mu);
		nng_msg_free(reply);
		return;
	}
	q->counted_sending = true;
	atomic_fetch_add(&t->sending, 1);
	q->reply = reply;
	q->next = NULL;
	if (t->done_tail)
		t->done_tail->next = q;
	else
		t->done_head = q;
	t->done_tail = q;
	pthread_mutex_unlock(&t->mu);
	uv_async_send(&t->wake);
}

static void ch_recv(dmn_chan *c)
{
	finish((oip_call *)c, NULL);
}

static bool ch_peer(const dmn_chan *c, uint64_t *uid, uint64_t *gid)
{
	(void)c, (void)uid, (void)gid;
	return false; /* tcp: no credentials (a token, when configured) */
}

static void ch_hangup(dmn_chan *c)
{
	oip_call *q = (oip_call *)c;
	if (q->req)
		q->req->http1_is_persistent = 0;
	uv_os_fd_t fd;
	if (!q->conn->sock_gone && !uv_fileno((uv_handle_t *)&q->conn->tcp, &fd))
		shutdown(fd, SHUT_RD);
}

static void ch_close_after(dmn_chan *c)
{
	oip_call *q = (oip_call *)c;
	if (q->req)
		q->req->http1_is_persistent = 0;
}

static const dmn_chan_ops oip_ops = {
	.name = "http",
	.send = ch_send,
	.recv = ch_recv,
	.peer = ch_peer,
	.hangup = ch_hangup,
	.close_after = ch_close_after,
};

/* ---- routes ---- */

#define MAX_SEGS 8
typedef struct segs {
	int n;
	const char *s[MAX_SEGS];
	size_t len[MAX_SEGS];
} segs;

static bool seg_is(const segs *g, int i, const char *w)
{
	return i < g->n && g->len[i] == strlen(w) && !memcmp(g->s[i], w, g->len[i]);
}

/* The request's token: "Authorization: Bearer T". */
static void take_token(oip_call *q)
{
	h2o_req_t *req = q->req;
	ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
	q->token = NULL;
	if (i < 0)
		return;
	h2o_iovec_t v = req->headers.entries[i].value;
	if (v.len > 7 && !strncasecmp(v.base, "Bearer ", 7) && v.len - 7 <= 4096) {
		q->token = h2o_strdup(&req->pool, v.base + 7, v.len - 7).base; /* lives as long as the request */
	}
}

/* The body, inflated when Content-Encoding says gzip or deflate; an HTTP status on failure. */
static int take_body(oip_call *q, char *err, size_t errlen)
{
	h2o_req_t *req = q->req;
	q->body = (const uint8_t *)req->entity.base;
	q->body_len = req->entity.base ? req->entity.len : 0;
	ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_ENCODING, -1);
	if (i < 0)
		return 0;
	h2o_iovec_t v = req->headers.entries[i].value;
	bool gz = h2o_lcstris(v.base, v.len, H2O_STRLIT("gzip")), df = h2o_lcstris(v.base, v.len, H2O_STRLIT("deflate"));
	if (h2o_lcstris(v.base, v.len, H2O_STRLIT("identity")))
		return 0;
	if (!gz && !df) {
		snprintf(err, errlen, "Content-Encoding \"%.*s\": gzip, deflate or identity", (int)(v.len < 32 ? v.len : 32), v.base);
		return 415;
	}
	z_stream z = {0};
	if (inflateInit2(&z, gz ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) {
		snprintf(err, errlen, "out of memory");
		return 503;
	}
	size_t cap = q->body_len * 4 + 4096, max = q->t->lim.max_message, len = 0;
	if (cap > max)
		cap = max;
	char *out = malloc(cap);
	z.next_in = (Bytef *)q->body;
	z.avail_in = (uInt)q->body_len;
	int rc = Z_OK;
	while (out && rc != Z_STREAM_END) {
		if (len == cap) {
			if (cap == max) {
				free(out);
				inflateEnd(&z);
				snprintf(err, errlen, "the inflated body is past max_message_bytes (%zu)", max);
				return 413;
			}
			size_t nc = cap * 2 > max ? max : cap * 2;
			char *o = realloc(out, nc);
			if (!o) {
				free(out);
				out = NULL;
				break;
			}
			out = o;
			cap = nc;
		}
		z.next_out = (Bytef *)out + len;
		z.avail_out = (uInt)(cap - len > UINT32_MAX ? UINT32_MAX : cap - len);
		size_t before = z.avail_out;
		rc = inflate(&z, Z_NO_FLUSH);
		len += before - z.avail_out;
		if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && len == cap)) {
			free(out);
			inflateEnd(&z);
			snprintf(err, errlen, "the %s body does not inflate (%s)", gz ? "gzip" : "deflate", z.msg ? z.msg : "truncated");
			return 400;
		}
	}
	inflateEnd(&z);
	if (!out) {
		snprintf(err, errlen, "out of memory");
		return 503;
	}
	q->inflated = out;
	q->body = (const uint8_t *)out;
	q->body_len = len;
	return 0;
}

/* The model and version of segments from i ("models", M[, "versions", V]); the index after. */
static int model_ref(oip_call *q, const segs *g, int i, char *err, size_t errlen)
{
	if (!dmn_name_valid(g->s[i], g->len[i])) {
		snprintf(err, errlen, "model name \"%.*s\": 1..%d bytes of [A-Za-z0-9_.-]", (int)(g->len[i] < 80 ? g->len[i] : 80),
			 g->s[i], DMN_OIP_NAME_MAX);
		return -1;
	}
	memcpy(q->ask.model, g->s[i], g->len[i]);
	q->ask.model[g->len[i]] = 0;
	i++;
	if (seg_is(g, i, "versions")) {
		if (i + 1 >= g->n) {
			snprintf(err, errlen, "versions: a version number is required");
			return -1;
		}
		char v[24];
		size_t n = g->len[i + 1];
		char *end;
		if (!n || n >= sizeof(v)) {
			snprintf(err, errlen, "version: a positive integer");
			return -1;
		}
		memcpy(v, g->s[i + 1], n);
		v[n] = 0;
		long long x = strtoll(v, &end, 10);
		if (*end || x < 1 || x > INT32_MAX) {
			snprintf(err, errlen, "version \"%s\": a positive integer", v);
			return -1;
		}
		q->ask.version = x;
		i += 2;
	}
	return i;
}

/* A loopback caller's uid from the kernel's socket table, on q's channel (system shared memory
 * maps only that uid's objects). */
static void local_uid(oip_call *q)
{
	struct sockaddr_storage peer, local;
	h2o_conn_t *c = q->req->conn;
	if (!c->callbacks->get_peername(c, (struct sockaddr *)&peer) || !c->callbacks->get_sockname(c, (struct sockaddr *)&local))
		return;
	q->chan.has_local_uid = dmn_tcp_peer_uid((struct sockaddr *)&peer, (struct sockaddr *)&local, &q->chan.local_uid);
}

static bool method_is(const h2o_req_t *req, const char *m)
{
	return req->method.len == strlen(m) && !memcmp(req->method.base, m, req->method.len);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
	dmn_oip_http *t = *(dmn_oip_http **)(self + 1);
	t->st_requests++;
	oip_call *q = calloc(1, sizeof(*q));
	if (!q) {
		h2o_send_error_generic(req, 503, "Service Unavailable", "{\"error\":\"out of memory\"}", 0);
		return 0;
	}
	q->t = t;
	q->req = req;
	q->lnext = t->live;
	if (t->live)
		t->live->lprev = q;
	t->live = q;
	q->chan.ops = &oip_ops;
	q->chan.fd = -1;
	oip_call **slot = h2o_mem_alloc_shared(&req->pool, sizeof(*slot), on_req_dispose);
	*slot = q;
	struct sockaddr_storage ss;
	socklen_t n = req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss);
	q->conn = conn_find(t, &ss, n);
	if (!q->conn) { /* cannot happen for a connection this frontend accepted */
		q->daemon_done = true;
		respond_error(q, 500, "the connection is unknown");
		return 0;
	}
	q->conn->held++;
	q->daemon_done = true; /* until posted: nothing for the daemon to answer */
	/* the path's segments after /v2 (the query ignored) */
	h2o_iovec_t path = req->path_normalized;
	segs g = {0};
	if (path.len < 3 || memcmp(path.base, "/v2", 3) || (path.len > 3 && path.base[3] != '/')) {
		respond_error(q, 404, "not found: %.*s (the Open Inference Protocol is under /v2)", (int)(path.len < 200 ? path.len : 200),
			      path.base);
		return 0;
	}
	for (size_t i = 3; i < path.len;) {
		while (i < path.len && path.base[i] == '/')
			i++;
		if (i == path.len)
			break;
		size_t j = i;
		while (j < path.len && path.base[j] != '/')
			j++;
		if (g.n == MAX_SEGS) {
			respond_error(q, 404, "not found: %.*s", (int)(path.len < 200 ? path.len : 200), path.base);
			return 0;
		}
		g.s[g.n] = path.base + i;
		g.len[g.n++] = j - i;
		i = j;
	}
	take_token(q);
	const char *tok = q->token;
	uint64_t id = ++t->next_id;
	char err[1024];
	bool get = method_is(req, "GET"), postm = method_is(req, "POST");
	nng_msg *m = NULL;
	const char *need = "GET";
	if (g.n == 0) {
		q->ask.kind = DMN_OIP_SERVER_META;
		if (get)
			m = dmn_oip_verb_msg("hello", id, NULL, NULL, tok);
	} else if (seg_is(&g, 0, "health") && g.n == 2 && seg_is(&g, 1, "live")) {
		q->ask.kind = DMN_OIP_LIVE;
		if (get)
			m = dmn_oip_verb_msg("health", id, NULL, NULL, tok);
	} else if (seg_is(&g, 0, "health") && g.n == 2 && seg_is(&g, 1, "ready")) {
		q->ask.kind = DMN_OIP_READY;
		if (get)
			m = dmn_oip_verb_msg("health", id, NULL, NULL, tok);
	} else if (seg_is(&g, 0, "models") && g.n == 2 && seg_is(&g, 1, "stats")) {
		q->ask.kind = DMN_OIP_STATS;
		if (get)
			m = dmn_oip_verb_msg("stats", id, NULL, NULL, tok);
	} else if (seg_is(&g, 0, "models") && g.n >= 2) {
		int i = model_ref(q, &g, 1, err, sizeof(err));
		if (i < 0) {
			respond_error(q, 400, "%s", err);
			return 0;
		}
		if (i == g.n) {
			q->ask.kind = DMN_OIP_MODEL_META;
		} else if (i + 1 == g.n && seg_is(&g, i, "ready")) {
			q->ask.kind = DMN_OIP_MODEL_READY;
		} else if (i + 1 == g.n && seg_is(&g, i, "config")) {
			q->ask.kind = DMN_OIP_MODEL_CONFIG;
		} else if (i + 1 == g.n && seg_is(&g, i, "stats")) {
			q->ask.kind = DMN_OIP_STATS;
		} else if (i + 1 == g.n && seg_is(&g, i, "infer")) {
			q->ask.kind = DMN_OIP_INFER;
			need = "POST";
		} else {
			respond_error(q, 404, "not found: %.*s", (int)(path.len < 200 ? path.len : 200), path.base);
			return 0;
		}
		if (q->ask.kind == DMN_OIP_INFER && postm) {
			int code = take_body(q, err, sizeof(err));
			if (code) {
				respond_error(q, code, "%s", err);
				return 0;
			}
			ssize_t hi = h2o_find_header_by_str(&req->headers, H2O_STRLIT("inference-header-content-length"), -1);
			size_t json_len = q->body_len;
			if (hi >= 0) {
				h2o_iovec_t v = req->headers.entries[hi].value;
				char b[24], *end;
				if (!v.len || v.len >= sizeof(b)) {
					respond_error(q, 400, "Inference-Header-Content-Length: a byte count");
					return 0;
				}
				memcpy(b, v.base, v.len);
				b[v.len] = 0;
				unsigned long long x = strtoull(b, &end, 10);
				if (*end || b[0] == '-') {
					respond_error(q, 400, "Inference-Header-Content-Length \"%s\": a byte count", b);
					return 0;
				}
				json_len = x > SIZE_MAX ? SIZE_MAX : (size_t)x;
			}
			if (hi >= 0 && json_len == 0) { /* a raw binary request: the model's one input first */
				q->phase = 1;
				snprintf(q->ask.id, sizeof(q->ask.id), "%s", ""); /* none */
				m = dmn_oip_verb_msg("model.list", id, NULL, NULL, tok);
			} else {
				code = dmn_oip_infer_msg(&t->lim, q->body, q->body_len, json_len, id, tok, &q->ask, &m, err,
							 sizeof(err));
				if (code) {
					respond_error(q, code, "%s", err);
					return 0;
				}
			}
		} else if (q->ask.kind == DMN_OIP_STATS && get) {
			m = dmn_oip_verb_msg("stats", id, NULL, NULL, tok);
		} else if (q->ask.kind != DMN_OIP_INFER && get) {
			m = dmn_oip_verb_msg("model.list", id, NULL, NULL, tok);
		}
	} else if (seg_is(&g, 0, "systemsharedmemory")) {
		/* [region/{name}/](status|unregister), region/{name}/register */
		int i = 1;
		const char *name = NULL;
		char nb[DMN_OIP_NAME_MAX + 1];
		if (seg_is(&g, 1, "region") && g.n == 4) {
			if (!dmn_name_valid(g.s[2], g.len[2])) {
				respond_error(q, 400, "region name: 1..%d bytes of [A-Za-z0-9_.-]", DMN_OIP_NAME_MAX);
				return 0;
			}
			memcpy(nb, g.s[2], g.len[2]);
			nb[g.len[2]] = 0;
			name = nb;
			i = 3;
		}
		if (i + 1 != g.n) {
			respond_error(q, 404, "not found: %.*s", (int)(path.len < 200 ? path.len : 200), path.base);
			return 0;
		}
		if (seg_is(&g, i, "status")) {
			q->ask.kind = DMN_OIP_SHM_STATUS;
			if (get)
				m = dmn_oip_verb_msg("sysshm.status", id, name ? "name" : NULL, name, tok);
		} else if (seg_is(&g, i, "unregister")) {
			q->ask.kind = DMN_OIP_SHM_UNREGISTER;
			need = "POST";
			if (postm)
				m = dmn_oip_verb_msg("sysshm.unregister", id, name ? "name" : NULL, name, tok);
		} else if (seg_is(&g, i, "register") && name) {
			q->ask.kind = DMN_OIP_SHM_REGISTER;
			need = "POST";
			if (postm) {
				int code = take_body(q, err, sizeof(err));
				if (!code)
					code = dmn_oip_shm_register_msg(q->body, q->body_len, name, id, tok, &m, err, sizeof(err));
				if (code) {
					respond_error(q, code, "%s", err);
					return 0;
				}
				local_uid(q);
			}
		} else {
			respond_error(q, 404, "not found: %.*s", (int)(path.len < 200 ? path.len : 200), path.base);
			return 0;
		}
	} else if (seg_is(&g, 0, "cudasharedmemory")) {
		respond_error(q, 400, "CUDA shared memory is not served by this server (system shared memory is, with config oip_shm)");
		return 0;
	} else if (seg_is(&g, 0, "repository") && g.n == 2 && seg_is(&g, 1, "index")) {
		q->ask.kind = DMN_OIP_REPO_INDEX;
		need = "POST";
		if (postm || get)
			m = dmn_oip_verb_msg("repo.index", id, NULL, NULL, tok);
	} else if (seg_is(&g, 0, "repository") && g.n == 4 && seg_is(&g, 1, "models") &&
		   (seg_is(&g, 3, "load") || seg_is(&g, 3, "unload"))) {
		need = "POST";
		if (model_ref(q, &g, 2, err, sizeof(err)) != 3) {
			respond_error(q, 400, "%s", err);
			return 0;
		}
		bool load = seg_is(&g, 3, "load");
		q->ask.kind = load ? DMN_OIP_LOAD : DMN_OIP_UNLOAD;
		if (postm)
			m = dmn_oip_verb_msg(load ? "repo.load" : "model.unload", id, "name", q->ask.model, tok);
	} else {
		respond_error(q, 404, "not found: %.*s", (int)(path.len < 200 ? path.len : 200), path.base);
		return 0;
	}
	if (!m) {
		if (!(get || postm) || (strcmp(need, "GET") ? !postm : !get))
			respond_error(q, 405, "%.*s is not allowed on %.*s (%s)", (int)(req->method.len < 16 ? req->method.len : 16),
				      req->method.base, (int)(path.len < 200 ? path.len : 200), path.base, need);
		else
			respond_error(q, 503, "out of memory");
		return 0;
	}
	post(q, m);
	return 0;
}

/* A raw binary request (Inference-Header-Content-Length: 0): the body is the data of the
 * model's only input, whose shape has at most one variable dimension (Triton's rule); every
 * output comes back as binary data. list: the model.list reply. */
static int raw_binary_infer(oip_call *q, const nng_msg *list, char *err, size_t errlen)
{
	proto_msg *pm = malloc(sizeof(*pm));
	proto_err pe;
	int code = 0;
	if (!pm) {
		snprintf(err, errlen, "out of memory");
		return 503;
	}
	if (proto_decode(nng_msg_body((nng_msg *)list), nng_msg_len((nng_msg *)list), nng_msg_len((nng_msg *)list),
			 PROTO_REPLY, pm, &pe) != TSD_OK) {
		free(pm);
		snprintf(err, errlen, "model.list did not decode: %s", pe.msg);
		return 500;
	}
	const cJSON *e = NULL, *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pm->json, "models"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, q->ask.model))
			e = it;
	}
	const cJSON *ins = e ? cJSON_GetObjectItemCaseSensitive(e, "inputs") : NULL;
	const cJSON *in = cJSON_GetArrayItem(ins, 0), *nm = cJSON_GetObjectItemCaseSensitive(in, "name");
	const cJSON *dtj = cJSON_GetObjectItemCaseSensitive(in, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(in, "shape");
	tsd_dtype dt;
	int64_t shape[TSD_MAX_DIMS];
	int nd = 0, var = -1;
	size_t fixed = 1, esz;
	if (!e) {
		snprintf(err, errlen, "Request for unknown model: '%s' is not found", q->ask.model);
		code = 404;
		goto out;
	}
	if (cJSON_GetArraySize(ins) != 1 || !cJSON_IsString(nm) || !cJSON_IsString(dtj) ||
	    !tsd_dtype_parse(dtj->valuestring, &dt)) {
		snprintf(err, errlen, "a raw binary request (Inference-Header-Content-Length: 0) needs a model of one input; '%s' has %d",
			 q->ask.model, cJSON_GetArraySize(ins));
		code = 400;
		goto out;
	}
	const cJSON *d;
	cJSON_ArrayForEach(d, sh)
	{
		if (nd == TSD_MAX_DIMS)
			break;
		shape[nd] = (int64_t)d->valuedouble;
		if (shape[nd] < 0) {
			if (var >= 0) {
				snprintf(err, errlen, "a raw binary request needs an input with at most one variable dimension");
				code = 400;
				goto out;
			}
			var = nd;
		} else {
			fixed *= (size_t)shape[nd];
		}
		nd++;
	}
	esz = tsd_dtype_size(dt);
	if (!fixed || q->body_len % (fixed * esz) || (var < 0 && q->body_len != fixed * esz)) {
		snprintf(err, errlen, "a raw binary request of %zu bytes does not fill input \"%s\" (%s, %zu elements per %s)",
			 q->body_len, nm->valuestring, dmn_oip_dtype(dt), fixed, var >= 0 ? "row" : "request");
		code = 400;
		goto out;
	}
	if (var >= 0)
		shape[var] = (int64_t)(q->body_len / (fixed * esz));
	q->ask.binary_out = true;
	q->ask.nsel = 0;
	cJSON *h = dmn_oip_infer_header(++q->t->next_id, &q->ask, q->token);
	proto_out po = {.name = nm->valuestring, .dtype = dt, .ndim = nd, .shape = shape,
			.data = q->body_len ? (const void *)q->body : ""};
	nng_msg *m = NULL;
	void *mb;
	size_t ml;
	tsd_status st = TSD_OUT_OF_MEMORY;
	if (h)
		st = proto_encode(h, &po, 1, q->t->lim.max_message, dmn_oip_msg_alloc, &m, &mb, &ml, &pe);
	cJSON_Delete(h);
	if (st != TSD_OK) {
		if (m)
			nng_msg_free(m);
		snprintf(err, errlen, "%s", st == TSD_OUT_OF_MEMORY ? "out of memory" : pe.msg);
		code = st == TSD_TOO_LARGE ? 413 : st == TSD_OUT_OF_MEMORY ? 503 : 400;
		goto out;
	}
	post(q, m);
out:
	proto_msg_free(pm);
	free(pm);
	return code;
}

/* ---- life ---- */

static int listen_addr(dmn_oip_http *t, char *err, size_t errlen)
{
	const char *url = t->cfg->oip_http_listen;
	int fd = dmn_tcp_listen(url, &t->port, err, errlen);
	if (fd < 0)
		return -1;
	int rv;
	if ((rv = uv_tcp_init(t->loop, &t->listener)) || (rv = uv_tcp_open(&t->listener, fd))) {
		close(fd);
		snprintf(err, errlen, "oip_http_listen %s: %s", url, uv_strerror(rv));
		return -1;
	}
	t->listening = true;
	t->listener.data = t;
	if ((rv = uv_listen((uv_stream_t *)&t->listener, SOMAXCONN, on_accept))) {
		snprintf(err, errlen, "oip_http_listen %s: %s", url, uv_strerror(rv));
		return -1;
	}
	return 0;
}

dmn_oip_http *dmn_oip_http_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop, char *err,
				 size_t errlen)
{
	if (!cfg->oip_http_listen[0])
		return NULL;
	dmn_oip_http *t = calloc(1, sizeof(*t));
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
	pthread_mutex_init(&t->mu, NULL);
	h2o_config_init(&t->gconf);
	t->gconf.server_name = h2o_iovec_init(H2O_STRLIT("tensord"));
	t->gconf.max_request_entity_size = (size_t)cfg->max_message_bytes;
	t->gconf.http1.req_timeout = (uint64_t)cfg->frame_timeout_ms;
	t->gconf.http2.idle_timeout = (uint64_t)cfg->frame_timeout_ms;
	h2o_hostconf_t *host = h2o_config_register_host(&t->gconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
	h2o_pathconf_t *pc = h2o_config_register_path(host, "/", 0);
	h2o_handler_t *h = h2o_create_handler(pc, sizeof(*h) + sizeof(t));
	h->on_req = on_req;
	*(dmn_oip_http **)(h + 1) = t;
	/* responses gzip'd for clients that accept it (h2o's filter); brotli left out */
	h2o_compress_args_t ca = {.min_size = 1024, .gzip = {.quality = 1}, .brotli = {.quality = -1}};
	h2o_compress_register(pc, &ca);
	h2o_context_init(&t->ctx, loop, &t->gconf);
	t->ctx_live = true;
	t->actx.ctx = &t->ctx;
	t->actx.hosts = t->gconf.hosts;
	int rv = uv_async_init(loop, &t->wake, on_wake);
	if (rv) {
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		goto fail;
	}
	t->wake.data = t;
	t->wake_live = true;
	if (listen_addr(t, err, errlen))
		goto fail;
	dmn_log(log, DMN_LOG_INFO, "Open Inference Protocol over HTTP on %s (port %d)", cfg->oip_http_listen, t->port);
	return t;
fail:
	dmn_oip_http_close(t);
	uv_run(loop, UV_RUN_NOWAIT); /* the closes */
	dmn_oip_http_stop(t);
	return NULL;
}

int dmn_oip_http_port(const dmn_oip_http *t)
{
	return t ? t->port : 0;
}

static void on_reap(uv_timer_t *h)
{
	dmn_oip_http *t = h->data;
	if (t->nconns > 0)
		return;
	uv_timer_stop(&t->reap);
	uv_close((uv_handle_t *)&t->reap, NULL);
	if (t->ctx_live) {
		h2o_context_dispose(&t->ctx);
		t->ctx_live = false;
	}
}

void dmn_oip_http_close(dmn_oip_http *t)
{
	if (!t || t->closing)
		return;
	t->closing = true;
	if (t->listening)
		uv_close((uv_handle_t *)&t->listener, NULL);
	pthread_mutex_lock(&t->mu);
	t->closed_flag = true;
	oip_call *q = t->done_head;
	t->done_head = t->done_tail = NULL;
	pthread_mutex_unlock(&t->mu);
	for (oip_call *next; q; q = next) { /* answers that came too late */
		next = q->next;
		nng_msg *r = q->reply;
		q->reply = NULL;
		finish(q, r);
	}
	if (t->wake_live)
		uv_close((uv_handle_t *)&t->wake, NULL);
	/* every connection ends: h2o reads end of file and closes it its own way (the drain is
	 * over: what a client did not take is dropped, as on the stream transport; not
	 * h2o_context_request_shutdown, whose HTTP/2 grace timer would outlive the context) */
	for (int b = 0; b < CONN_BUCKETS; b++)
		for (oip_conn *c = t->conns[b]; c; c = c->next) {
			uv_os_fd_t fd;
			if (!uv_fileno((uv_handle_t *)&c->tcp, &fd))
				shutdown(fd, SHUT_RDWR);
		}
	if (!uv_timer_init(t->loop, &t->reap)) {
		t->reap.data = t;
		t->reap_live = true;
		uv_timer_start(&t->reap, on_reap, 0, 10);
	}
}

void dmn_oip_http_stop(dmn_oip_http *t)
{
	if (!t)
		return;
	/* requests the daemon never answered (the loop took their messages or they were left on
	 * the inbox with theirs): h2o is gone, so only their memory */
	while (t->live) {
		oip_call *q = t->live;
		t->live = q->lnext;
		if (q->chan.msg)
			nng_msg_free(q->chan.msg);
		if (q->reply)
			nng_msg_free(q->reply);
		dmn_oip_answer_free(&q->ans);
		free(q->inflated);
		if (q->conn && !--q->conn->held && q->conn->sock_gone)
			free(q->conn);
		free(q);
	}
	if (t->ctx_live) /* connections left when the loop ended (it should not) */
		h2o_context_dispose(&t->ctx);
	h2o_config_dispose(&t->gconf);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

int dmn_oip_http_sending(const dmn_oip_http *t)
{
	return t ? atomic_load(&((dmn_oip_http *)t)->sending) : 0;
}

void dmn_oip_http_get_stats(dmn_oip_http *t, dmn_oip_http_stats *st)
{
	*st = (dmn_oip_http_stats){0};
	if (!t)
		return;
	st->open = t->nconns;
	st->accepted = t->st_accepted;
	st->refused_cap = t->st_refused;
	st->requests = t->st_requests;
	st->errors = t->st_errors;
}
