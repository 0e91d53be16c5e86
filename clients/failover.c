/* failover.c: the failover transport: a client over several endpoints (replicas of tensord, or
 * one balancer), each a client of its own (nng or unix://). A call goes to one endpoint, round
 * robin over those connected; when its attempt is lost with the connection, refused by a
 * draining daemon (shutting_down) or a starting one (unavailable: its model still loads), or
 * timed out before it was sent, an idempotent call (infer
 * without a sequence, realize, health, hello, stats, model.list, repo.index, sysshm.status) is
 * sent again to another endpoint, after a backoff, within its deadline, its retry limit and the
 * client's retry budget. Every other verb is sent once: model.load, model.save, train.step and
 * the rest change a replica's state, and re-sending one the daemon may have run could run it
 * twice. A sequence's steps go to the replica its start went to, never elsewhere: when that
 * replica's connection was lost since, the step fails with sequence_ended naming it. The
 * error after the last attempt names every endpoint tried and what each did. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "client_impl.h"

#define FO_MAX_ENDPOINTS 32
#define FO_URL_MAX 560
#define FO_SEQ_SLOTS 4096          /* sequences remembered (their replica); more: the oldest slot is reused */
#define FO_UNSENT_MS 1000          /* an attempt that may be retried waits this long, at most, to be sent */
#define FO_TOKENS_MAX 10.0         /* the retry budget: retries spend a token, each success earns a tenth */
#define FO_TOKEN_RATIO 0.1

typedef struct fo_ep {
	char *url;
	tsd_client *sub;
	int64_t avoid_until_ms; /* failed lately on connection avoid_gen: others first until then */
	uint64_t avoid_gen;
	bool refused;           /* answered shutting_down on its connection number refused_gen */
	uint64_t refused_gen;
} fo_ep;

typedef struct fo_seq {
	char key[PROTO_MAX_ID + 140]; /* model and sequence id; "" when free */
	int ep;
	uint64_t gen;                 /* the endpoint's connection count when the sequence started */
} fo_seq;

struct tsd_fo {
	int n;
	fo_ep ep[FO_MAX_ENDPOINTS];
	int retries;    /* per call, after the first attempt */
	int backoff_ms; /* before retry r: backoff_ms * 2^(r-1), at most 1 s, jittered down to half */
	pthread_mutex_t mu; /* guards what follows and the endpoints' avoid/refused fields */
	unsigned next;
	double tokens;
	unsigned rng;
	fo_seq *seq;    /* FO_SEQ_SLOTS, allocated on the first sequence step */
	uint64_t retried; /* retries made, for tsd_client_retries */
};

struct tsd_fo_call {
	pthread_mutex_t mu;
	nng_msg *msg;      /* the request, kept while a retry may need it */
	tsd_call *sub;     /* the current attempt (kept until the call is freed) */
	tsd_call *old[12]; /* earlier attempts, freed with the call */
	int nold;
	nng_aio *sleep;    /* the backoff's timer (asynchronous calls) */
	bool sleeping;
	pthread_cond_t cv; /* a synchronous call's backoff waits on it (a cancel wakes it) */
	int again_ms;      /* a synchronous call: attempt again after this long; -1: no */
	bool cancelled;
	bool idem;         /* may be sent again */
	bool seq, seq_start, seq_end;
	char seqkey[PROTO_MAX_ID + 140];
	int ep;            /* endpoint of the current attempt */
	uint64_t tried;    /* endpoints tried, a bit each */
	char log[640];     /* "url: what happened; ..." */
};

static bool is_idempotent(const char *verb)
{
	static const char *const ok[] = {"infer", "realize", "health", "hello", "stats", "model.list", "repo.index",
					 "sysshm.status"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(verb, ok[i]))
			return true;
	return false;
}

static tsd_status fo_prepare(tsd_call *k, const cJSON *h)
{
	tsd_fo_call *f = k->foc;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, "verb");
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(h, "sequence_id");
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(h, "model");
	f->idem = cJSON_IsString(v) && is_idempotent(v->valuestring) && !sid;
	if (sid && cJSON_IsString(v) && !strcmp(v->valuestring, "infer")) {
		f->seq = true;
		f->seq_start = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "sequence_start"));
		f->seq_end = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "sequence_end"));
		const char *m = cJSON_IsString(model) ? model->valuestring : "";
		if (cJSON_IsString(sid))
			snprintf(f->seqkey, sizeof(f->seqkey), "%.128s\ns%s", m, sid->valuestring);
		else if (cJSON_IsNumber(sid))
			snprintf(f->seqkey, sizeof(f->seqkey), "%.128s\nn%.0f", m, sid->valuedouble);
		else
			f->seq = false; /* not a valid id: the daemon answers bad_request */
	}
	return TSD_OK;
}

static void logf_call(tsd_fo_call *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_call(tsd_fo_call *f, const char *fmt, ...)
{
	size_t len = strlen(f->log);
	if (len + 8 >= sizeof(f->log))
		return;
	if (len)
		len += (size_t)snprintf(f->log + len, sizeof(f->log) - len, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->log + len, sizeof(f->log) - len, fmt, ap);
	va_end(ap);
}

static uint64_t ep_gen(fo_ep *e, bool *connected)
{
	uint64_t g = 0;
	bool up = tsd_client_connected(e->sub, &g);
	if (connected)
		*connected = up;
	return g;
}

static uint64_t hash_key(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The slot of key in the sequence table (fo->mu held): its own, else a free or reused one. */
static fo_seq *seq_slot(tsd_fo *fo, const char *key, bool *found)
{
	uint64_t h = hash_key(key);
	fo_seq *spare = NULL;
	for (int i = 0; i < 8; i++) {
		fo_seq *q = &fo->seq[(h + (uint64_t)i) % FO_SEQ_SLOTS];
		if (!strcmp(q->key, key)) {
			*found = true;
			return q;
		}
		if (!spare && !q->key[0])
			spare = q;
	}
	*found = false;
	return spare ? spare : &fo->seq[h % FO_SEQ_SLOTS];
}

/* The endpoint for k's next attempt (fo->mu held), or -1 with the reason in why. wait: every
 * endpoint refused on its current connection or failed just now; try again after a pause. */
static int pick(tsd_fo *fo, tsd_call *k, bool *wait, char *why, size_t whylen)
{
	tsd_fo_call *f = k->foc;
	int64_t now = tsd_now_ms();
	*wait = false;
	if (f->seq && !fo->seq && !(fo->seq = calloc(FO_SEQ_SLOTS, sizeof(fo_seq)))) {
		snprintf(why, whylen, "out of memory for the sequence table");
		return -1;
	}
	if (f->seq && !f->seq_start) {
		bool found;
		fo_seq *q = seq_slot(fo, f->seqkey, &found);
		if (!found) /* started by another client, or forgotten: its replica by the key's hash */
			return (int)(hash_key(f->seqkey) % (uint64_t)fo->n);
		bool up;
		uint64_t g = ep_gen(&fo->ep[q->ep], &up);
		if (g != q->gen || !up) {
			snprintf(why, whylen, "the sequence lived on %s, whose connection was lost since it started "
				 "(the replica stopped or restarted): its state is gone; start it again (sequence_start)",
				 fo->ep[q->ep].url);
			q->key[0] = 0;
			return -1;
		}
		if (f->seq_end)
			q->key[0] = 0;
		return q->ep;
	}
	int best = -1, rank = 99;
	for (int i = 0; i < fo->n; i++) {
		int e = (int)((fo->next + (unsigned)i) % (unsigned)fo->n);
		fo_ep *p = &fo->ep[e];
		bool up;
		uint64_t g = ep_gen(p, &up);
		bool refusing = p->refused && p->refused_gen == g;
		bool tried = f->tried >> e & 1;
		bool avoided = p->avoid_until_ms > now && p->avoid_gen == g;
		/* untried and healthy, untried and not refusing, tried but healthy again, then any */
		int r = !tried && up && !refusing && !avoided ? 0
			: !tried && !refusing && !avoided   ? 1
			: up && !refusing && !avoided       ? 2
			: !refusing                         ? 3
							    : 4;
		if (r < rank) {
			rank = r;
			best = e;
		}
	}
	if (rank >= 4 || (rank == 3 && f->tried)) {
		*wait = true; /* every one refuses on its connection, or just failed: let them reconnect */
		return -1;
	}
	fo->next = (unsigned)best + 1;
	if (f->seq) { /* a start: its replica from now on */
		bool found;
		fo_seq *q = seq_slot(fo, f->seqkey, &found);
		if (!f->seq_end) {
			snprintf(q->key, sizeof(q->key), "%s", f->seqkey);
			q->ep = best;
			q->gen = ep_gen(&fo->ep[best], NULL);
		} else if (found) {
			q->key[0] = 0;
		}
	}
	return best;
}

static void attempt(tsd_call *k);

/* Complete k once (claimed from the live list): status and reply, or the message. */
static void complete(tsd_call *k, tsd_status s, tsd_reply *r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void complete(tsd_call *k, tsd_status s, tsd_reply *r, const char *fmt, ...)
{
	tsd_client *c = k->c;
	pthread_mutex_lock(&c->mu);
	bool mine = tsd_call_unlink_locked(k);
	pthread_mutex_unlock(&c->mu);
	if (!mine) {
		tsd_reply_free(r);
		return;
	}
	tsd_fo_call *f = k->foc;
	pthread_mutex_lock(&f->mu);
	nng_msg_free(f->msg);
	f->msg = NULL;
	pthread_mutex_unlock(&f->mu);
	if (r) {
		tsd_call_finish(k, s, r);
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->err, sizeof(k->err), fmt, ap);
	va_end(ap);
	tsd_call_finish(k, s, NULL);
}

static void on_wake(void *arg)
{
	tsd_call *k = arg;
	tsd_fo_call *f = k->foc;
	pthread_mutex_lock(&f->mu);
	f->sleeping = false;
	bool cancelled = f->cancelled || nng_aio_result(f->sleep) == NNG_ECANCELED;
	pthread_mutex_unlock(&f->mu);
	if (cancelled)
		complete(k, TSD_CANCELLED, NULL, "cancelled by the caller");
	else
		attempt(k);
}

/* Sleep ms, then attempt again (a synchronous call: fo_run does, on the caller's thread); false
 * when the deadline comes first. */
static bool pause_then_retry(tsd_call *k, int ms)
{
	tsd_fo_call *f = k->foc;
	if (k->deadline_ms && tsd_now_ms() + ms >= k->deadline_ms)
		return false;
	pthread_mutex_lock(&f->mu);
	bool cancelled = f->cancelled;
	f->sleeping = !cancelled && k->async;
	if (!cancelled && !k->async)
		f->again_ms = ms;
	pthread_mutex_unlock(&f->mu);
	if (!cancelled && !k->async)
		return true;
	if (cancelled) {
		complete(k, TSD_CANCELLED, NULL, "cancelled by the caller");
		return true;
	}
	nng_sleep_aio(ms, f->sleep);
	return true;
}

static int backoff(tsd_fo *fo, int retry)
{
	int64_t b = (int64_t)fo->backoff_ms << (retry > 10 ? 10 : retry - 1);
	if (b > 1000)
		b = 1000;
	pthread_mutex_lock(&fo->mu);
	fo->rng = fo->rng * 1103515245u + 12345u;
	unsigned r = fo->rng >> 8;
	pthread_mutex_unlock(&fo->mu);
	return (int)(b / 2 + (int64_t)(r % (unsigned)(b / 2 + 1)));
}

/* An attempt completed (on its endpoint client's thread): done, or another attempt. */
static void on_attempt(tsd_call *sub, void *arg)
{
	tsd_call *k = arg;
	tsd_fo_call *f = k->foc;
	tsd_fo *fo = k->c->fo;
	fo_ep *e = &fo->ep[f->ep];
	tsd_reply *r = NULL;
	tsd_status s = tsd_call_take(sub, &r);
	bool sent = sub->sent;
	pthread_mutex_lock(&f->mu);
	bool cancelled = f->cancelled;
	pthread_mutex_unlock(&f->mu);
	/* what makes an attempt worth repeating elsewhere, and what that says of its endpoint */
	bool lost = !r && s == TSD_SHUTTING_DOWN;                 /* the connection went with it */
	bool refused = r && (s == TSD_SHUTTING_DOWN || s == TSD_UNAVAILABLE); /* a draining or starting daemon ran nothing */
	bool unsent = !r && s == TSD_TIMEOUT && !sent;            /* never reached a daemon */
	if (lost || refused || unsent) {
		pthread_mutex_lock(&fo->mu);
		if (refused && s == TSD_SHUTTING_DOWN) { /* until it reconnects: a new daemon, or another replica */
			e->refused = true;
			e->refused_gen = ep_gen(e, NULL);
		} else { /* a while: a starting daemon gets ready on the same connection */
			e->avoid_until_ms = tsd_now_ms() + 250;
			e->avoid_gen = ep_gen(e, NULL);
		}
		pthread_mutex_unlock(&fo->mu);
	}
	if (s == TSD_OK) {
		pthread_mutex_lock(&fo->mu);
		fo->tokens = fo->tokens + FO_TOKEN_RATIO > FO_TOKENS_MAX ? FO_TOKENS_MAX : fo->tokens + FO_TOKEN_RATIO;
		pthread_mutex_unlock(&fo->mu);
	}
	bool retryable = (lost || refused || unsent) && f->idem && !cancelled;
	if (!retryable || s == TSD_OK) {
		if (k->attempts == 1 || s == TSD_OK || cancelled) {
			if (r) {
				complete(k, s, r, "%s", "");
			} else {
				const char *m = sub->err[0] ? sub->err : tsd_status_message(s);
				complete(k, cancelled ? TSD_CANCELLED : s, NULL, "%s%s", cancelled ? "cancelled by the caller: " : "", m);
			}
			return;
		}
		/* an earlier attempt was retried: a reply as it came, else the whole story */
		logf_call(f, "%s: %s", e->url, r ? tsd_reply_error(r) : sub->err[0] ? sub->err : tsd_status_message(s));
		complete(k, s, r, "after %d attempts: %s", k->attempts, f->log);
		return;
	}
	logf_call(f, "%s: %s", e->url,
		  refused ? tsd_status_name(s) : unsent ? "not sent (no connection)" : "connection lost before the reply");
	tsd_reply_free(r);
	pthread_mutex_lock(&fo->mu);
	bool budget = k->attempts <= fo->retries && fo->tokens >= 1.0;
	if (budget) {
		fo->tokens -= 1.0;
		fo->retried++;
	}
	pthread_mutex_unlock(&fo->mu);
	int done = k->attempts;
	if (budget) {
		k->attempts++; /* before the wake can read it */
		if (pause_then_retry(k, backoff(fo, done)))
			return;
		k->attempts--;
	}
	/* the last attempt's status: shutting_down (lost, or refused by a draining daemon),
	 * unavailable (a starting one), timeout (not sent) */
	complete(k, s, NULL, "no endpoint answered after %d attempt(s)%s: %s",
		 done, budget ? " (the call's deadline came)" : done > fo->retries ? "" : " (the client's retry budget is spent)",
		 f->log);
}

/* Send k's request to the endpoint pick() chooses. */
static void attempt(tsd_call *k)
{
	tsd_fo_call *f = k->foc;
	tsd_fo *fo = k->c->fo;
	char why[512] = "";
	bool wait;
	for (int i = 0; i < fo->n; i++) /* unix:// endpoints that lost their connection dial again */
		if (!tsd_client_connected(fo->ep[i].sub, NULL))
			tsd_unix_poke(fo->ep[i].sub);
	pthread_mutex_lock(&fo->mu);
	int e = pick(fo, k, &wait, why, sizeof(why));
	pthread_mutex_unlock(&fo->mu);
	if (e < 0 && wait) { /* no attempt spent: wait for a connection to come back */
		if (!pause_then_retry(k, backoff(fo, 2)))
			complete(k, TSD_SHUTTING_DOWN, NULL, "no endpoint could take the call before its deadline: %s",
				 f->log[0] ? f->log : "every endpoint refused or was lost");
		return;
	}
	if (e < 0) {
		complete(k, f->seq ? TSD_SEQUENCE_ENDED : TSD_OUT_OF_MEMORY, NULL, "%s", why);
		return;
	}
	bool more = f->idem && k->attempts <= fo->retries;
	nng_msg *m = NULL;
	pthread_mutex_lock(&f->mu);
	if (more) {
		if (nng_msg_dup(&m, f->msg))
			m = NULL;
	} else {
		m = f->msg; /* the last one this call may make */
		f->msg = NULL;
	}
	pthread_mutex_unlock(&f->mu);
	if (!m) {
		complete(k, TSD_OUT_OF_MEMORY, NULL, "out of memory for an attempt");
		return;
	}
	pthread_mutex_lock(&f->mu);
	bool cancelled = f->cancelled;
	pthread_mutex_unlock(&f->mu);
	if (cancelled) { /* before anything of this attempt exists */
		nng_msg_free(m);
		complete(k, TSD_CANCELLED, NULL, "cancelled by the caller");
		return;
	}
	/* a call that may go elsewhere waits for its endpoint's connection a bounded time */
	int64_t send_by = more ? tsd_now_ms() + FO_UNSENT_MS : 0;
	/* a synchronous call's attempts run on its caller's thread, as a plain client's do */
	tsd_call *sub = tsd_call_prepare_msg(fo->ep[e].sub, k->id, k->id_str, k->deadline_ms, send_by, !k->async,
					     on_attempt, k);
	if (!sub) {
		nng_msg_free(m);
		complete(k, TSD_OUT_OF_MEMORY, NULL, "out of memory for an attempt");
		return;
	}
	pthread_mutex_lock(&f->mu);
	if (f->sub) /* attempts are at most 11 (TENSORD_CLIENT_RETRIES <= 10): old has room */
		f->old[f->nold++] = f->sub;
	f->sub = sub;
	f->ep = e;
	f->tried |= 1ull << e;
	cancelled = f->cancelled;
	pthread_mutex_unlock(&f->mu);
	if (!k->async) {
		/* returns completed; a cancel from another thread from here on cancels sub (one in
		 * the instant before the transport took it is seen when its send completes (nng),
		 * or at its deadline) */
		tsd_call_launch(sub, m);
		on_attempt(sub, k);
		return;
	}
	tsd_call_launch(sub, m);
	if (cancelled)
		tsd_call_cancel(sub);
}

static int fo_call_init(tsd_call *k, bool sync)
{
	(void)sync;
	tsd_fo_call *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (nng_aio_alloc(&f->sleep, on_wake, k)) {
		free(f);
		return -1;
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->again_ms = -1;
	k->foc = f;
	return 0;
}

static void fo_call_destroy(tsd_call *k)
{
	tsd_fo_call *f = k->foc;
	if (!f)
		return;
	nng_aio_free(f->sleep); /* waits for on_wake */
	tsd_call_free(f->sub);
	for (int i = 0; i < f->nold; i++)
		tsd_call_free(f->old[i]);
	nng_msg_free(f->msg);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
	k->foc = NULL;
}

static void fo_start(tsd_call *k, nng_msg *msg)
{
	tsd_client *c = k->c;
	pthread_mutex_lock(&c->mu);
	tsd_call_link_locked(k);
	pthread_mutex_unlock(&c->mu);
	k->foc->msg = msg;
	attempt(k);
}

/* A synchronous call: fo_start made its first attempt on this thread; the backoffs and the
 * attempts after them run here too. */
static void fo_run(tsd_call *k)
{
	tsd_fo_call *f = k->foc;
	while (!atomic_load(&k->done)) {
		pthread_mutex_lock(&f->mu);
		int ms = f->again_ms;
		f->again_ms = -1;
		if (ms >= 0 && !f->cancelled) {
			struct timespec until;
			tsd_deadline(ms, &until);
			while (!f->cancelled && pthread_cond_timedwait(&f->cv, &f->mu, &until) != ETIMEDOUT)
				;
		}
		bool cancelled = f->cancelled;
		pthread_mutex_unlock(&f->mu);
		if (ms < 0)
			break; /* completed (or completing on another thread: tsd_call_run waits) */
		if (cancelled)
			complete(k, TSD_CANCELLED, NULL, "cancelled by the caller");
		else
			attempt(k);
	}
}

static void fo_cancel(tsd_call *k)
{
	tsd_fo_call *f = k->foc;
	pthread_mutex_lock(&f->mu);
	f->cancelled = true;
	tsd_call *sub = f->sub;
	bool sleeping = f->sleeping;
	pthread_cond_broadcast(&f->cv); /* a synchronous call's backoff */
	pthread_mutex_unlock(&f->mu);
	if (sleeping)
		nng_aio_cancel(f->sleep);
	else if (sub)
		tsd_call_cancel(sub);
}

static bool fo_connected(tsd_client *c, uint64_t *connects)
{
	bool any = false;
	uint64_t sum = 0;
	for (int i = 0; i < c->fo->n; i++) {
		uint64_t g = 0;
		any |= tsd_client_connected(c->fo->ep[i].sub, &g);
		sum += g;
	}
	if (connects)
		*connects = sum;
	return any;
}

static bool fo_close(tsd_client *c)
{
	tsd_fo *fo = c->fo;
	if (!fo)
		return true;
	/* cancel what is in flight and wait for it: attempts complete on the endpoints' threads */
	for (;;) {
		pthread_mutex_lock(&c->mu);
		tsd_call *k = c->live;
		pthread_mutex_unlock(&c->mu);
		if (!k)
			break;
		tsd_call_cancel(k);
		struct timespec until;
		tsd_deadline(20, &until);
		pthread_mutex_lock(&c->mu);
		if (c->live == k)
			pthread_cond_timedwait(&c->cv, &c->mu, &until);
		pthread_mutex_unlock(&c->mu);
	}
	for (int i = 0; i < fo->n; i++) {
		tsd_client_close(fo->ep[i].sub);
		free(fo->ep[i].url);
	}
	pthread_mutex_destroy(&fo->mu);
	free(fo->seq);
	free(fo);
	c->fo = NULL;
	return true;
}

/* The addresses a tcp:// URL's host name resolves to, as tcp:// URLs in out[max] (IPv4 ones if it
 * has any, else IPv6; no duplicates): their count; 0 when u is not tcp:// with a name, or the
 * name does not resolve now (nng resolves it again when it dials). */
static int resolve_tcp(const char *u, char (*out)[FO_URL_MAX], int max)
{
	const char *host = !strncmp(u, "tcp://", 6) ? u + 6 : NULL;
	const char *colon = host ? strrchr(host, ':') : NULL;
	char name[256], port[16];
	struct in_addr a4;
	struct in6_addr a6;
	if (!colon || host[0] == '[' || (size_t)(colon - host) >= sizeof(name) || strlen(colon + 1) >= sizeof(port))
		return 0;
	memcpy(name, host, (size_t)(colon - host));
	name[colon - host] = 0;
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (inet_pton(AF_INET, name, &a4) || inet_pton(AF_INET6, name, &a6))
		return 0;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	if (getaddrinfo(name, port, &hints, &res))
		return 0;
	int n = 0;
	for (int fam = 0; fam < 2 && !n; fam++)
		for (struct addrinfo *p = res; p && n < max; p = p->ai_next) {
			if (p->ai_family != (fam ? AF_INET6 : AF_INET))
				continue;
			char ip[INET6_ADDRSTRLEN], one[FO_URL_MAX];
			const void *src = fam ? (const void *)&((struct sockaddr_in6 *)p->ai_addr)->sin6_addr
					      : (const void *)&((struct sockaddr_in *)p->ai_addr)->sin_addr;
			inet_ntop(p->ai_family, src, ip, sizeof(ip));
			snprintf(one, sizeof(one), fam ? "tcp://[%s]:%s" : "tcp://%s:%s", ip, port);
			bool dup = false;
			for (int j = 0; j < n; j++)
				dup |= !strcmp(out[j], one);
			if (!dup)
				memcpy(out[n++], one, sizeof(one));
		}
	freeaddrinfo(res);
	return n;
}

/* Add url[len] to fo (its own copy; a name that resolves to several addresses: one endpoint
 * per address). -1 with err filled when there are too many or it is too long. */
static int add_endpoint(tsd_fo *fo, const char *url, size_t len, char *err, size_t errlen)
{
	char u[FO_URL_MAX - 48];
	if (len >= sizeof(u)) {
		snprintf(err, errlen, "an address of the list is longer than %zu bytes", sizeof(u) - 1);
		return -1;
	}
	memcpy(u, url, len);
	u[len] = 0;
	char expanded[FO_MAX_ENDPOINTS][FO_URL_MAX];
	int nx = resolve_tcp(u, expanded, FO_MAX_ENDPOINTS);
	if (nx < 2) {
		snprintf(expanded[0], sizeof(expanded[0]), "%s", u);
		nx = 1;
	}
	for (int j = 0; j < nx; j++) {
		if (fo->n == FO_MAX_ENDPOINTS) {
			snprintf(err, errlen, "more than %d endpoints", FO_MAX_ENDPOINTS);
			return -1;
		}
		if (!(fo->ep[fo->n].url = strdup(expanded[j]))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		fo->n++;
	}
	return 0;
}

bool tsd_failover_wanted(const char *url)
{
	const char *r = getenv("TENSORD_CLIENT_RETRIES");
	if (strchr(url, ',') || (r && atoi(r) > 0))
		return true;
	char two[2][FO_URL_MAX];
	return strlen(url) < FO_URL_MAX - 48 && resolve_tcp(url, two, 2) >= 2;
}

static int env_int(const char *name, int lo, int hi, int dflt)
{
	const char *v = getenv(name);
	if (!v || !v[0])
		return dflt;
	char *end;
	long x = strtol(v, &end, 10);
	return *end || x < lo || x > hi ? dflt : (int)x;
}

/* Parse c->url's list and open a client per endpoint (without waiting); then wait for one to
 * connect as connect_ms says (0: up to a second, failing when none does; < 0: not at all). */
static int fo_open(tsd_client *c, int connect_ms, char *err, size_t errlen)
{
	tsd_fo *fo = calloc(1, sizeof(*fo));
	if (!fo) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->fo = fo;
	pthread_mutex_init(&fo->mu, NULL);
	fo->tokens = FO_TOKENS_MAX;
	fo->rng = (unsigned)tsd_now_ns();
	for (const char *p = c->url; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *q = p;
		while (*q && *q != ',')
			q++;
		size_t len = (size_t)(q - p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len && add_endpoint(fo, p, len, err, errlen))
			return -1;
		p = q;
	}
	if (!fo->n) {
		snprintf(err, errlen, "no daemon address in \"%s\"", c->url);
		return -1;
	}
	fo->retries = env_int("TENSORD_CLIENT_RETRIES", 0, 10, 3);
	fo->backoff_ms = env_int("TENSORD_CLIENT_BACKOFF_MS", 1, 10000, 25);
	for (int i = 0; i < fo->n; i++) {
		char why[512];
		if (strchr(fo->ep[i].url, ',') ||
		    !(fo->ep[i].sub = tsd_client_open_endpoint(fo->ep[i].url, c->timeout_ms, -1, why, sizeof(why)))) {
			snprintf(err, errlen, "%s: %s", fo->ep[i].url, fo->ep[i].sub ? "" : why);
			return -1;
		}
	}
	if (connect_ms < 0)
		return 0;
	/* until every endpoint is connected, or one is and 200 ms went by (round robin starts over
	 * the replicas that are there), or the wait is over (then none: fail) */
	int64_t t0 = tsd_now_ms(), until = t0 + (connect_ms ? connect_ms : 1000);
	for (;;) {
		int up = 0;
		for (int i = 0; i < fo->n; i++) {
			bool on = tsd_client_connected(fo->ep[i].sub, NULL);
			if (!on)
				tsd_unix_poke(fo->ep[i].sub);
			up += on || tsd_client_connected(fo->ep[i].sub, NULL);
		}
		if (up == fo->n || (up && tsd_now_ms() - t0 >= 200))
			break;
		if (tsd_now_ms() >= until) {
			size_t len = (size_t)snprintf(err, errlen, "none of the %d endpoints could be reached within %d ms:", fo->n,
						      connect_ms ? connect_ms : 1000);
			for (int i = 0; i < fo->n && len < errlen; i++)
				len += (size_t)snprintf(err + len, errlen - len, " %s", fo->ep[i].url);
			return -1;
		}
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

uint64_t tsd_client_retries(const tsd_client *c)
{
	if (!c->fo)
		return 0;
	pthread_mutex_lock(&c->fo->mu);
	uint64_t n = c->fo->retried;
	pthread_mutex_unlock(&c->fo->mu);
	return n;
}

int tsd_call_attempts(const tsd_call *k)
{
	return k->attempts;
}

const tsd_transport_ops tsd_failover_ops = {
	.name = "failover",
	.prepare = fo_prepare,
	.open = fo_open,
	.close = fo_close,
	.connected = fo_connected,
	.call_init = fo_call_init,
	.call_destroy = fo_call_destroy,
	.start = fo_start,
	.run = fo_run,
	.cancel = fo_cancel,
};
