/* oip_http.h: the Open Inference Protocol's HTTP/REST frontend (oip_http.c): KServe v2 and
 * Triton's extensions on h2o (HTTP/1.1 and HTTP/2, libuv flavour) on the daemon's loop, a
 * transport at the seam (transport.h) that translates each request into TSD1 (oip.h). Config
 * oip_http_listen (default http://127.0.0.1:8000; empty: off). */
#ifndef DMN_OIP_HTTP_H
#define DMN_OIP_HTTP_H

#include <stdint.h>

#include "transport.h"

typedef struct dmn_oip_http dmn_oip_http;

/* Listen on cfg->oip_http_listen (empty: NULL, no error), on loop (the loop thread). NULL with
 * err on failure. cfg, log, ib and loop must outlive it. */
dmn_oip_http *dmn_oip_http_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop, char *err,
				 size_t errlen);
/* The port it listens on (the one chosen when the config said 0); 0 for NULL. */
int dmn_oip_http_port(const dmn_oip_http *t);
/* Loop: stop listening, close every connection (their closing is not posted: the inbox closes
 * with it), then h2o's context once the last is gone. Idempotent; NULL allowed. */
void dmn_oip_http_close(dmn_oip_http *t);
/* After the loop ran the closes and no thread sends any more: free t and what it still holds.
 * NULL allowed. */
void dmn_oip_http_stop(dmn_oip_http *t);
/* Answers handed over and not yet written (any thread); 0 for NULL. */
int dmn_oip_http_sending(const dmn_oip_http *t);

typedef struct dmn_oip_http_stats {
	int64_t open;      /* connections open now */
	int64_t accepted;  /* connections accepted */
	int64_t refused_cap; /* closed at once: their address had peer_connections_max */
	int64_t requests;  /* requests routed (every endpoint) */
	int64_t errors;    /* answered 4xx/5xx by the frontend itself, before the daemon saw them */
} dmn_oip_http_stats;
void dmn_oip_http_get_stats(dmn_oip_http *t, dmn_oip_http_stats *st); /* zeros for NULL */

#endif
