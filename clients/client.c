/* client.c: a client's life common to the transports: open (the transport picked by the URL's
 * scheme: unix:// or nng's ipc:// and tcp://; a list of them, or retries asked for, the failover
 * transport over clients of those), free, the connection state, the default URL. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"

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

static tsd_client *open_client(const char *url, int timeout_ms, int connect_ms, bool failover, char *err,
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
	c->ops = strncmp(url, "unix://", 7) ? &tsd_nng_ops : &tsd_unix_ops;
	if (failover && tsd_failover_wanted(url))
		c->ops = &tsd_failover_ops;
	c->max_reply = TSD_CLIENT_MAX_REPLY;
	const char *spin = getenv("TENSORD_CLIENT_SPIN_US");
	c->spin_us = spin ? atoi(spin) : 0;
	c->spin_us = c->spin_us < 0 ? 0 : c->spin_us > 10000 ? 10000 : c->spin_us;
	c->timeout_ms = timeout_ms;
	atomic_init(&c->next_id, 1);
	atomic_init(&c->closing, false);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	char why[512] = "";
	if (c->ops->open(c, connect_ms, why, sizeof(why))) {
		say(err, errlen, "%s", why);
		c->ops->close(c);
		tsd_client_free(c);
		return NULL;
	}
	return c;
}

tsd_client *tsd_client_open_wait(const char *url, int timeout_ms, int connect_ms, char *err,
				 size_t errlen)
{
	return open_client(url, timeout_ms, connect_ms, true, err, errlen);
}

tsd_client *tsd_client_open_endpoint(const char *url, int timeout_ms, int connect_ms, char *err, size_t errlen)
{
	return open_client(url, timeout_ms, connect_ms, false, err, errlen);
}

tsd_client *tsd_client_open(const char *url, int timeout_ms, char *err, size_t errlen)
{
	return tsd_client_open_wait(url, timeout_ms, 0, err, errlen);
}

void tsd_client_free(tsd_client *c)
{
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	tsd_client_token_free(c);
	free(c->url);
	free(c);
}

void tsd_client_set_max_reply(tsd_client *c, size_t max)
{
	c->max_reply = max;
}

bool tsd_client_connected(tsd_client *c, uint64_t *connects)
{
	return c->ops->connected(c, connects);
}

bool tsd_client_default_url(const char *tensord_url, const char *xdg_runtime_dir, char *out,
			    size_t cap)
{
	int n;
	if (tensord_url && tensord_url[0])
		n = snprintf(out, cap, "%s", tensord_url);
	else if (xdg_runtime_dir && xdg_runtime_dir[0] == '/')
		n = snprintf(out, cap, "unix://%s/tensord/" TSD_CLIENT_SOCKET, xdg_runtime_dir);
	else
		n = snprintf(out, cap, "unix:///run/tensord/" TSD_CLIENT_SOCKET);
	return n >= 0 && (size_t)n < cap;
}
