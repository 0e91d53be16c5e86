/* client.c: the client's connection: an nng REQ socket with one dialer to the daemon, which
 * redials by itself after the daemon goes away; connect waits and the connection count. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_impl.h"

#include <nng/protocol/reqrep0/req.h> /* needs nng.h first */

#define RECONNECT_MIN_MS 50   /* the first redial after a connection is lost */
#define RECONNECT_MAX_MS 1000 /* the back-off's cap while the daemon stays away */

/* The message into buf[cap] (either may be 0). */
static void say(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (buf && cap)
		vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
}

/* nng's pipe callback (an nng thread): count the connections. */
static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)p;
	tsd_client *c = arg;
	pthread_mutex_lock(&c->mu);
	if (ev == NNG_PIPE_EV_ADD_POST) {
		c->npipes++;
		c->connects++;
		pthread_cond_broadcast(&c->cv);
	} else if (ev == NNG_PIPE_EV_REM_POST && c->npipes > 0) {
		c->npipes--;
	}
	pthread_mutex_unlock(&c->mu);
}

/* Socket options: no resend (a request such as model.load must not run twice: with resending
 * off, nng fails a request whose connection closed with NNG_ECONNRESET instead of sending it
 * again on the next one), the reply cap, pipe events. Returns what failed, or NULL. */
static const char *setup_socket(tsd_client *c, int *rv)
{
	if ((*rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)))
		return "resend time";
	if ((*rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, TSD_CLIENT_MAX_REPLY)))
		return "reply size limit";
	if ((*rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, pipe_event, c)) ||
	    (*rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_event, c)))
		return "pipe notification";
	if ((*rv = nng_dialer_create(&c->dialer, c->sock, c->url)))
		return "dialer";
	if ((*rv = nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMINT, RECONNECT_MIN_MS)) ||
	    (*rv = nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMAXT, RECONNECT_MAX_MS)))
		return "reconnect times";
	return NULL;
}

/* Wait up to ms for a connection; true when there is one. */
static bool wait_connected(tsd_client *c, int ms)
{
	struct timespec until;
	tsd_deadline(ms, &until);
	pthread_mutex_lock(&c->mu);
	int rc = 0;
	while (!c->npipes && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
	bool ok = c->npipes > 0;
	pthread_mutex_unlock(&c->mu);
	return ok;
}

tsd_client *tsd_client_open_wait(const char *url, int timeout_ms, int connect_ms, char *err,
				 size_t errlen)
{
	if (!url || !url[0]) {
		say(err, errlen, "no daemon address");
		return NULL;
	}
	tsd_client *c = calloc(1, sizeof(*c));
	if (!c || !(c->url = strdup(url))) {
		free(c);
		say(err, errlen, "out of memory");
		return NULL;
	}
	if (tsd_client_token_load(c, err, errlen)) {
		free(c->url);
		free(c);
		return NULL;
	}
	c->timeout_ms = timeout_ms;
	atomic_init(&c->next_id, 1);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	int rv = nng_req0_open(&c->sock);
	if (rv) {
		say(err, errlen, "cannot open a request socket: %s", nng_strerror(rv));
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		tsd_client_token_free(c);
		free(c->url);
		free(c);
		return NULL;
	}
	const char *what = setup_socket(c, &rv);
	if (what) {
		say(err, errlen, "cannot set the %s: %s", what, nng_strerror(rv));
	} else if (connect_ms == 0) {
		/* blocking: a daemon that is not there fails here at once; after this first
		 * connection the dialer redials by itself whenever it is lost */
		if ((rv = nng_dialer_start(c->dialer, 0)))
			say(err, errlen, "cannot connect to %s: %s%s", url, nng_strerror(rv),
			    rv == NNG_ECONNREFUSED || rv == NNG_ENOENT ? " (is tensord running?)" : "");
	} else if ((rv = nng_dialer_start(c->dialer, NNG_FLAG_NONBLOCK))) {
		say(err, errlen, "cannot connect to %s: %s", url, nng_strerror(rv));
	} else if (connect_ms > 0 && !wait_connected(c, connect_ms)) {
		say(err, errlen, "cannot connect to %s within %d ms (is tensord running?)", url,
		    connect_ms);
		rv = NNG_ETIMEDOUT;
	}
	if (rv) {
		tsd_client_free(c);
		return NULL;
	}
	return c;
}

tsd_client *tsd_client_open(const char *url, int timeout_ms, char *err, size_t errlen)
{
	return tsd_client_open_wait(url, timeout_ms, 0, err, errlen);
}

void tsd_client_free(tsd_client *c)
{
	/* the dialer first: nng 1.5's nng_close of a REQ socket can hang on a dialer redialling */
	nng_dialer_close(c->dialer);
	nng_close(c->sock);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	tsd_client_token_free(c);
	free(c->url);
	free(c);
}

bool tsd_client_connected(tsd_client *c, uint64_t *connects)
{
	pthread_mutex_lock(&c->mu);
	bool up = c->npipes > 0;
	if (connects)
		*connects = c->connects;
	pthread_mutex_unlock(&c->mu);
	return up;
}

bool tsd_client_default_url(const char *tensord_url, const char *xdg_runtime_dir, char *out,
			    size_t cap)
{
	int n;
	if (tensord_url && tensord_url[0])
		n = snprintf(out, cap, "%s", tensord_url);
	else if (xdg_runtime_dir && xdg_runtime_dir[0] == '/')
		n = snprintf(out, cap, "ipc://%s/tensord/" TSD_CLIENT_SOCKET, xdg_runtime_dir);
	else
		n = snprintf(out, cap, "ipc:///run/tensord/" TSD_CLIENT_SOCKET);
	return n >= 0 && (size_t)n < cap;
}
