/* transport_stream.c: the daemon's stream sockets on its libuv loop. unix:// frames each message
 * as a u32 little-endian length + one TSD1 message (docs/PROTOCOL.md "unix:// framing"); ipc://
 * (AF_UNIX) and tcp:// speak nng's SP wire protocol for nng's REQ clients: an 8-byte handshake,
 * then per message its length (ipc: a type byte first), the REQ's backtrace (4-byte words, the
 * last with its top bit set), the TSD1 message; replies carry the backtrace back. The loop
 * accepts (SO_PEERCRED kept on AF_UNIX; peer_connections_max per uid, per address on tcp),
 * reads with recvmsg into a frame state machine (prefix, backtrace, TSD1 prefix against
 * max_header_bytes, body into an nng_msg used as a plain buffer) under frame_timeout_ms and a
 * total budget for half-received frames (partial_bytes_max), and posts each frame as a channel
 * of its own. Replies are written by the thread that made them while nothing is queued on the
 * connection (under its mutex, non-blocking); the rest is queued and the loop woken for it. */
#include "transport.h"
#include "sockfile.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <tensord/engine.h>

#define STAGE_BYTES 65536 /* the loop's read buffer; bodies at least this far from done are read in place */
#define READS_PER_WAKE 64 /* recvmsg calls per readable event: one busy connection cannot hold the loop */
#define ACCEPTS_PER_WAKE 64
#define MAX_FDS 16        /* descriptors one recvmsg can take (then closed) */
#define PRE_MAX 9         /* a frame's length prefix: unix 4 (LE), SP tcp 8 (BE), SP ipc 1 + 8 */
#define SP_HELLO 8        /* the SP handshake: 0 'S' 'P' 0, protocol (BE16), 0 0 */
#define SP_BT_MAX 32      /* a backtrace of at most 8 hops (nng's default ttl) */
#define SP_SLACK 4096    /* SP bodies up to this far over max_message_bytes reach the decoder (too_large) */
#define SP_REQ0 0x30
#define SP_REP0 0x31

typedef struct uconn uconn;

/* One frame's channel: the request, then its reply until written. */
typedef struct ureq {
	dmn_chan chan;        /* first: the loop's view */
	uconn *c;
	struct ureq *next;    /* the connection's queue of replies being written (under c->mu) */
	struct ureq *lprev, *lnext; /* the connection's channels alive (under c->mu) */
	nng_msg *out;         /* the reply queued */
	unsigned char pre[PRE_MAX + SP_BT_MAX]; /* its length prefix (and SP backtrace) */
	uint8_t npre;
	unsigned char bt[SP_BT_MAX]; /* SP: the request's backtrace, sent back with its reply */
	uint8_t nbt;
	size_t off;           /* bytes of prefix + body written */
	uint64_t queued_at;   /* ns */
	bool close_after;     /* the connection closes once this reply is written */
	bool counted;         /* holds one of the connection's `held` */
} ureq;

struct uconn {
	dmn_stream *t;
	int fd;
	uint32_t id;
	dmn_stream_kind kind;
	bool sp;              /* ipc:// or tcp://: nng's SP framing */
	uint64_t uid, gid;    /* AF_UNIX: SO_PEERCRED */
	char peer[64];        /* "uid N", or the tcp peer's address: in logs, peer_connections_max's key */
	uv_poll_t poll;
	/* loop only */
	int events;           /* polled for now */
	bool closing;         /* conn_close ran: the handle is closing */
	bool linger;          /* reads nothing more; closes once its queue is written */
	bool wait_budget;     /* a frame's length is in, no room in partial_bytes_max yet */
	bool wait_pending;    /* not read: max_pending channels are held, all connections together */
	unsigned char hs[SP_HELLO]; /* SP: the peer's handshake */
	uint8_t nhs;
	unsigned char pre[PRE_MAX];
	size_t npre;
	uint64_t plen;        /* SP: the message's length (backtrace + body) */
	unsigned char bt[SP_BT_MAX]; /* SP: the frame's backtrace */
	uint8_t nbt;
	bool bt_done;
	uint64_t skip;        /* SP: bytes of a cut frame still to be read past */
	uint64_t flen;        /* the frame's body length, once its prefix (and backtrace) are in */
	nng_msg *body;        /* the frame being received */
	size_t have;
	bool fds;             /* descriptors came that cannot be given to one frame (more than one, or
			       * truncated): the frame being received is refused */
	/* A descriptor received and not yet given to a frame (shm.register sends one with the
	 * sendmsg that carries its whole frame; the kernel ends a read after the bytes that came
	 * with descriptors, so it belongs to the frame holding the last byte of its read): rx_fd,
	 * and rx_own: 0 the frame that completes with the read's last byte, 1 the frame in progress. */
	int rx_fd;
	int rx_own;
	size_t feed_left;     /* bytes of the current read not yet fed, while frame_done runs */
	uint64_t frame_at;    /* ns: its reading started (0: no frame begun) */
	size_t reserved;      /* its share of partial_bytes_max */
	unsigned char *stash; /* bytes read past a frame's length while it waits for budget */
	size_t nstash;
	uconn *prev, *next;   /* t's open connections */
	uconn *bnext;         /* t's budget waiters */
	uconn *pnext;         /* t's max_pending waiters */
	/* under mu */
	pthread_mutex_t mu;
	bool closed;          /* the fd is no longer written */
	bool want_close;      /* a write failed, or a close_after reply went: the loop closes it */
	bool on_wake;         /* on t's wake list (it holds a reference) */
	ureq *qhead, *qtail;
	size_t unsent;        /* bytes queued */
	int held;             /* requests not answered plus replies not written */
	ureq *live;
	int refs;             /* 1 while the loop has it open, + channels alive, + on_wake */
	uconn *wnext;
	uconn *aprev, *anext; /* t's every connection (under t->mu) */
};

typedef struct ulisten {
	uv_poll_t poll;
	struct dmn_stream *t;
	int fd;
	dmn_stream_kind kind;
	bool polling;
	char path[DMN_IPC_PATH_MAX + 1]; /* AF_UNIX: the socket file (released at the stop) */
	char url[DMN_IPC_PATH_MAX + 16];
} ulisten;

struct dmn_stream {
	dmn_logger *log;
	dmn_inbox *ib;
	uv_loop_t *loop;
	/* copied at start (a reload does not change them) */
	uint64_t max_msg, max_hdr, partial_max, unsent_max;
	uint64_t reply_timeout_ns, frame_timeout_ns;
	int peer_cap;
	int max_pending;
	int nlisten;
	ulisten listen[2 * DMN_CFG_LIST_MAX];
	uv_async_t wake;      /* writers that need the loop */
	uv_timer_t tick;      /* timeouts */
	uv_timer_t grant;     /* budget given to waiters, outside the callback that freed it */
	bool handles, closed;
	uint32_t next_id;
	uconn *open;          /* loop: open connections */
	int64_t nopen[DMN_ST_KINDS];
	uint64_t partial;     /* loop: bytes reserved by frames being received */
	uint64_t partial_k[DMN_ST_KINDS];
	uconn *bhead, *btail; /* loop: waiting for budget, oldest first */
	uconn *phead;         /* loop: waiting for max_pending to have room */
	unsigned char stage[STAGE_BYTES];
	pthread_mutex_t mu;   /* wake list, every connection */
	uconn *wake_head;
	uconn *all;
	atomic_int sending;
	atomic_int pending;       /* counted channels alive: requests not answered, replies not written */
	atomic_bool pending_wait; /* connections wait for pending to drop: wake the loop when it does */
	/* per kind */
	atomic_llong refused_cap[DMN_ST_KINDS], reply_timeouts[DMN_ST_KINDS], frame_timeouts[DMN_ST_KINDS],
		frames_refused[DMN_ST_KINDS], budget_waits[DMN_ST_KINDS], pending_waits[DMN_ST_KINDS];
};

static const char *const kind_names[DMN_ST_KINDS] = {"unix", "ipc", "tcp"};

const char *dmn_stream_kind_name(dmn_stream_kind k)
{
	return k < DMN_ST_KINDS ? kind_names[k] : "?";
}

/* The length prefix of a frame of kind k: its bytes. */
static size_t prefix_len(dmn_stream_kind k)
{
	return k == DMN_ST_UNIX ? 4 : k == DMN_ST_IPC ? 9 : 8;
}

/* Write the length prefix of a frame of len bytes for kind k into out; its bytes. */
static size_t prefix_make(dmn_stream_kind k, uint64_t len, unsigned char *out)
{
	if (k == DMN_ST_UNIX) {
		for (int i = 0; i < 4; i++)
			out[i] = (unsigned char)(len >> (8 * i));
		return 4;
	}
	size_t o = 0;
	if (k == DMN_ST_IPC)
		out[o++] = 1; /* nng's ipc: message type 1 */
	for (int i = 0; i < 8; i++)
		out[o + (size_t)i] = (unsigned char)(len >> (8 * (7 - i)));
	return o + 8;
}

static void unix_send(dmn_chan *c, nng_msg *reply);
static void unix_recv(dmn_chan *c);
static bool unix_peer(const dmn_chan *c, uint64_t *uid, uint64_t *gid);
static void unix_hangup(dmn_chan *c);
static void unix_close_after(dmn_chan *c);

static const dmn_chan_ops unix_ops = {
	.name = "unix",
	.send = unix_send,
	.recv = unix_recv,
	.peer = unix_peer,
	.hangup = unix_hangup,
	.close_after = unix_close_after,
};

/* ---- references and channels (c->mu) ---- */

/* With c->mu held: one reference fewer; true when c is to be freed (after unlocking). */
static bool unref_locked(uconn *c)
{
	return --c->refs == 0;
}

static void conn_free(uconn *c)
{
	dmn_stream *t = c->t;
	pthread_mutex_lock(&t->mu);
	if (c->aprev)
		c->aprev->anext = c->anext;
	else
		t->all = c->anext;
	if (c->anext)
		c->anext->aprev = c->aprev;
	pthread_mutex_unlock(&t->mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void unlock_maybe_free(uconn *c, bool last)
{
	pthread_mutex_unlock(&c->mu);
	if (last)
		conn_free(c);
}

/* With c->mu held: q leaves c (its `held` given back); true when c is then to be freed. */
static bool chan_release_locked(uconn *c, ureq *q)
{
	dmn_stream *t = c->t;
	if (q->counted && c->held > 0)
		c->held--;
	if (q->counted && atomic_fetch_sub(&t->pending, 1) <= t->max_pending && atomic_load(&t->pending_wait) &&
	    atomic_exchange(&t->pending_wait, false))
		uv_async_send(&t->wake); /* room again: the loop reads the connections that waited */
	if (q->lprev)
		q->lprev->lnext = q->lnext;
	else
		c->live = q->lnext;
	if (q->lnext)
		q->lnext->lprev = q->lprev;
	if (q->out)
		nng_msg_free(q->out);
	free(q);
	return unref_locked(c);
}

/* A new channel on c carrying msg (taken); NULL when out of memory (msg freed). Loop. */
static ureq *chan_new(uconn *c, nng_msg *msg, bool counted)
{
	ureq *q = calloc(1, sizeof(*q));
	if (!q) {
		nng_msg_free(msg);
		return NULL;
	}
	q->chan.ops = &unix_ops;
	q->chan.msg = msg;
	q->chan.conn = c->id;
	q->chan.fd = -1;
	q->c = c;
	q->counted = counted;
	if (c->sp && c->bt_done) {
		memcpy(q->bt, c->bt, c->nbt);
		q->nbt = c->nbt;
	}
	if (counted)
		atomic_fetch_add(&c->t->pending, 1);
	pthread_mutex_lock(&c->mu);
	q->chan.held = counted ? ++c->held : 0;
	q->lnext = c->live;
	if (c->live)
		c->live->lprev = q;
	c->live = q;
	c->refs++;
	pthread_mutex_unlock(&c->mu);
	return q;
}

/* With c->mu held: ask the loop to look at c (its queue or its closing). */
static void wake_locked(uconn *c)
{
	dmn_stream *t = c->t;
	if (c->on_wake)
		return;
	c->on_wake = true;
	c->refs++;
	pthread_mutex_lock(&t->mu);
	c->wnext = t->wake_head;
	t->wake_head = c;
	pthread_mutex_unlock(&t->mu);
	uv_async_send(&t->wake);
}

/* ---- writing (any thread, under c->mu) ---- */

/* Write what fits of q's frame; 1 done, 0 not all of it (EAGAIN), -1 the connection failed. */
static int write_some(uconn *c, ureq *q)
{
	size_t len = nng_msg_len(q->out), np = q->npre;
	size_t total = np + len;
	while (q->off < total) {
		struct iovec iov[2];
		int n = 0;
		if (q->off < np)
			iov[n++] = (struct iovec){q->pre + q->off, np - q->off};
		size_t boff = q->off < np ? 0 : q->off - np;
		iov[n++] = (struct iovec){(unsigned char *)nng_msg_body(q->out) + boff, len - boff};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		}
		q->off += (size_t)w;
		if (c->unsent >= (size_t)w)
			c->unsent -= (size_t)w;
	}
	return 1;
}

/* Write the queue's head replies while they go; -1 when the connection failed. */
static int flush_locked(uconn *c)
{
	while (c->qhead) {
		ureq *q = c->qhead;
		int rv = write_some(c, q);
		if (rv <= 0)
			return rv;
		c->qhead = q->next;
		if (!c->qhead)
			c->qtail = NULL;
		atomic_fetch_sub(&c->t->sending, 1);
		if (q->close_after)
			c->want_close = true;
		if (chan_release_locked(c, q))
			return 1; /* not reached: the loop's reference holds while the fd is open */
	}
	return 1;
}

static void unix_send(dmn_chan *ch, nng_msg *reply)
{
	ureq *q = (ureq *)ch;
	uconn *c = q->c;
	pthread_mutex_lock(&c->mu);
	if (c->closed) { /* closed meanwhile: the answer goes nowhere */
		nng_msg_free(reply);
		unlock_maybe_free(c, chan_release_locked(c, q));
		return;
	}
	q->out = reply;
	q->off = 0;
	q->queued_at = eng_now_ns();
	size_t np = prefix_make(c->kind, nng_msg_len(reply) + q->nbt, q->pre);
	memcpy(q->pre + np, q->bt, q->nbt);
	q->npre = (uint8_t)(np + q->nbt);
	c->unsent += q->npre + nng_msg_len(reply);
	int rv = 0;
	if (!c->qhead) {
		/* the fast path: nothing before it, written from this thread, nobody woken */
		rv = write_some(c, q);
		if (rv == 1) {
			if (q->close_after) {
				c->want_close = true;
				wake_locked(c);
			}
			unlock_maybe_free(c, chan_release_locked(c, q));
			return;
		}
		if (rv < 0) {
			c->unsent = 0;
			c->want_close = true;
			wake_locked(c);
			unlock_maybe_free(c, chan_release_locked(c, q));
			return;
		}
	}
	/* the rest waits its turn: the loop writes it when the socket takes more */
	q->next = NULL;
	if (c->qtail)
		c->qtail->next = q;
	else
		c->qhead = q;
	c->qtail = q;
	atomic_fetch_add(&c->t->sending, 1);
	wake_locked(c);
	pthread_mutex_unlock(&c->mu);
}

static void unix_recv(dmn_chan *ch)
{
	ureq *q = (ureq *)ch;
	uconn *c = q->c;
	pthread_mutex_lock(&c->mu);
	unlock_maybe_free(c, chan_release_locked(c, q));
}

static bool unix_peer(const dmn_chan *ch, uint64_t *uid, uint64_t *gid)
{
	const uconn *c = ((const ureq *)ch)->c;
	*uid = c->uid;
	*gid = c->gid;
	return c->kind != DMN_ST_TCP; /* tcp carries no credentials (its token is checked instead) */
}

/* ---- the loop's side of a connection ---- */

static void conn_close(uconn *c);
static void feed(uconn *c, const unsigned char *p, size_t n);
static void on_conn(uv_poll_t *h, int status, int events);
static void on_grant(uv_timer_t *h);

static void post_closed(dmn_stream *t, uint32_t id)
{
	dmn_closed *e = calloc(1, sizeof(*e));
	if (!e)
		return; /* its requests are then answered into the void: harmless */
	e->ops = &unix_ops;
	e->conn = id;
	dmn_inbox_post(t->ib, DMN_LANE_CLOSED, &e->in);
}

/* Poll c for what it needs now: reading unless it waits (budget, linger, too much unsent),
 * writing while replies are queued. */
static void update_poll(uconn *c)
{
	if (c->closing)
		return;
	pthread_mutex_lock(&c->mu);
	bool queued = c->qhead != NULL, full = c->unsent > c->t->unsent_max;
	pthread_mutex_unlock(&c->mu);
	int ev = (!c->linger && !c->wait_budget && !c->wait_pending && !full ? UV_READABLE : 0) |
		 (queued ? UV_WRITABLE : 0);
	if (ev == c->events)
		return;
	c->events = ev;
	if (ev)
		uv_poll_start(&c->poll, ev, on_conn);
	else
		uv_poll_stop(&c->poll);
}

static void budget_release(uconn *c)
{
	dmn_stream *t = c->t;
	if (!c->reserved)
		return;
	t->partial -= c->reserved;
	t->partial_k[c->kind] -= c->reserved;
	c->reserved = 0;
	if (t->bhead && !t->closed)
		uv_timer_start(&t->grant, on_grant, 0, 0);
}

static void on_conn_closed(uv_handle_t *h)
{
	uconn *c = h->data;
	close(c->fd);
	if (c->rx_fd >= 0)
		close(c->rx_fd);
	c->rx_fd = -1;
	pthread_mutex_lock(&c->mu);
	c->fd = -1;
	unlock_maybe_free(c, unref_locked(c));
}

/* Loop: close c now. Replies still queued are dropped; channels still held by the daemon are
 * freed when it answers or gives them up. */
static void conn_close(uconn *c)
{
	dmn_stream *t = c->t;
	if (c->closing)
		return;
	c->closing = true;
	if (c->prev)
		c->prev->next = c->next;
	else
		t->open = c->next;
	if (c->next)
		c->next->prev = c->prev;
	t->nopen[c->kind]--;
	if (c->wait_budget) {
		uconn **p = &t->bhead, *last = NULL;
		while (*p && *p != c) {
			last = *p;
			p = &(*p)->bnext;
		}
		if (*p)
			*p = c->bnext;
		if (t->btail == c)
			t->btail = last;
		c->wait_budget = false;
	}
	if (c->wait_pending) {
		uconn **p = &t->phead;
		while (*p && *p != c)
			p = &(*p)->pnext;
		if (*p)
			*p = c->pnext;
		c->wait_pending = false;
	}
	budget_release(c);
	if (c->body)
		nng_msg_free(c->body);
	c->body = NULL;
	free(c->stash);
	c->stash = NULL;
	pthread_mutex_lock(&c->mu);
	c->closed = true;
	for (ureq *q = c->qhead, *n; q; q = n) {
		n = q->next;
		atomic_fetch_sub(&t->sending, 1);
		chan_release_locked(c, q); /* the loop's reference holds c */
	}
	c->qhead = c->qtail = NULL;
	c->unsent = 0;
	pthread_mutex_unlock(&c->mu);
	shutdown(c->fd, SHUT_RDWR);
	uv_close((uv_handle_t *)&c->poll, on_conn_closed);
	post_closed(t, c->id);
}

/* A frame refused by the transport: answered with st and msg (id null), then closed. On SP
 * before its backtrace is in, an answer could not be addressed: closed at once. */
static void refuse(uconn *c, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(uconn *c, tsd_status st, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&c->t->frames_refused[c->kind], 1);
	dmn_log(c->t->log, DMN_LOG_WARN, "closing %s connection %u (%s): %s", kind_names[c->kind], c->id, c->peer, msg);
	if (c->sp && !c->bt_done) {
		conn_close(c);
		return;
	}
	c->linger = true;
	nng_msg *m = dmn_reply_msg(NULL, st, msg, NULL, NULL, 0, 0);
	ureq *q = m ? chan_new(c, m, false) : NULL;
	if (!q) {
		conn_close(c);
		return;
	}
	q->chan.msg = NULL;
	q->close_after = true;
	unix_send(&q->chan, m);
	update_poll(c);
}

/* Answer a frame that came with file descriptors (closed already): bad_request, its id when
 * its header decodes; the connection stays (the stream is whole). */
static void refuse_fds(uconn *c, nng_msg *body)
{
	dmn_stream *t = c->t;
	proto_msg *pm = calloc(1, sizeof(*pm));
	proto_err e;
	bool ok = pm && proto_decode_hdr(nng_msg_body(body), nng_msg_len(body), (size_t)t->max_msg, (size_t)t->max_hdr,
					 PROTO_REQUEST, pm, &e) == TSD_OK;
	atomic_fetch_add(&t->frames_refused[c->kind], 1);
	nng_msg *m = dmn_reply_msg(ok ? pm : NULL, TSD_BAD_REQUEST, "file descriptors are not accepted on this verb",
				   NULL, NULL, 0, 0);
	if (ok)
		proto_msg_free(pm);
	free(pm);
	nng_msg_free(body);
	ureq *q = m ? chan_new(c, m, false) : NULL;
	if (!q)
		return;
	q->chan.msg = NULL;
	unix_send(&q->chan, m);
}

/* max_pending channels held, all connections together: c waits (more wait in the socket, as
 * nng's slots make them); true then. */
static bool pending_full(uconn *c)
{
	dmn_stream *t = c->t;
	if (c->wait_pending)
		return true;
	if (atomic_load(&t->pending) < t->max_pending)
		return false;
	c->wait_pending = true;
	atomic_fetch_add(&t->pending_waits[c->kind], 1);
	c->pnext = t->phead;
	t->phead = c;
	atomic_store(&t->pending_wait, true);
	return true;
}

static void frame_done(uconn *c)
{
	nng_msg *body = c->body;
	bool fds = c->fds;
	c->body = NULL;
	c->npre = 0;
	c->have = 0;
	c->fds = false;
	c->frame_at = 0;
	budget_release(c);
	int fd = -1;
	if (c->rx_fd >= 0 && (c->rx_own == 1 || c->feed_left == 0)) {
		fd = c->rx_fd;
		c->rx_fd = -1;
	}
	if (fds) {
		if (fd >= 0)
			close(fd);
		refuse_fds(c, body);
		c->nbt = 0;
		c->bt_done = false;
		return;
	}
	ureq *q = chan_new(c, body, true);
	c->nbt = 0; /* the backtrace went with its channel */
	c->bt_done = false;
	if (q) {
		q->chan.fd = fd;
		dmn_inbox_post(c->t->ib, DMN_LANE_ARRIVED, &q->chan.in);
	} else if (fd >= 0) {
		close(fd);
	}
	pending_full(c); /* the next frame waits when max_pending is reached */
}

/* The frame's body allocated (its budget held): false when out of memory (c closed). */
static bool frame_begin(uconn *c)
{
	if (nng_msg_alloc(&c->body, c->flen)) {
		c->body = NULL;
		dmn_log(c->t->log, DMN_LOG_ERROR, "%s connection %u: out of memory for a %llu-byte frame", kind_names[c->kind],
			c->id, (unsigned long long)c->flen);
		conn_close(c);
		return false;
	}
	c->have = 0;
	return true;
}

/* Whether c's frame of flen bytes may be received now: room in partial_bytes_max, or nothing
 * else being received (a frame larger than the whole budget still goes, alone). */
static bool budget_take(uconn *c)
{
	dmn_stream *t = c->t;
	if (t->partial && t->partial + c->flen > t->partial_max)
		return false;
	t->partial += c->flen;
	t->partial_k[c->kind] += c->flen;
	c->reserved = c->flen;
	return true;
}

/* Keep the n bytes read past where c must wait (fed when it resumes); closes c when out of
 * memory. */
static void stash_rest(uconn *c, const unsigned char *p, size_t n)
{
	if (!n)
		return;
	if (!(c->stash = malloc(n))) {
		conn_close(c);
		return;
	}
	memcpy(c->stash, p, n);
	c->nstash = n;
}

/* Feed the bytes c stashed while it waited. */
static void feed_stash(uconn *c)
{
	unsigned char *st = c->stash;
	size_t nst = c->nstash;
	c->stash = NULL;
	c->nstash = 0;
	if (st)
		feed(c, st, nst);
	free(st);
}

/* The frame's body length, read: refused (and false) when it cannot hold one TSD1 message or
 * is over max_message_bytes. SP messages are delimited: a short one goes to the decoder (it
 * answers bad_request), and so does one up to SP_SLACK over (too_large, as nng's receive limit
 * let through). */
static bool flen_ok(uconn *c)
{
	if (c->sp) {
		if (c->flen <= c->t->max_msg + SP_SLACK)
			return true;
		refuse(c, TSD_TOO_LARGE, "SP message of %llu bytes: over max_message_bytes (%llu)",
		       (unsigned long long)c->plen, (unsigned long long)c->t->max_msg);
		return false;
	}
	if (c->flen < PROTO_PREFIX) {
		refuse(c, TSD_BAD_REQUEST, "frame length %llu: a frame holds one TSD1 message, at least %d bytes",
		       (unsigned long long)c->flen, PROTO_PREFIX);
		return false;
	}
	if (c->flen > c->t->max_msg) {
		refuse(c, TSD_TOO_LARGE, "frame length %llu: over max_message_bytes (%llu)", (unsigned long long)c->flen,
		       (unsigned long long)c->t->max_msg);
		return false;
	}
	return true;
}

static size_t take(unsigned char *dst, size_t want, const unsigned char **p, size_t *n)
{
	size_t k = want < *n ? want : *n;
	memcpy(dst, *p, k);
	*p += k;
	*n -= k;
	return k;
}

/* SP: the peer's handshake, as it comes; false when c was closed (not a REQ peer). */
static bool hello_feed(uconn *c, const unsigned char **p, size_t *n)
{
	c->nhs += (uint8_t)take(c->hs + c->nhs, SP_HELLO - c->nhs, p, n);
	if (c->nhs < SP_HELLO)
		return true;
	const unsigned char *h = c->hs;
	if (h[0] || h[1] != 'S' || h[2] != 'P' || h[3] || h[6] || h[7] || h[4] || h[5] != SP_REQ0) {
		atomic_fetch_add(&c->t->frames_refused[c->kind], 1);
		dmn_log(c->t->log, DMN_LOG_WARN, "closing %s connection %u (%s): not an SP REQ peer (handshake %02x %02x %02x "
			"%02x, protocol 0x%02x%02x; nng's req0 is 0x0030)", kind_names[c->kind], c->id, c->peer, h[0], h[1],
			h[2], h[3], h[4], h[5]);
		conn_close(c);
		return false;
	}
	c->frame_at = 0; /* the handshake's time was under frame_timeout_ms too */
	return true;
}

/* The frame's head as it comes: the length prefix, and on SP the backtrace; 1 when complete
 * (flen set and checked), 0 when more is needed, -1 when refused (c closing or lingering). */
static int head_feed(uconn *c, const unsigned char **p, size_t *n)
{
	dmn_stream *t = c->t;
	size_t want = prefix_len(c->kind);
	if (c->npre < want) {
		c->npre += take(c->pre + c->npre, want - c->npre, p, n);
		if (c->npre < want)
			return 0;
		if (!c->sp) {
			c->flen = (uint64_t)c->pre[0] | (uint64_t)c->pre[1] << 8 | (uint64_t)c->pre[2] << 16 |
				  (uint64_t)c->pre[3] << 24;
			return flen_ok(c) ? 1 : -1;
		}
		if (c->kind == DMN_ST_IPC && c->pre[0] != 1) {
			refuse(c, TSD_BAD_REQUEST, "SP message type %u (nng's ipc sends 1)", c->pre[0]);
			return -1;
		}
		c->plen = 0;
		for (size_t i = want - 8; i < want; i++)
			c->plen = c->plen << 8 | c->pre[i];
		if (c->plen < 4) {
			refuse(c, TSD_BAD_REQUEST, "SP message of %llu bytes: it holds no request id",
			       (unsigned long long)c->plen);
			return -1;
		}
		if (c->plen > t->max_msg + SP_SLACK + SP_BT_MAX) {
			refuse(c, TSD_TOO_LARGE, "SP message of %llu bytes: over max_message_bytes (%llu)",
			       (unsigned long long)c->plen, (unsigned long long)t->max_msg);
			return -1;
		}
	}
	while (!c->bt_done) {
		if (!*n)
			return 0;
		c->nbt += (uint8_t)take(c->bt + c->nbt, 4 - c->nbt % 4, p, n);
		if (c->nbt % 4)
			return 0;
		if (c->bt[c->nbt - 4] & 0x80)
			c->bt_done = true;
		else if (c->nbt == SP_BT_MAX || c->nbt >= c->plen) {
			refuse(c, TSD_BAD_REQUEST, "SP message: no request id ends its backtrace within %d hops",
			       c->nbt / 4);
			return -1;
		}
	}
	c->flen = c->plen - c->nbt;
	return flen_ok(c) ? 1 : -1;
}

/* SP: a header over max_header_bytes. The message is delimited, so the connection stays: only
 * its 8-byte prefix is posted (the loop answers a refused peer unauthorised, anyone else
 * too_large, from it) and the rest of the frame is skipped as it comes, under frame_timeout_ms. */
static void header_cut(uconn *c)
{
	nng_msg *small;
	if (nng_msg_alloc(&small, PROTO_PREFIX)) {
		conn_close(c);
		return;
	}
	memcpy(nng_msg_body(small), nng_msg_body(c->body), PROTO_PREFIX);
	uint64_t rest = c->flen - c->have;
	nng_msg_free(c->body);
	c->body = small;
	c->flen = c->have = PROTO_PREFIX;
	c->feed_left = 1; /* a descriptor with this read is not this frame's */
	frame_done(c);
	c->skip = rest;
	if (rest)
		c->frame_at = eng_now_ns();
}

/* Feed n bytes read from c into its frame state machine. Stops early when c closes, lingers
 * (a refused frame: the rest is dropped) or waits for budget or max_pending (the rest is
 * stashed). */
static void feed(uconn *c, const unsigned char *p, size_t n)
{
	dmn_stream *t = c->t;
	while (n > 0 && !c->closing && !c->linger) {
		if (c->sp && c->nhs < SP_HELLO) {
			if (!hello_feed(c, &p, &n))
				return;
			continue;
		}
		if (c->skip) { /* the rest of a cut frame */
			size_t k = c->skip < n ? (size_t)c->skip : n;
			p += k;
			n -= k;
			if (!(c->skip -= k))
				c->frame_at = 0;
			continue;
		}
		if (c->wait_pending) {
			stash_rest(c, p, n);
			return;
		}
		if (!c->body) {
			if (!c->frame_at)
				c->frame_at = eng_now_ns();
			if (head_feed(c, &p, &n) <= 0)
				return;
			if (!budget_take(c)) {
				atomic_fetch_add(&t->budget_waits[c->kind], 1);
				c->wait_budget = true;
				c->frame_at = 0; /* its timeout starts when its reading does */
				c->bnext = NULL;
				if (t->btail)
					t->btail->bnext = c;
				else
					t->bhead = c;
				t->btail = c;
				stash_rest(c, p, n);
				update_poll(c);
				return;
			}
			if (!frame_begin(c))
				return;
		}
		size_t before = c->have;
		c->have += take((unsigned char *)nng_msg_body(c->body) + c->have, c->flen - c->have, &p, &n);
		if (before < PROTO_PREFIX && c->have >= PROTO_PREFIX) {
			const unsigned char *b = nng_msg_body(c->body);
			uint32_t jl = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
			bool magic = !memcmp(b, PROTO_MAGIC, 4);
			if (!magic && !c->sp) {
				refuse(c, TSD_BAD_REQUEST, "frame of %llu bytes: not a TSD1 message (bad magic)",
				       (unsigned long long)c->flen);
				return;
			}
			/* SP: a bad magic goes to the decoder (the message is delimited: it answers) */
			if (magic && jl > t->max_hdr && c->sp) {
				header_cut(c);
				continue;
			}
			if (magic && jl > t->max_hdr) {
				refuse(c, TSD_TOO_LARGE, "header: %u bytes of JSON, at most %llu (max_header_bytes)", jl,
				       (unsigned long long)t->max_hdr);
				return;
			}
		}
		if (c->have == c->flen) {
			c->feed_left = n;
			frame_done(c);
		}
	}
}

/* The descriptors that came with a read: one is kept for its frame (rx_fd), unless one is
 * already waiting; any other is closed, and then true (the frame is refused). */
static bool take_fds(uconn *c, struct msghdr *mh)
{
	bool bad = (mh->msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + (size_t)i * sizeof(int), sizeof(int));
			if (c->rx_fd < 0 && nfd == 1 && !bad) {
				c->rx_fd = fd;
				c->rx_own = 0;
			} else {
				close(fd);
				bad = true;
			}
		}
	}
	return bad;
}

/* After a read was fed: a descriptor still waiting belongs to the frame in progress; with none
 * (that frame was refused) it is closed. Bytes stashed for later are the read's own rest. */
static void settle_fd(uconn *c)
{
	if (c->rx_fd < 0 || c->rx_own == 1 || c->nstash)
		return;
	if (c->body || c->npre) {
		c->rx_own = 1;
		return;
	}
	close(c->rx_fd);
	c->rx_fd = -1;
}

static void on_readable(uconn *c)
{
	dmn_stream *t = c->t;
	for (int i = 0; i < READS_PER_WAKE && !c->closing && !c->linger && !c->wait_budget && !c->wait_pending; i++) {
		pthread_mutex_lock(&c->mu);
		bool full = c->unsent > t->unsent_max;
		pthread_mutex_unlock(&c->mu);
		if (full)
			break;
		if (pending_full(c))
			break;
		/* a body far from done is read in place; everything else through the stage */
		bool direct = c->body && c->have >= PROTO_PREFIX && c->flen - c->have >= STAGE_BYTES;
		struct iovec iov = direct ? (struct iovec){(unsigned char *)nng_msg_body(c->body) + c->have,
							   c->flen - c->have}
					  : (struct iovec){t->stage, STAGE_BYTES};
		union {
			char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
			struct cmsghdr align;
		} cm;
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
				    .msg_controllen = sizeof(cm.buf)};
		ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(c);
			break;
		}
		if (take_fds(c, &mh))
			c->fds = true; /* the frame in progress, or the one this read begins */
		if (n == 0) { /* the peer hung up (a half frame with it is dropped) */
			conn_close(c);
			break;
		}
		if (!direct) {
			feed(c, t->stage, (size_t)n);
			settle_fd(c);
			continue;
		}
		if (!c->frame_at)
			c->frame_at = eng_now_ns();
		c->have += (size_t)n;
		c->feed_left = 0;
		if (c->have == c->flen)
			frame_done(c);
		settle_fd(c);
	}
	update_poll(c);
}

static void on_writable(uconn *c)
{
	pthread_mutex_lock(&c->mu);
	int rv = flush_locked(c);
	bool close_now = rv < 0 || (c->want_close && !c->qhead);
	pthread_mutex_unlock(&c->mu);
	if (close_now) {
		conn_close(c);
		return;
	}
	update_poll(c);
}

static void on_conn(uv_poll_t *h, int status, int events)
{
	uconn *c = h->data;
	if (status < 0) {
		conn_close(c);
		return;
	}
	if (events & UV_WRITABLE)
		on_writable(c);
	if (!c->closing && (events & (UV_READABLE | UV_DISCONNECT)))
		on_readable(c);
}

/* Room under max_pending (or a tick, in case a wake-up raced): the waiters are read again. */
static void resume_pending(dmn_stream *t)
{
	if (!t->phead || atomic_load(&t->pending) >= t->max_pending)
		return;
	uconn *list = t->phead;
	t->phead = NULL;
	for (uconn *c = list, *n; c; c = n) {
		n = c->pnext;
		c->wait_pending = false;
		if (c->frame_at)
			c->frame_at = eng_now_ns(); /* its time waiting was ours, not the client's */
		feed_stash(c); /* may wait again */
		update_poll(c);
	}
}

/* Writers that need the loop: their queues polled for writing, failed ones closed; and the
 * connections that waited for max_pending. */
static void on_wake(uv_async_t *h)
{
	dmn_stream *t = h->data;
	resume_pending(t);
	pthread_mutex_lock(&t->mu);
	uconn *list = t->wake_head;
	t->wake_head = NULL;
	pthread_mutex_unlock(&t->mu);
	for (uconn *c = list, *n; c; c = n) {
		n = c->wnext;
		pthread_mutex_lock(&c->mu);
		c->on_wake = false;
		bool close_now = c->want_close && !c->qhead;
		pthread_mutex_unlock(&c->mu);
		if (close_now)
			conn_close(c);
		else
			update_poll(c);
		pthread_mutex_lock(&c->mu);
		unlock_maybe_free(c, unref_locked(c));
	}
}

/* Budget freed: the waiters, oldest first, begin their frames while it has room. */
static void on_grant(uv_timer_t *h)
{
	dmn_stream *t = h->data;
	while (t->bhead) {
		uconn *c = t->bhead;
		if (!budget_take(c))
			break;
		t->bhead = c->bnext;
		if (!t->bhead)
			t->btail = NULL;
		c->wait_budget = false;
		c->frame_at = eng_now_ns();
		if (!frame_begin(c))
			continue;
		feed_stash(c);
		update_poll(c);
	}
}

/* Timeouts: a frame begun and not complete within frame_timeout_ms, a reply not written within
 * reply_timeout_ms: that connection closes. */
static void on_tick(uv_timer_t *h)
{
	dmn_stream *t = h->data;
	uint64_t now = eng_now_ns();
	resume_pending(t);
	for (uconn *c = t->open, *n; c; c = n) {
		n = c->next;
		if (c->frame_at && !c->wait_budget && !c->wait_pending && !c->linger &&
		    now - c->frame_at > t->frame_timeout_ns) {
			atomic_fetch_add(&t->frame_timeouts[c->kind], 1);
			dmn_log(t->log, DMN_LOG_WARN,
				"closing %s connection %u (%s): a %s begun %llu ms ago is not complete (frame_timeout_ms)",
				kind_names[c->kind], c->id, c->peer, c->sp && c->nhs < SP_HELLO ? "handshake" : "frame",
				(unsigned long long)((now - c->frame_at) / 1000000u));
			conn_close(c);
			continue;
		}
		pthread_mutex_lock(&c->mu);
		bool late = c->qhead && now - c->qhead->queued_at > t->reply_timeout_ns;
		pthread_mutex_unlock(&c->mu);
		if (late) {
			atomic_fetch_add(&t->reply_timeouts[c->kind], 1);
			dmn_log(t->log, DMN_LOG_WARN,
				"closing %s connection %u (%s): a reply not taken within %llu ms (reply_timeout_ms)",
				kind_names[c->kind], c->id, c->peer, (unsigned long long)(t->reply_timeout_ns / 1000000u));
			conn_close(c);
		}
	}
}

static void unix_hangup(dmn_chan *ch)
{
	conn_close(((ureq *)ch)->c);
}

static void unix_close_after(dmn_chan *ch)
{
	ureq *q = (ureq *)ch;
	if (q->c->sp)
		return; /* SP messages are delimited: what follows can be read as before (as nng's REP did) */
	q->close_after = true;
	if (!q->c->closing) {
		q->c->linger = true;
		update_poll(q->c);
	}
}

/* ---- listening ---- */

/* Who is at the other end of fd, into c: uid and gid on AF_UNIX, the address on tcp; false
 * when it cannot be told. */
static bool peer_of(uconn *c, int fd)
{
	if (c->kind != DMN_ST_TCP) {
		struct ucred cr;
		socklen_t crl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl))
			return false;
		c->uid = cr.uid;
		c->gid = cr.gid;
		snprintf(c->peer, sizeof(c->peer), "uid %u", (unsigned)cr.uid);
		return true;
	}
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char host[INET6_ADDRSTRLEN] = "?";
	if (getpeername(fd, (struct sockaddr *)&sa, &sl))
		return false;
	if (sa.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof(host));
	else if (sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof(host));
	snprintf(c->peer, sizeof(c->peer), "%s", host);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return true;
}

/* c's peer has peer_connections_max open (its uid on unix:// and ipc:// together, its address on
 * tcp://): counted, logged now and then, true. */
static bool over_peer_cap(dmn_stream *t, const uconn *c)
{
	int n = 0;
	for (uconn *o = t->open; t->peer_cap && o && n < t->peer_cap; o = o->next)
		n += (o->kind == DMN_ST_TCP) == (c->kind == DMN_ST_TCP) && !strcmp(o->peer, c->peer);
	if (!t->peer_cap || n < t->peer_cap)
		return false;
	long long total = atomic_fetch_add(&t->refused_cap[c->kind], 1) + 1;
	if (total == 1 || total % 1000 == 0)
		dmn_log(t->log, DMN_LOG_WARN,
			"closing a %s connection from %s: it has %d open (peer_connections_max); %lld refused so far",
			kind_names[c->kind], c->peer, n, total);
	return true;
}

static void accept_one(dmn_stream *t, int fd, dmn_stream_kind kind)
{
	uconn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->kind = kind;
	c->sp = kind != DMN_ST_UNIX;
	if (!peer_of(c, fd) || over_peer_cap(t, c)) {
		free(c);
		close(fd);
		return;
	}
	/* SP: our handshake first (the socket is empty: 8 bytes fit), the peer's under frame_timeout_ms */
	static const unsigned char hello[SP_HELLO] = {0, 'S', 'P', 0, 0, SP_REP0, 0, 0};
	if ((c->sp && send(fd, hello, SP_HELLO, MSG_NOSIGNAL | MSG_DONTWAIT) != SP_HELLO) ||
	    uv_poll_init(t->loop, &c->poll, fd)) {
		free(c);
		close(fd);
		return;
	}
	if (c->sp)
		c->frame_at = eng_now_ns();
	c->t = t;
	c->fd = fd;
	c->rx_fd = -1;
	c->id = ++t->next_id ? t->next_id : ++t->next_id;
	c->refs = 1;
	c->poll.data = c;
	pthread_mutex_init(&c->mu, NULL);
	c->next = t->open;
	if (t->open)
		t->open->prev = c;
	t->open = c;
	t->nopen[kind]++;
	pthread_mutex_lock(&t->mu);
	c->anext = t->all;
	if (t->all)
		t->all->aprev = c;
	t->all = c;
	pthread_mutex_unlock(&t->mu);
	update_poll(c);
}

static void on_accept(uv_poll_t *h, int status, int events)
{
	(void)events;
	ulisten *l = h->data;
	if (status < 0)
		return;
	for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				dmn_log(l->t->log, DMN_LOG_WARN, "accept on %s: %s", l->url, strerror(errno));
			return;
		}
		accept_one(l->t, fd, l->kind);
	}
}

/* l's socket made (l->fd): poll it for connections. */
static int listen_poll(dmn_stream *t, ulisten *l, char *err, size_t errlen)
{
	int rv = uv_poll_init(t->loop, &l->poll, l->fd);
	if (rv) {
		snprintf(err, errlen, "listen %s: libuv: %s", l->url, uv_strerror(rv));
		return -1;
	}
	l->polling = true;
	l->poll.data = l;
	uv_poll_start(&l->poll, UV_READABLE, on_accept);
	dmn_log(t->log, DMN_LOG_INFO, "listening on %s", l->url);
	return 0;
}

/* unix:// or ipc://: a socket file (its directory made, one daemon, stale files), mode 0660. */
static int listen_unix(dmn_stream *t, ulisten *l, const char *path, char *err, size_t errlen)
{
	snprintf(l->path, sizeof(l->path), "%s", path);
	if (dmn_sock_make_dirs(path)) {
		snprintf(err, errlen, "listen %s: cannot create its directory: %s", l->url, strerror(errno));
		return -1;
	}
	if (dmn_sock_claim(path, t->log, err, errlen))
		return -1;
	t->nlisten++; /* claimed: its file is removed at the stop */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(path, 0660) || listen(l->fd, SOMAXCONN)) {
		snprintf(err, errlen, "listen %s: %s", l->url, strerror(errno));
		return -1;
	}
	return listen_poll(t, l, err, errlen);
}

/* tcp://HOST:PORT (the config checked its form and the loopback rule): the first address HOST
 * resolves to that binds. */
static int listen_tcp(dmn_stream *t, ulisten *l, char *err, size_t errlen)
{
	t->nlisten++;
	if ((l->fd = dmn_tcp_listen(l->url, NULL, err, errlen)) < 0)
		return -1;
	return listen_poll(t, l, err, errlen);
}

static int listen_on(dmn_stream *t, const char *url, char *err, size_t errlen)
{
	ulisten *l = &t->listen[t->nlisten];
	l->t = t;
	l->fd = -1;
	snprintf(l->url, sizeof(l->url), "%s", url);
	if (!strncmp(url, "tcp://", 6)) {
		l->kind = DMN_ST_TCP;
		return listen_tcp(t, l, err, errlen);
	}
	l->kind = !strncmp(url, "unix://", 7) ? DMN_ST_UNIX : DMN_ST_IPC;
	return listen_unix(t, l, strstr(url, "://") + 3, err, errlen);
}

dmn_stream *dmn_stream_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop,
			 uint64_t partial_max, char *err, size_t errlen)
{
	if (!cfg->listen.n && !cfg->tcp_listen.n)
		return NULL;
	dmn_stream *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->log = log;
	t->ib = ib;
	t->loop = loop;
	t->max_msg = cfg->max_message_bytes;
	t->max_hdr = cfg->max_header_bytes;
	t->partial_max = partial_max;
	t->unsent_max = cfg->unsent_bytes_max;
	t->reply_timeout_ns = (uint64_t)cfg->reply_timeout_ms * 1000000u;
	t->frame_timeout_ns = (uint64_t)cfg->frame_timeout_ms * 1000000u;
	t->peer_cap = (int)cfg->peer_connections_max;
	t->max_pending = (int)cfg->max_pending;
	pthread_mutex_init(&t->mu, NULL);
	atomic_init(&t->sending, 0);
	atomic_init(&t->pending, 0);
	atomic_init(&t->pending_wait, false);
	for (int k = 0; k < DMN_ST_KINDS; k++) {
		atomic_init(&t->refused_cap[k], 0);
		atomic_init(&t->reply_timeouts[k], 0);
		atomic_init(&t->frame_timeouts[k], 0);
		atomic_init(&t->frames_refused[k], 0);
		atomic_init(&t->budget_waits[k], 0);
		atomic_init(&t->pending_waits[k], 0);
	}
	int rv;
	if ((rv = uv_async_init(loop, &t->wake, on_wake)) || (rv = uv_timer_init(loop, &t->tick)) ||
	    (rv = uv_timer_init(loop, &t->grant))) {
		/* a handle initialised is closed by dmn_stream_close: all three or none here */
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		pthread_mutex_destroy(&t->mu);
		free(t);
		return NULL;
	}
	t->handles = true;
	t->wake.data = t->tick.data = t->grant.data = t;
	/* a quarter of the shorter timeout, within 10 ms .. 500 ms */
	uint64_t tick = (t->frame_timeout_ns < t->reply_timeout_ns ? t->frame_timeout_ns : t->reply_timeout_ns) / 4000000u;
	tick = tick < 10 ? 10 : tick > 500 ? 500 : tick;
	uv_timer_start(&t->tick, on_tick, tick, tick);
	for (int i = 0; i < cfg->listen.n; i++)
		if (listen_on(t, cfg->listen.v[i], err, errlen)) {
			dmn_stream_close(t);
			return NULL;
		}
	for (int i = 0; i < cfg->tcp_listen.n; i++)
		if (listen_on(t, cfg->tcp_listen.v[i], err, errlen)) {
			dmn_stream_close(t);
			return NULL;
		}
	return t;
}

void dmn_stream_close(dmn_stream *t)
{
	if (!t || t->closed)
		return;
	t->closed = true;
	/* listeners first: nothing new while the connections close */
	for (int i = 0; i < t->nlisten; i++) {
		ulisten *l = &t->listen[i];
		if (l->polling)
			uv_close((uv_handle_t *)&l->poll, NULL);
		l->polling = false;
		if (l->fd >= 0)
			close(l->fd); /* after uv_close: libuv no longer watches it */
		l->fd = -1;
	}
	while (t->open)
		conn_close(t->open);
	if (t->handles) {
		uv_close((uv_handle_t *)&t->wake, NULL);
		uv_close((uv_handle_t *)&t->tick, NULL);
		uv_close((uv_handle_t *)&t->grant, NULL);
	}
}

void dmn_stream_stop(dmn_stream *t)
{
	if (!t)
		return;
	/* every connection is closed (its fd too: the loop ran the closes); what is left are the
	 * channels of requests never answered */
	while (t->all) {
		uconn *c = t->all;
		t->all = c->anext;
		for (ureq *q = c->live, *n; q; q = n) {
			n = q->lnext;
			if (q->chan.msg)
				nng_msg_free(q->chan.msg);
			if (q->out)
				nng_msg_free(q->out);
			free(q);
		}
		if (c->fd >= 0)
			close(c->fd);
		pthread_mutex_destroy(&c->mu);
		free(c);
	}
	for (int i = 0; i < t->nlisten; i++)
		if (t->listen[i].path[0])
			dmn_sock_release(t->listen[i].path);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

int dmn_stream_sending(const dmn_stream *t)
{
	return t ? atomic_load(&((dmn_stream *)t)->sending) : 0;
}

void dmn_stream_get_stats(dmn_stream *t, dmn_stream_kind k, dmn_stream_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!t || k >= DMN_ST_KINDS)
		return;
	st->open = t->nopen[k];
	st->refused_cap = atomic_load(&t->refused_cap[k]);
	st->reply_timeouts = atomic_load(&t->reply_timeouts[k]);
	st->frame_timeouts = atomic_load(&t->frame_timeouts[k]);
	st->frames_refused = atomic_load(&t->frames_refused[k]);
	st->budget_waits = atomic_load(&t->budget_waits[k]);
	st->pending_waits = atomic_load(&t->pending_waits[k]);
	st->partial_bytes = (int64_t)t->partial_k[k];
}
