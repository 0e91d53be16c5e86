/* transport_unix.c: the unix:// transport: AF_UNIX stream sockets on the daemon's libuv loop,
 * each message a frame (u32 little-endian length + one TSD1 message; docs/PROTOCOL.md "unix://
 * framing"). The loop accepts (SO_PEERCRED kept per connection, peer_connections_max per uid),
 * reads with recvmsg into a frame state machine (length, TSD1 prefix against max_header_bytes,
 * body into an nng_msg used as a plain buffer) under frame_timeout_ms and a total budget for
 * half-received frames (partial_bytes_max), and posts each frame as a channel of its own.
 * Replies are written by the thread that made them while nothing is queued on the connection
 * (under its mutex, non-blocking); the rest is queued and the loop woken to finish it. */
#include "transport.h"
#include "sockfile.h"
#include "util.h"

#include <errno.h>
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
#define FRAME_PREFIX 4

typedef struct uconn uconn;

/* One frame's channel: the request, then its reply until written. */
typedef struct ureq {
	dmn_chan chan;        /* first: the loop's view */
	uconn *c;
	struct ureq *next;    /* the connection's queue of replies being written (under c->mu) */
	struct ureq *lprev, *lnext; /* the connection's channels alive (under c->mu) */
	nng_msg *out;         /* the reply queued */
	size_t off;           /* bytes of prefix + body written */
	uint64_t queued_at;   /* ns */
	bool close_after;     /* the connection closes once this reply is written */
	bool counted;         /* holds one of the connection's `held` */
} ureq;

struct uconn {
	dmn_unix *t;
	int fd;
	uint32_t id;
	uint64_t uid, gid;
	uv_poll_t poll;
	/* loop only */
	int events;           /* polled for now */
	bool closing;         /* conn_close ran: the handle is closing */
	bool linger;          /* reads nothing more; closes once its queue is written */
	bool wait_budget;     /* a frame's length is in, no room in partial_bytes_max yet */
	bool wait_pending;    /* not read: max_pending channels are held, all connections together */
	unsigned char pre[FRAME_PREFIX];
	size_t npre;
	uint32_t flen;        /* the frame's length, once npre == 4 */
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
	struct dmn_unix *t;
	int fd;
	bool polling;
	char path[DMN_IPC_PATH_MAX + 1];
} ulisten;

struct dmn_unix {
	dmn_logger *log;
	dmn_inbox *ib;
	uv_loop_t *loop;
	/* copied at start (a reload does not change them) */
	uint64_t max_msg, max_hdr, partial_max, unsent_max;
	uint64_t reply_timeout_ns, frame_timeout_ns;
	int peer_cap;
	int max_pending;
	int nlisten;
	ulisten listen[DMN_CFG_LIST_MAX];
	uv_async_t wake;      /* writers that need the loop */
	uv_timer_t tick;      /* timeouts */
	uv_timer_t grant;     /* budget given to waiters, outside the callback that freed it */
	bool handles, closed;
	uint32_t next_id;
	uconn *open;          /* loop: open connections */
	int64_t nopen;
	uint64_t partial;     /* loop: bytes reserved by frames being received */
	uconn *bhead, *btail; /* loop: waiting for budget, oldest first */
	uconn *phead;         /* loop: waiting for max_pending to have room */
	unsigned char stage[STAGE_BYTES];
	pthread_mutex_t mu;   /* wake list, every connection */
	uconn *wake_head;
	uconn *all;
	atomic_int sending;
	atomic_int pending;       /* counted channels alive: requests not answered, replies not written */
	atomic_bool pending_wait; /* connections wait for pending to drop: wake the loop when it does */
	atomic_llong refused_cap, reply_timeouts, frame_timeouts, frames_refused, budget_waits, pending_waits;
};

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
	dmn_unix *t = c->t;
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
	dmn_unix *t = c->t;
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
	dmn_unix *t = c->t;
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
	size_t len = nng_msg_len(q->out);
	uint32_t l32 = (uint32_t)len;
	unsigned char pre[FRAME_PREFIX] = {(unsigned char)l32, (unsigned char)(l32 >> 8), (unsigned char)(l32 >> 16),
					   (unsigned char)(l32 >> 24)};
	size_t total = FRAME_PREFIX + len;
	while (q->off < total) {
		struct iovec iov[2];
		int n = 0;
		if (q->off < FRAME_PREFIX)
			iov[n++] = (struct iovec){pre + q->off, FRAME_PREFIX - q->off};
		size_t boff = q->off < FRAME_PREFIX ? 0 : q->off - FRAME_PREFIX;
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
	c->unsent += FRAME_PREFIX + nng_msg_len(reply);
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
	return true;
}

/* ---- the loop's side of a connection ---- */

static void conn_close(uconn *c);
static void feed(uconn *c, const unsigned char *p, size_t n);
static void on_conn(uv_poll_t *h, int status, int events);
static void on_grant(uv_timer_t *h);

static void post_closed(dmn_unix *t, uint32_t id)
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
	dmn_unix *t = c->t;
	if (!c->reserved)
		return;
	t->partial -= c->reserved;
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
	dmn_unix *t = c->t;
	if (c->closing)
		return;
	c->closing = true;
	if (c->prev)
		c->prev->next = c->next;
	else
		t->open = c->next;
	if (c->next)
		c->next->prev = c->prev;
	t->nopen--;
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

/* A frame refused by the transport: answered with st and msg (id null), then closed. */
static void refuse(uconn *c, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(uconn *c, tsd_status st, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&c->t->frames_refused, 1);
	dmn_log(c->t->log, DMN_LOG_WARN, "closing unix connection %u (uid %llu): %s", c->id,
		(unsigned long long)c->uid, msg);
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
	dmn_unix *t = c->t;
	proto_msg *pm = calloc(1, sizeof(*pm));
	proto_err e;
	bool ok = pm && proto_decode_hdr(nng_msg_body(body), nng_msg_len(body), (size_t)t->max_msg, (size_t)t->max_hdr,
					 PROTO_REQUEST, pm, &e) == TSD_OK;
	atomic_fetch_add(&t->frames_refused, 1);
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
	dmn_unix *t = c->t;
	if (c->wait_pending)
		return true;
	if (atomic_load(&t->pending) < t->max_pending)
		return false;
	c->wait_pending = true;
	atomic_fetch_add(&t->pending_waits, 1);
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
		return;
	}
	ureq *q = chan_new(c, body, true);
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
		dmn_log(c->t->log, DMN_LOG_ERROR, "unix connection %u: out of memory for a %u-byte frame", c->id, c->flen);
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
	dmn_unix *t = c->t;
	if (t->partial && t->partial + c->flen > t->partial_max)
		return false;
	t->partial += c->flen;
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

/* Feed n bytes read from c into its frame state machine. Stops early when c closes, lingers
 * (a refused frame: the rest is dropped) or waits for budget or max_pending (the rest is
 * stashed). */
static void feed(uconn *c, const unsigned char *p, size_t n)
{
	dmn_unix *t = c->t;
	while (n > 0 && !c->closing && !c->linger) {
		if (c->wait_pending) {
			stash_rest(c, p, n);
			return;
		}
		if (!c->body) {
			if (!c->frame_at)
				c->frame_at = eng_now_ns();
			size_t k = FRAME_PREFIX - c->npre < n ? FRAME_PREFIX - c->npre : n;
			memcpy(c->pre + c->npre, p, k);
			c->npre += k;
			p += k;
			n -= k;
			if (c->npre < FRAME_PREFIX)
				return;
			c->flen = (uint32_t)c->pre[0] | (uint32_t)c->pre[1] << 8 | (uint32_t)c->pre[2] << 16 |
				  (uint32_t)c->pre[3] << 24;
			if (c->flen < PROTO_PREFIX) {
				refuse(c, TSD_BAD_REQUEST,
				       "frame length %u: a frame holds one TSD1 message, at least %d bytes", c->flen,
				       PROTO_PREFIX);
				return;
			}
			if (c->flen > t->max_msg) {
				refuse(c, TSD_TOO_LARGE, "frame length %u: over max_message_bytes (%llu)", c->flen,
				       (unsigned long long)t->max_msg);
				return;
			}
			if (!budget_take(c)) {
				atomic_fetch_add(&t->budget_waits, 1);
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
		size_t k = c->flen - c->have < n ? c->flen - c->have : n;
		size_t before = c->have;
		memcpy((unsigned char *)nng_msg_body(c->body) + c->have, p, k);
		c->have += k;
		p += k;
		n -= k;
		if (before < PROTO_PREFIX && c->have >= PROTO_PREFIX) {
			const unsigned char *b = nng_msg_body(c->body);
			uint32_t jl = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
			if (memcmp(b, PROTO_MAGIC, 4)) {
				refuse(c, TSD_BAD_REQUEST, "frame of %u bytes: not a TSD1 message (bad magic)", c->flen);
				return;
			}
			if (jl > t->max_hdr) {
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
	dmn_unix *t = c->t;
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
static void resume_pending(dmn_unix *t)
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
	dmn_unix *t = h->data;
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
	dmn_unix *t = h->data;
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
	dmn_unix *t = h->data;
	uint64_t now = eng_now_ns();
	resume_pending(t);
	for (uconn *c = t->open, *n; c; c = n) {
		n = c->next;
		if (c->frame_at && !c->wait_budget && !c->wait_pending && !c->linger &&
		    now - c->frame_at > t->frame_timeout_ns) {
			atomic_fetch_add(&t->frame_timeouts, 1);
			dmn_log(t->log, DMN_LOG_WARN,
				"closing unix connection %u (uid %llu): a frame begun %llu ms ago is not complete "
				"(frame_timeout_ms)",
				c->id, (unsigned long long)c->uid, (unsigned long long)((now - c->frame_at) / 1000000u));
			conn_close(c);
			continue;
		}
		pthread_mutex_lock(&c->mu);
		bool late = c->qhead && now - c->qhead->queued_at > t->reply_timeout_ns;
		pthread_mutex_unlock(&c->mu);
		if (late) {
			atomic_fetch_add(&t->reply_timeouts, 1);
			dmn_log(t->log, DMN_LOG_WARN,
				"closing unix connection %u (uid %llu): a reply not taken within %llu ms (reply_timeout_ms)",
				c->id, (unsigned long long)c->uid, (unsigned long long)(t->reply_timeout_ns / 1000000u));
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
	q->close_after = true;
	if (!q->c->closing) {
		q->c->linger = true;
		update_poll(q->c);
	}
}

/* ---- listening ---- */

static void accept_one(dmn_unix *t, int fd)
{
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl)) {
		close(fd);
		return;
	}
	int n = 0;
	for (uconn *o = t->open; t->peer_cap && o && n < t->peer_cap; o = o->next)
		n += o->uid == (uint64_t)cr.uid;
	if (t->peer_cap && n >= t->peer_cap) {
		long long total = atomic_fetch_add(&t->refused_cap, 1) + 1;
		if (total == 1 || total % 1000 == 0)
			dmn_log(t->log, DMN_LOG_WARN,
				"closing a unix connection from uid %u: it has %d open (peer_connections_max); %lld refused "
				"so far",
				(unsigned)cr.uid, n, total);
		close(fd);
		return;
	}
	uconn *c = calloc(1, sizeof(*c));
	if (!c || uv_poll_init(t->loop, &c->poll, fd)) {
		free(c);
		close(fd);
		return;
	}
	c->t = t;
	c->fd = fd;
	c->rx_fd = -1;
	c->id = ++t->next_id ? t->next_id : ++t->next_id;
	c->uid = cr.uid;
	c->gid = cr.gid;
	c->refs = 1;
	c->poll.data = c;
	pthread_mutex_init(&c->mu, NULL);
	c->next = t->open;
	if (t->open)
		t->open->prev = c;
	t->open = c;
	t->nopen++;
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
				dmn_log(l->t->log, DMN_LOG_WARN, "accept on %s: %s", l->path, strerror(errno));
			return;
		}
		accept_one(l->t, fd);
	}
}

static int listen_on(dmn_unix *t, const char *url, char *err, size_t errlen)
{
	const char *path = url + strlen("unix://");
	ulisten *l = &t->listen[t->nlisten];
	l->t = t;
	l->fd = -1;
	snprintf(l->path, sizeof(l->path), "%s", path);
	if (dmn_sock_make_dirs(path)) {
		snprintf(err, errlen, "listen %s: cannot create its directory: %s", url, strerror(errno));
		return -1;
	}
	if (dmn_sock_claim(path, t->log, err, errlen)) /* its directory, one daemon, stale files */
		return -1;
	t->nlisten++; /* claimed: its file is removed at the stop */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(path, 0660) || listen(l->fd, SOMAXCONN)) {
		snprintf(err, errlen, "listen %s: %s", url, strerror(errno));
		return -1;
	}
	int rv = uv_poll_init(t->loop, &l->poll, l->fd);
	if (rv) {
		snprintf(err, errlen, "listen %s: libuv: %s", url, uv_strerror(rv));
		return -1;
	}
	l->polling = true;
	l->poll.data = l;
	uv_poll_start(&l->poll, UV_READABLE, on_accept);
	dmn_log(t->log, DMN_LOG_INFO, "listening on %s", url);
	return 0;
}

dmn_unix *dmn_unix_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop,
			 uint64_t partial_max, char *err, size_t errlen)
{
	int n = 0;
	for (int i = 0; i < cfg->listen.n; i++)
		n += !strncmp(cfg->listen.v[i], "unix://", 7);
	if (!n)
		return NULL;
	dmn_unix *t = calloc(1, sizeof(*t));
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
	atomic_init(&t->refused_cap, 0);
	atomic_init(&t->reply_timeouts, 0);
	atomic_init(&t->frame_timeouts, 0);
	atomic_init(&t->frames_refused, 0);
	atomic_init(&t->budget_waits, 0);
	atomic_init(&t->pending_waits, 0);
	int rv;
	if ((rv = uv_async_init(loop, &t->wake, on_wake)) || (rv = uv_timer_init(loop, &t->tick)) ||
	    (rv = uv_timer_init(loop, &t->grant))) {
		/* a handle initialised is closed by dmn_unix_close: all three or none here */
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
		if (!strncmp(cfg->listen.v[i], "unix://", 7) && listen_on(t, cfg->listen.v[i], err, errlen)) {
			dmn_unix_close(t);
			return NULL;
		}
	return t;
}

void dmn_unix_close(dmn_unix *t)
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

void dmn_unix_stop(dmn_unix *t)
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
		dmn_sock_release(t->listen[i].path);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

int dmn_unix_sending(const dmn_unix *t)
{
	return t ? atomic_load(&((dmn_unix *)t)->sending) : 0;
}

void dmn_unix_get_stats(dmn_unix *t, dmn_unix_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!t)
		return;
	st->open = t->nopen;
	st->refused_cap = atomic_load(&t->refused_cap);
	st->reply_timeouts = atomic_load(&t->reply_timeouts);
	st->frame_timeouts = atomic_load(&t->frame_timeouts);
	st->frames_refused = atomic_load(&t->frames_refused);
	st->budget_waits = atomic_load(&t->budget_waits);
	st->pending_waits = atomic_load(&t->pending_waits);
	st->partial_bytes = (int64_t)t->partial;
}
