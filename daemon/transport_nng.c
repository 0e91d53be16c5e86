/* transport_nng.c: the nng transport: the REP socket, its listeners (ipc with mode 0660, tcp if
 * configured), the receive limit, and a pool of REP contexts ("slots"), each a channel
 * receiving one request at a time. Callbacks run on nng's threads and only post to the inbox.
 * Per connection (docs/isolation/connections.md): a table of open pipes (mutex) counts the slots
 * each holds (for client_inflight_max) and its peer's connections (peer_connections_max, checked
 * as the pipe is added); a reply not taken within reply_timeout_ms closes its pipe. The stop is
 * bounded: nng's close runs on a helper thread that is given up after a second. */
#include "transport.h"
#include "sockfile.h"
#include "message.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

/* One nng REP context: receives a request, later sends its reply, then receives again. */
typedef struct slot {
	dmn_chan chan;   /* first: the loop's view */
	struct dmn_nng *t;
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;    /* the aio is a send (else a receive) */
} slot;

/* An open connection (pipe), from its ADD_PRE to its REM_POST; under dmn_nng.mu. */
typedef struct conn {
	uint32_t id;
	char peer[64];   /* "uid N" (ipc) or the remote address (tcp): peer_connections_max's key */
	int held;        /* slots holding its requests or replies */
	bool timed_out;  /* a reply timed out: closing (logged once) */
	struct conn *next;
} conn;

#define CONN_BUCKETS 256

struct dmn_nng {
	const dmn_config *cfg; /* the loop's: read at start only (a reload rewrites it) */
	int reply_timeout_ms, peer_cap; /* copied at start: read on any thread */
	dmn_logger *log;
	dmn_inbox *ib;
	nng_socket sock;
	bool open;
	int nslots;
	slot *slots;
	atomic_int sending; /* replies handed to nng, not yet sent */
	int nlisteners;
	nng_listener listeners[2 * DMN_CFG_LIST_MAX];
	pthread_mutex_t mu;   /* conns, nconns */
	conn *conns[CONN_BUCKETS];
	int64_t nconns;
	atomic_llong refused_cap, reply_timeouts;
	atomic_llong cap_logged_at; /* CLOCK_MONOTONIC ns of the last refused-connection log line */
	/* the stop's helper thread */
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	bool stopped;
};

static void slot_send(dmn_chan *c, nng_msg *msg);
static void slot_recv(dmn_chan *c);
static bool slot_peer(const dmn_chan *c, uint64_t *uid, uint64_t *gid);
static void slot_close_after(dmn_chan *c);
static void slot_hangup(dmn_chan *c);

static const dmn_chan_ops nng_ops = {
	.name = "nng",
	.send = slot_send,
	.recv = slot_recv,
	.peer = slot_peer,
	.hangup = slot_hangup,
	.close_after = slot_close_after,
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the connections table (any nng thread; under t->mu) ---- */

static conn **conn_find(dmn_nng *t, uint32_t id)
{
	conn **c = &t->conns[id % CONN_BUCKETS];
	while (*c && (*c)->id != id)
		c = &(*c)->next;
	return c;
}

/* One more slot held by connection id; the count with it (0 when the connection is not known:
 * it closed already). */
static int conn_hold(dmn_nng *t, uint32_t id)
{
	pthread_mutex_lock(&t->mu);
	conn *c = *conn_find(t, id);
	int n = c ? ++c->held : 0;
	pthread_mutex_unlock(&t->mu);
	return n;
}

/* One slot fewer held by id; with timed_out, true the first time for this connection. */
static bool conn_release(dmn_nng *t, uint32_t id, bool timed_out)
{
	bool first = false;
	pthread_mutex_lock(&t->mu);
	conn *c = *conn_find(t, id);
	if (c) {
		if (c->held > 0)
			c->held--;
		first = timed_out && !c->timed_out;
		c->timed_out |= timed_out;
	}
	pthread_mutex_unlock(&t->mu);
	return first;
}

/* The key peer_connections_max counts by: the peer's uid on ipc, its address on tcp. */
static void peer_key(nng_pipe p, char *buf, size_t len)
{
	uint64_t uid;
	nng_sockaddr sa;
	char a[INET6_ADDRSTRLEN] = "?";
	if (!nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid)) {
		snprintf(buf, len, "uid %llu", (unsigned long long)uid);
	} else if (!nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) && sa.s_family == NNG_AF_INET) {
		inet_ntop(AF_INET, &sa.s_in.sa_addr, a, sizeof(a));
		snprintf(buf, len, "address %s", a);
	} else if (!nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) && sa.s_family == NNG_AF_INET6) {
		inet_ntop(AF_INET6, sa.s_in6.sa_addr, a, sizeof(a));
		snprintf(buf, len, "address %s", a);
	} else {
		snprintf(buf, len, "unknown peer");
	}
}

/* A new pipe: refused (closed) when its peer has peer_connections_max already, else entered. */
static void conn_add(dmn_nng *t, nng_pipe p)
{
	conn *c = calloc(1, sizeof(*c));
	if (!c) {
		nng_pipe_close(p);
		return;
	}
	c->id = nng_pipe_id(p);
	peer_key(p, c->peer, sizeof(c->peer));
	int cap = t->peer_cap, n = 0;
	pthread_mutex_lock(&t->mu);
	for (int b = 0; cap && b < CONN_BUCKETS && n < cap; b++)
		for (conn *o = t->conns[b]; o; o = o->next)
			n += !strcmp(o->peer, c->peer);
	bool refuse = cap && n >= cap;
	if (!refuse) {
		conn **slot = &t->conns[c->id % CONN_BUCKETS];
		c->next = *slot;
		*slot = c;
		t->nconns++;
	}
	pthread_mutex_unlock(&t->mu);
	if (!refuse)
		return;
	nng_pipe_close(p);
	long long total = atomic_fetch_add(&t->refused_cap, 1) + 1;
	/* at most a line a second however fast a peer reconnects */
	long long now = (long long)now_ns(), last = atomic_load(&t->cap_logged_at);
	if ((now - last > 1000000000ll || !last) && atomic_compare_exchange_strong(&t->cap_logged_at, &last, now))
		dmn_log(t->log, DMN_LOG_WARN,
			"closing a connection from %s: it has %d open (peer_connections_max); %lld refused so far",
			c->peer, n, total);
	free(c);
}

/* Connection id out of the table; true when it was there (then whoever took it out tells the
 * loop it closed). */
static bool conn_remove(dmn_nng *t, uint32_t id)
{
	pthread_mutex_lock(&t->mu);
	conn **c = conn_find(t, id), *gone = *c;
	if (gone) {
		*c = gone->next;
		t->nconns--;
	}
	pthread_mutex_unlock(&t->mu);
	free(gone);
	return gone != NULL;
}

static void post_closed(dmn_nng *t, uint32_t id)
{
	dmn_closed *e = calloc(1, sizeof(*e));
	if (!e)
		return; /* its requests are then answered into the void: harmless */
	e->ops = &nng_ops;
	e->conn = id;
	dmn_inbox_post(t->ib, DMN_LANE_CLOSED, &e->in);
}

/* Close connection id ourselves (any thread). It leaves the table and the loop hears of it now,
 * not at nng's REM_POST: nng 1.5.2's reaper can get stuck for good (docs/isolation/
 * connections.md), and then a closed pipe's REM_POST never comes; its queued requests are
 * dropped and it stops counting against peer_connections_max either way. What it had in flight
 * and arrives later is dropped at arrival (not in the table). */
static void conn_close(dmn_nng *t, uint32_t id)
{
	if (conn_remove(t, id))
		post_closed(t, id);
	nng_pipe p = NNG_PIPE_INITIALIZER;
	p.id = id;
	nng_pipe_close(p);
}

/* ---- slots ---- */

static void slot_recv_again(slot *sl)
{
	nng_aio_set_timeout(sl->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(sl->ctx, sl->aio);
}

/* A message whose JSON header is over max_header_bytes is refused on the length alone (the
 * decoder checks it first, arrival.c answers too_large): on nng's thread, keep only its 8-byte
 * prefix (and its pipe, for the peer's credentials), so that the loop never frees a huge
 * message (freeing 96 MiB there held every other client up for milliseconds). */
static void shrink_if_refused(const dmn_nng *t, nng_msg **msg)
{
	size_t len = nng_msg_len(*msg);
	const unsigned char *b = nng_msg_body(*msg);
	if (len < ((size_t)1 << 20) || memcmp(b, PROTO_MAGIC, 4))
		return;
	uint32_t jl = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
	nng_msg *small;
	if (jl <= t->cfg->max_header_bytes || nng_msg_alloc(&small, PROTO_PREFIX))
		return;
	memcpy(nng_msg_body(small), b, PROTO_PREFIX);
	nng_msg_set_pipe(small, nng_msg_get_pipe(*msg));
	nng_msg_free(*msg);
	*msg = small;
}

static void slot_cb(void *arg)
{
	slot *sl = arg;
	dmn_nng *t = sl->t;
	int rv = nng_aio_result(sl->aio);
	if (sl->sending) {
		sl->sending = false;
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(sl->aio));
			nng_aio_set_msg(sl->aio, NULL);
		}
		uint32_t id = sl->chan.conn;
		bool first = conn_release(t, id, rv == NNG_ETIMEDOUT);
		if (rv == NNG_ETIMEDOUT) {
			/* its client does not read: it goes, not the slots it would hold */
			if (first) {
				atomic_fetch_add(&t->reply_timeouts, 1);
				dmn_log(t->log, DMN_LOG_WARN,
					"closing connection %u: a reply not taken within %d ms (reply_timeout_ms)", id,
					t->reply_timeout_ms);
			}
			conn_close(t, id);
		}
		atomic_fetch_sub(&t->sending, 1);
		if (rv == NNG_ECLOSED)
			return;
		slot_recv_again(sl);
		return;
	}
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	if (rv != 0) { /* e.g. a message over the limit was dropped by nng: receive again */
		slot_recv_again(sl);
		return;
	}
	sl->chan.msg = nng_aio_get_msg(sl->aio);
	sl->chan.conn = nng_pipe_id(nng_msg_get_pipe(sl->chan.msg));
	sl->chan.held = conn_hold(t, sl->chan.conn);
	if (!sl->chan.held) { /* from a connection we closed: nobody wants its answer */
		nng_msg_free(sl->chan.msg);
		sl->chan.msg = NULL;
		slot_recv_again(sl);
		return;
	}
	sl->chan.fd = -1;
	shrink_if_refused(t, &sl->chan.msg);
	dmn_inbox_post(t->ib, DMN_LANE_ARRIVED, &sl->chan.in);
}

static void slot_send(dmn_chan *c, nng_msg *msg)
{
	slot *sl = (slot *)c;
	atomic_fetch_add(&sl->t->sending, 1);
	sl->sending = true;
	nng_aio_set_msg(sl->aio, msg);
	nng_aio_set_timeout(sl->aio, (nng_duration)sl->t->reply_timeout_ms);
	nng_ctx_send(sl->ctx, sl->aio);
}

static void slot_recv(dmn_chan *c)
{
	slot *sl = (slot *)c;
	conn_release(sl->t, c->conn, false);
	slot_recv_again(sl);
}

static void slot_hangup(dmn_chan *c)
{
	conn_close(((slot *)c)->t, c->conn);
}

/* ipc peers carry credentials; other transports (tcp) none */
static bool slot_peer(const dmn_chan *c, uint64_t *uid, uint64_t *gid)
{
	nng_pipe p = nng_msg_get_pipe(c->msg);
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, uid))
		return false;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, gid))
		*gid = UINT64_MAX;
	return true;
}

/* nng's messages are delimited: a bad one leaves the connection usable, and a refused peer
 * sending one request at a time keeps getting its answers (arrival.c) */
static void slot_close_after(dmn_chan *c)
{
	(void)c;
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	dmn_nng *t = arg;
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		conn_add(t, p);
		return;
	}
	if (ev == NNG_PIPE_EV_REM_POST && conn_remove(t, nng_pipe_id(p)))
		post_closed(t, nng_pipe_id(p));
}

static int listen_on(dmn_nng *t, const char *url, bool ipc, char *err, size_t errlen)
{
	nng_listener l;
	int rv;
	if (ipc) {
		const char *path = url + strlen("ipc://");
		if (dmn_sock_make_dirs(path)) {
			snprintf(err, errlen, "listen %s: cannot create its directory: %s", url, strerror(errno));
			return -1;
		}
		if (dmn_sock_claim(path, t->log, err, errlen)) /* its directory, one daemon, stale files */
			return -1;
	}
	if ((rv = nng_listener_create(&l, t->sock, url))) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -1;
	}
	t->listeners[t->nlisteners++] = l;
	if (ipc && (rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0660))) {
		snprintf(err, errlen, "listen %s: setting mode 0660: %s", url, nng_strerror(rv));
		return -1;
	}
	/* the transport's message holds REQ/REP's routing header (4 bytes a hop) before ours: leave
	 * room for it, and for a slightly larger message to reach the decoder's too_large reply */
	if ((rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, (size_t)t->cfg->max_message_bytes + 4096)) ||
	    (rv = nng_listener_start(l, 0))) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -1;
	}
	dmn_log(t->log, DMN_LOG_INFO, "listening on %s", url);
	return 0;
}

static int start(dmn_nng *t, char *err, size_t errlen)
{
	int rv;
	if ((rv = nng_rep0_open(&t->sock))) {
		snprintf(err, errlen, "nng: %s", nng_strerror(rv));
		return -1;
	}
	t->open = true;
	nng_pipe_notify(t->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, t);
	nng_pipe_notify(t->sock, NNG_PIPE_EV_REM_POST, pipe_cb, t);
	t->nslots = (int)t->cfg->max_pending;
	t->slots = calloc((size_t)t->nslots, sizeof(slot));
	if (!t->slots) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < t->nslots; i++) {
		slot *sl = &t->slots[i];
		sl->t = t;
		sl->chan.ops = &nng_ops;
		if ((rv = nng_ctx_open(&sl->ctx, t->sock)) || (rv = nng_aio_alloc(&sl->aio, slot_cb, sl))) {
			snprintf(err, errlen, "nng context %d: %s", i, nng_strerror(rv));
			t->nslots = i + (sl->aio != NULL);
			return -1;
		}
	}
	for (int i = 0; i < t->cfg->listen.n; i++)
		if (!strncmp(t->cfg->listen.v[i], "ipc://", 6) && listen_on(t, t->cfg->listen.v[i], true, err, errlen))
			return -1; /* unix:// is transport_unix.c's */
	for (int i = 0; i < t->cfg->tcp_listen.n; i++)
		if (listen_on(t, t->cfg->tcp_listen.v[i], false, err, errlen))
			return -1;
	for (int i = 0; i < t->nslots; i++)
		slot_recv_again(&t->slots[i]);
	return 0;
}

dmn_nng *dmn_nng_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, char *err, size_t errlen)
{
	dmn_nng *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->cfg = cfg;
	t->reply_timeout_ms = (int)cfg->reply_timeout_ms;
	t->peer_cap = (int)cfg->peer_connections_max;
	t->log = log;
	t->ib = ib;
	atomic_init(&t->sending, 0);
	atomic_init(&t->refused_cap, 0);
	atomic_init(&t->reply_timeouts, 0);
	atomic_init(&t->cap_logged_at, 0);
	pthread_mutex_init(&t->mu, NULL);
	pthread_mutex_init(&t->stop_mu, NULL);
	pthread_cond_init(&t->stop_cv, NULL);
	if (start(t, err, errlen)) {
		dmn_nng_stop(t, ib);
		return NULL;
	}
	return t;
}

int dmn_nng_sending(const dmn_nng *t)
{
	return t ? atomic_load(&t->sending) : 0;
}

void dmn_nng_get_stats(dmn_nng *t, dmn_nng_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	st->open = t->nconns;
	pthread_mutex_unlock(&t->mu);
	st->refused_cap = atomic_load(&t->refused_cap);
	st->reply_timeouts = atomic_load(&t->reply_timeouts);
}

/* The stop's helper thread: everything of nng's that can wait for a pipe. */
static void *close_main(void *arg)
{
	dmn_nng *t = arg;
	/* listeners first: no new connections while the rest closes */
	for (int i = 0; i < t->nlisteners; i++)
		nng_listener_close(t->listeners[i]);
	if (t->open)
		nng_close(t->sock);
	for (int i = 0; t->slots && i < t->nslots; i++)
		if (t->slots[i].aio) {
			nng_aio_stop(t->slots[i].aio);
			nng_aio_free(t->slots[i].aio);
		}
	pthread_mutex_lock(&t->stop_mu);
	t->stopped = true;
	pthread_cond_signal(&t->stop_cv);
	pthread_mutex_unlock(&t->stop_mu);
	return NULL;
}

#define STOP_WAIT_NS 1000000000ull /* how long nng's close may take before it is given up */

bool dmn_nng_stop(dmn_nng *t, dmn_inbox *ib)
{
	if (!t)
		return true;
	if (t->slots) {
		/* a REP send completes when nng has queued the reply on its pipe, not when the
		 * transport wrote it: closing at once can reset connections with the last replies unsent */
		nng_msleep(100);
	}
	pthread_t th;
	bool started = !pthread_create(&th, NULL, close_main, t);
	if (!started) {
		close_main(t);
	} else {
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		uint64_t ns = (uint64_t)dl.tv_nsec + STOP_WAIT_NS;
		dl.tv_sec += (time_t)(ns / 1000000000ull);
		dl.tv_nsec = (long)(ns % 1000000000ull);
		pthread_mutex_lock(&t->stop_mu);
		while (!t->stopped)
			if (pthread_cond_timedwait(&t->stop_cv, &t->stop_mu, &dl) == ETIMEDOUT)
				break;
		bool done = t->stopped;
		pthread_mutex_unlock(&t->stop_mu);
		if (!done) {
			/* nng's threads may still run our callbacks: t and the inbox stay as they are */
			dmn_log(t->log, DMN_LOG_WARN, "nng's close did not finish within %llu ms (nanomsg/nng#1543): "
				"exiting without it", STOP_WAIT_NS / 1000000ull);
			pthread_detach(th);
			return false;
		}
		pthread_join(th, NULL);
	}
	/* received, never handled */
	for (dmn_inbox_node *n = dmn_inbox_take(ib, DMN_LANE_ARRIVED), *next; n; n = next) {
		next = n->next;
		dmn_chan *ch = (dmn_chan *)n;
		nng_msg_free(ch->msg);
		ch->msg = NULL; /* a unix:// channel is freed by dmn_unix_stop */
		if (ch->fd >= 0)
			close(ch->fd);
		ch->fd = -1;
	}
	free(t->slots);
	if (t->slots)
		for (int i = 0; i < t->cfg->listen.n; i++)
			if (!strncmp(t->cfg->listen.v[i], "ipc://", 6))
				dmn_sock_release(t->cfg->listen.v[i] + strlen("ipc://"));
	for (int b = 0; b < CONN_BUCKETS; b++)
		for (conn *c = t->conns[b], *n; c; c = n) {
			n = c->next;
			free(c);
		}
	pthread_mutex_destroy(&t->mu);
	pthread_mutex_destroy(&t->stop_mu);
	pthread_cond_destroy(&t->stop_cv);
	free(t);
	return true;
}
