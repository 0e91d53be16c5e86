/* client_impl.h: what the client library's files share: the client and call objects, the
 * transport table (nng: call_nng.c; unix://: call_unix.c, unix_read.c), the reply and its
 * decoding (reply.c), the per-thread error (error.c). Not installed. */
#ifndef TSD_CLIENT_IMPL_H
#define TSD_CLIENT_IMPL_H

#include <pthread.h>
#include <time.h>
#include <stdatomic.h>

#include <nng/nng.h>

#include <tensord/client.h>

#include "message.h"
#include "token.h"

/* Functions shared between the library's files only: kept out of libtensord.so's exports
 * (which are the tsd_* names, clients/libtensord.map). */
#ifndef TSD_HIDDEN
#define TSD_HIDDEN __attribute__((visibility("hidden")))
#endif

typedef struct tsd_unix tsd_unix; /* unix://'s connection state (unix_impl.h) */

/* A transport: how calls reach the daemon. Filled with designated initialisers; every member
 * is required but prepare. Locks: c->mu is never held when these are called. */
typedef struct tsd_transport_ops {
	const char *name;
	/* Optional: read what the transport needs of a new call's header (the failover transport:
	 * whether it may be retried, its sequence) before start; not TSD_OK refuses the call. */
	tsd_status (*prepare)(tsd_call *k, const cJSON *header);
	/* Connect c (url parsed by the transport), connect_ms as tsd_client_open_wait's. 0, or -1
	 * with err filled. */
	int (*open)(tsd_client *c, int connect_ms, char *err, size_t errlen);
	/* Complete every call in flight (cancelled), bounded in time, and release the transport.
	 * False: the transport could not be closed within its bound and c must be left allocated
	 * (its threads may still use it). */
	bool (*close)(tsd_client *c);
	bool (*connected)(tsd_client *c, uint64_t *connects);
	/* The transport's part of a new call (sync: run on the caller's thread); 0 or -1. */
	int (*call_init)(tsd_call *k, bool sync);
	void (*call_destroy)(tsd_call *k);
	/* Send k's request msg (taken) and return; completion by tsd_call_finish. */
	void (*start)(tsd_call *k, nng_msg *msg);
	/* A sync call started: run it to completion on the calling thread. */
	void (*run)(tsd_call *k);
	/* Complete k with TSD_CANCELLED if it is still in flight. */
	void (*cancel)(tsd_call *k);
} tsd_transport_ops;

TSD_HIDDEN extern const tsd_transport_ops tsd_nng_ops;
TSD_HIDDEN extern const tsd_transport_ops tsd_unix_ops;
TSD_HIDDEN extern const tsd_transport_ops tsd_failover_ops;

typedef struct tsd_fo tsd_fo;           /* the failover transport's endpoints (failover.c) */
/* Whether a client of url needs the failover transport: a list ("a,b,c"), a tcp:// name that
 * resolves to several addresses, or $TENSORD_CLIENT_RETRIES > 0. */
TSD_HIDDEN bool tsd_failover_wanted(const char *url);
/* tsd_client_open_wait on one address, never through the failover transport (its endpoints). */
TSD_HIDDEN tsd_client *tsd_client_open_endpoint(const char *url, int timeout_ms, int connect_ms, char *err,
						size_t errlen);
/* A unix:// client without a connection dials now if its redial is due (it has no dialer of
 * its own: its calls dial); nothing for other transports. */
TSD_HIDDEN void tsd_unix_poke(tsd_client *c);
typedef struct tsd_fo_call tsd_fo_call; /* a call's attempts there */

struct tsd_reply {
	nng_msg *msg; /* owned: the received bytes the views point into */
	proto_msg m;  /* the decoded header, owned; its tensors are the reply's */
};

struct tsd_client {
	const tsd_transport_ops *ops;
	size_t max_reply;        /* replies over this are TSD_TOO_LARGE (TSD_CLIENT_MAX_REPLY) */
	int spin_us;             /* unix://: a waiting call polls this long before it sleeps
				  * ($TENSORD_CLIENT_SPIN_US, 0..10000; 0: never) */
	tsd_unix *ux;            /* unix:// only */
	tsd_fo *fo;              /* failover only: the endpoints, each a client of its own */
	nng_socket sock;
	nng_dialer dialer;
	int timeout_ms;
	_Atomic int64_t next_id; /* the id of the next request that has none */
	char *url;
	proto_token *token;      /* tcp:// only: sent as "token" in every request (token.c); NULL: none */
	pthread_mutex_t mu;      /* guards what follows */
	pthread_cond_t cv;       /* a pipe came (tsd_client_open's connect wait) */
	int npipes;              /* connections now open (0 or 1: one dialer) */
	nng_pipe pipe;           /* the last one opened */
	uint64_t connects;       /* connections made so far */
	tsd_call *dead;          /* calls freed inside their callback, freed at the next submit */
	int dying;               /* calls freed inside their callback, not yet in dead */
	atomic_bool closing;     /* tsd_client_close has begun */
	bool sock_open;          /* nng: sock was opened */
	tsd_call *live;          /* calls started and not yet completed (c->mu; tsd_call_link) */
	tsd_call *live_tail;
	int finishing;           /* nng: calls unlinked whose completion is still running */
	tsd_call *all;           /* nng: every call not yet freed (their contexts: the close
				  * closes them before the socket) */
};

/* A call's life: SEND (the request waits for a connection or is being written), RECV (sent,
 * waiting for the reply), DONE (status, reply and message final). */
typedef enum tsd_call_state { TSD_CALL_SEND, TSD_CALL_RECV, TSD_CALL_DONE } tsd_call_state;

struct tsd_call {
	tsd_client *c;        /* may be freed before k (a call freed after its client's close) */
	const tsd_transport_ops *ops; /* c's, kept for the free */
	nng_ctx ctx;
	nng_aio *aio;
	bool id_str;
	char id[PROTO_MAX_ID + 1];
	int64_t deadline_ms;  /* nng_clock() value; 0: none */
	int64_t send_by_ms;   /* not sent by then (tsd_now_ms()): TSD_TIMEOUT, unsent; 0: deadline_ms only */
	tsd_call_cb cb;
	void *arg;
	pthread_mutex_t mu;   /* guards what follows */
	pthread_cond_t cv;    /* state became DONE */
	tsd_call_state state;
	atomic_bool done;     /* state == DONE, for tsd_call_done without the lock */
	bool in_cb;           /* the callback is running on cb_thread */
	pthread_t cb_thread;
	bool free_after_cb;   /* tsd_call_free was called inside the callback */
	tsd_status status;
	tsd_reply *reply;     /* owned until taken */
	char err[512];        /* the message when no reply came */
	tsd_call *next;       /* in c->dead; unix: in a list of calls to complete */
	/* under c->mu: the live list (tsd_call_link), unix's state of the call */
	tsd_call *lprev, *lnext;
	bool linked;          /* in c->live: nobody has claimed its completion yet */
	bool async;           /* submitted (not a synchronous call) */
	int ustate;           /* unix: UX_QUEUED (not written), UX_SENT (on connection ugen) */
	uint64_t ugen;        /* unix: the connection it was written on */
	uint64_t serial;      /* unix: unique per client, to find a call that may be gone */
	tsd_status ustatus;   /* unix: the status it completes with once claimed */
	nng_msg *req;         /* unix: the request until a writer takes it */
	int sfd;              /* unix: a descriptor sent with the request (owned; taken by the writer with
			       * req), or -1 */
	bool sent;            /* the request was written (nng: the send completed; unix: on the socket) */
	int attempts;         /* sends tried: 1, or more when the failover transport retried it */
	tsd_fo_call *foc;     /* failover only: its attempts */
	tsd_call *aprev, *anext; /* nng: in c->all (c->mu) */
	bool in_all;          /* nng: in c->all; false once the close closed its context */
};

/* Decode msg as a reply (at most max bytes). Returns the reply in *out (which then owns msg), or
 * NULL with err filled (TSD_BAD_REQUEST, TSD_TOO_LARGE, TSD_OUT_OF_MEMORY) and msg still the
 * caller's. */
TSD_HIDDEN tsd_status tsd_client_decode_reply(nng_msg *msg, size_t max, tsd_reply **out,
					      proto_err *err);
/* The id of an encoded message's JSON header (msg: at least its prefix and JSON), as the
 * string the call keeps (id[PROTO_MAX_ID + 1]) and whether it is a string; false when there
 * is none readable. */
TSD_HIDDEN bool tsd_client_peek_id(const void *buf, size_t len, char *id, bool *is_str);
/* cJSON_Parse under the lock that serialises the library's parsing (cJSON's error position is
 * process-wide); NULL when text is not JSON. */
TSD_HIDDEN cJSON *tsd_client_parse(const char *text);

/* The calling thread's last error (error.c): set for client c (s returned), or cleared. */
TSD_HIDDEN tsd_status tsd_client_fail(const tsd_client *c, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
TSD_HIDDEN void tsd_client_clear_error(const tsd_client *c);
/* token.c: for a tcp:// url, c->token from $TENSORD_TOKEN_FILE or $TENSORD_TOKEN (none when
 * neither is set); a status and err filled when it cannot be read or is refused. */
TSD_HIDDEN tsd_status tsd_client_token_load(tsd_client *c, char *err, size_t errlen);
TSD_HIDDEN void tsd_client_token_free(tsd_client *c); /* overwritten, freed */
/* header plus c's token as "token" when c has one and header has none: *copy is the header to
 * send (made from header when NULL; the caller deletes it). */
TSD_HIDDEN tsd_status tsd_client_token_add(tsd_client *c, const cJSON *header, cJSON **copy);
/* tsd_client_submit run to completion on the calling thread (the synchronous calls): the call
 * in *out is done when TSD_OK is returned. */
TSD_HIDDEN tsd_status tsd_call_run(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
				   tsd_call **out);
/* Put k in c->live (c->mu held); take it out (c->mu held): false when it was not there, so
 * exactly one thread claims a call's completion. */
TSD_HIDDEN void tsd_call_link_locked(tsd_call *k);
TSD_HIDDEN bool tsd_call_unlink_locked(tsd_call *k);
/* Complete k (claimed: unlinked by the caller): status, reply or message, then wake the
 * waiters and run the callback (on the calling thread). */
TSD_HIDDEN void tsd_call_finish(tsd_call *k, tsd_status s, tsd_reply *r);
/* The same with the message when no reply came. */
TSD_HIDDEN void tsd_call_failf(tsd_call *k, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The monotonic clock in milliseconds, and in nanoseconds. */
TSD_HIDDEN int64_t tsd_now_ms(void);
TSD_HIDDEN uint64_t tsd_now_ns(void);
/* Test hook: replies over max bytes are TSD_TOO_LARGE (not exported from libtensord.so). */
TSD_HIDDEN void tsd_client_set_max_reply(tsd_client *c, size_t max);
/* tsd_call_run with a file descriptor sent beside the request (SCM_RIGHTS; shm.register): unix://
 * only, TSD_BAD_REQUEST on other transports. fd is not taken. */
TSD_HIDDEN tsd_status tsd_call_run_fd(tsd_client *c, const cJSON *header, int fd, tsd_reply **out);
/* A call on c carrying an already encoded request (the failover transport's attempts): id as
 * the reply must echo it, deadline_ms a tsd_now_ms() value (0: none), send_by_ms when it must
 * have been sent (0: no such bound), cb called on completion (asynchronous calls).
 * NULL when out of memory. tsd_call_launch sends msg (taken) on it. */
TSD_HIDDEN tsd_call *tsd_call_prepare_msg(tsd_client *c, const char *id, bool id_str, int64_t deadline_ms,
					  int64_t send_by_ms, bool sync, tsd_call_cb cb, void *arg);
/* sync: run to completion on the calling thread when launched (cb unused), as a synchronous
 * call is. */
TSD_HIDDEN void tsd_call_launch(tsd_call *k, nng_msg *msg);
/* Free the calls freed inside their callbacks (c->dead); all: first wait for those whose
 * callbacks are still returning (tsd_client_close). */
TSD_HIDDEN void tsd_client_reap(tsd_client *c, bool all);
/* Free c (client.c) after its transport is closed; no call of it may be left. */
TSD_HIDDEN void tsd_client_free(tsd_client *c);

/* The CLOCK_REALTIME time ms (>= 0) milliseconds from now, for pthread_cond_timedwait. */
static inline void tsd_deadline(int ms, struct timespec *until)
{
	clock_gettime(CLOCK_REALTIME, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

#endif
