/* client_impl.h: what the client library's files share: the client and call objects, the reply
 * and its decoding (reply.c), the per-thread error (error.c). Not installed. */
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

struct tsd_reply {
	nng_msg *msg; /* owned: the received bytes the views point into */
	proto_msg m;  /* the decoded header, owned; its tensors are the reply's */
};

struct tsd_client {
	nng_socket sock;
	nng_dialer dialer;
	int timeout_ms;
	_Atomic int64_t next_id; /* the id of the next request that has none */
	char *url;
	proto_token *token;      /* tcp:// only: sent as "token" in every request (token.c); NULL: none */
	pthread_mutex_t mu;      /* guards what follows */
	pthread_cond_t cv;       /* a pipe came (tsd_client_open's connect wait) */
	int npipes;              /* connections now open (0 or 1: one dialer) */
	uint64_t connects;       /* connections made so far */
	tsd_call *dead;          /* calls freed inside their callback, freed at the next submit */
	int dying;               /* calls freed inside their callback, not yet in dead */
};

/* A call's life: SEND (the request waits for a connection or is being written), RECV (sent,
 * waiting for the reply), DONE (status, reply and message final). */
typedef enum tsd_call_state { TSD_CALL_SEND, TSD_CALL_RECV, TSD_CALL_DONE } tsd_call_state;

struct tsd_call {
	tsd_client *c;
	nng_ctx ctx;
	nng_aio *aio;
	bool id_str;
	char id[PROTO_MAX_ID + 1];
	int64_t deadline_ms;  /* nng_clock() value; 0: none */
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
	tsd_call *next;       /* in c->dead */
};

/* Decode msg as a reply (taking it in every case: kept by the reply, or freed). Returns the
 * reply in *out, or NULL with err filled (TSD_BAD_REQUEST, TSD_TOO_LARGE, TSD_OUT_OF_MEMORY). */
TSD_HIDDEN tsd_status tsd_client_decode_reply(nng_msg *msg, tsd_reply **out, proto_err *err);
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
/* tsd_call_run with a file descriptor sent beside the request (SCM_RIGHTS; shm.register): unix://
 * only, TSD_BAD_REQUEST on other transports. fd is not taken. */
TSD_HIDDEN tsd_status tsd_call_run_fd(tsd_client *c, const cJSON *header, int fd, tsd_reply **out);
/* Free the calls freed inside their callbacks (c->dead); all: first wait for those whose
 * callbacks are still returning (tsd_client_close). */
TSD_HIDDEN void tsd_client_reap(tsd_client *c, bool all);
/* Close c's socket and free c (client.c); no call of it may be left. tsd_client_close (call.c)
 * is the reap of its calls, then this. */
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
