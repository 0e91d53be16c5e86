/* http.h: the metrics frontend (http.c): /metrics, /healthz and /readyz on nng's HTTP server
 * (config http_listen), answered on the loop. */
#ifndef DMN_HTTP_H
#define DMN_HTTP_H

#include "types.h"

/* Start listening when http_listen is set (else nothing); -1 and err on failure. */
int dmn_http_start(dmn_srv *s, char *err, size_t errlen);
void dmn_http_stop(dmn_srv *s); /* any state dmn_http_start left */

#endif
