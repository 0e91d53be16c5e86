/* http.c: the optional metrics listener (config http_listen), on nng's own HTTP server:
 * /metrics (Prometheus text; on a non-loopback address 403 unless metrics_remote), /healthz (200
 * while live), /readyz (200 when ready); else 503 with the reason (health.c).
 * nng calls the handlers on its threads; they hand the request to the loop as an inbox call
 * (the loop owns the figures), and the loop completes it. */
#include "http.h"

#include "health.h"
#include "models.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/http/http.h>

enum { HTTP_METRICS, HTTP_HEALTHZ, HTTP_READYZ, HTTP_FORBIDDEN };

/* An HTTP request handed to the loop. */
typedef struct http_call {
	dmn_call call; /* first */
	dmn_srv *srv;
	nng_aio *aio;
	int what;      /* HTTP_* */
} http_call;

typedef struct dmn_http {
	nng_http_server *server;
	nng_url *url;
} dmn_http;

static void answer(dmn_srv *s, nng_aio *aio, int what)
{
	nng_http_res *res;
	if (nng_http_res_alloc(&res)) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	char *text = NULL;
	int code = 200;
	if (what == HTTP_METRICS) {
		text = dmn_metrics_text(s);
		code = text ? 200 : 500;
		nng_http_res_set_header(res, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	} else if (what == HTTP_FORBIDDEN) {
		code = 403;
		text = strdup("/metrics is not served on a non-loopback http_listen unless metrics_remote is true\n");
		nng_http_res_set_header(res, "Content-Type", "text/plain; charset=utf-8");
	} else {
		dmn_health h;
		dmn_health_get(s, eng_now_ns(), &h);
		bool ok = what == HTTP_HEALTHZ ? h.live : h.ready;
		code = ok ? 200 : 503;
		char line[sizeof(h.why) + 16];
		snprintf(line, sizeof(line), "%s\n", ok ? "ok" : h.why);
		text = strdup(line);
		nng_http_res_set_header(res, "Content-Type", "text/plain; charset=utf-8");
	}
	nng_http_res_set_status(res, (uint16_t)code);
	if (text)
		nng_http_res_copy_data(res, text, strlen(text));
	free(text);
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

/* On the loop. */
static void on_call(dmn_call *c)
{
	http_call *h = (http_call *)c;
	answer(h->srv, h->aio, h->what);
	free(h);
}

/* On nng's threads. */
static void handle(nng_aio *aio, int what)
{
	nng_http_handler *hd = nng_aio_get_input(aio, 1);
	dmn_srv *s = nng_http_handler_get_data(hd);
	http_call *h = calloc(1, sizeof(*h));
	if (!h) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	h->call.fn = on_call;
	h->srv = s;
	h->aio = aio;
	h->what = what;
	dmn_inbox_post(s->inbox, DMN_LANE_CALL, &h->call.in);
}

static void on_metrics(nng_aio *aio) { handle(aio, HTTP_METRICS); }
static void on_healthz(nng_aio *aio) { handle(aio, HTTP_HEALTHZ); }
static void on_readyz(nng_aio *aio) { handle(aio, HTTP_READYZ); }
static void on_forbidden(nng_aio *aio) { handle(aio, HTTP_FORBIDDEN); }

int dmn_http_start(dmn_srv *s, char *err, size_t errlen)
{
	if (!s->cfg.http_listen[0])
		return 0;
	dmn_http *h = calloc(1, sizeof(*h));
	int rv;
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->http = h;
	if ((rv = nng_url_parse(&h->url, s->cfg.http_listen)) || (rv = nng_http_server_hold(&h->server, h->url))) {
		snprintf(err, errlen, "http_listen %s: %s", s->cfg.http_listen, nng_strerror(rv));
		return -1;
	}
	/* off loopback, the figures (model names, loads, clients' errors) only when asked for */
	bool metrics = s->cfg.metrics_remote || dmn_cfg_url_loopback(s->cfg.http_listen);
	struct { const char *path; void (*fn)(nng_aio *); } routes[] = {
		{"/metrics", metrics ? on_metrics : on_forbidden}, {"/healthz", on_healthz}, {"/readyz", on_readyz}};
	for (size_t k = 0; k < sizeof(routes) / sizeof(*routes); k++) {
		nng_http_handler *hd;
		if ((rv = nng_http_handler_alloc(&hd, routes[k].path, routes[k].fn)) ||
		    (rv = nng_http_handler_set_data(hd, s, NULL)) || (rv = nng_http_server_add_handler(h->server, hd))) {
			snprintf(err, errlen, "http %s: %s", routes[k].path, nng_strerror(rv));
			return -1;
		}
	}
	if ((rv = nng_http_server_start(h->server))) {
		snprintf(err, errlen, "http_listen %s: %s", s->cfg.http_listen, nng_strerror(rv));
		return -1;
	}
	if (metrics)
		dmn_log(&s->log, DMN_LOG_INFO, "metrics on %s/metrics", s->cfg.http_listen);
	else
		dmn_log(&s->log, DMN_LOG_WARN, "%s is not loopback: /metrics answers 403 (metrics_remote is false); "
			"/healthz and /readyz are served", s->cfg.http_listen);
	return 0;
}

void dmn_http_stop(dmn_srv *s)
{
	dmn_http *h = s->http;
	if (!h)
		return;
	if (h->server) {
		nng_http_server_stop(h->server);
		nng_http_server_release(h->server);
	}
	if (h->url)
		nng_url_free(h->url);
	free(h);
	s->http = NULL;
}
