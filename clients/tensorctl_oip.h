/* tensorctl_oip.h: one Open Inference Protocol HTTP client connection for `tensorctl bench
 * --protocol http` (tensorctl_oip.c, on libcurl): the same infer request, binary tensor data,
 * sent again and again over one keep-alive connection. */
#ifndef TCTL_OIP_H
#define TCTL_OIP_H

#include <stdbool.h>
#include <stddef.h>

#include "tensorctl.h"

typedef struct tctl_oip tctl_oip;

/* Once per process, before any thread opens one (libcurl's global setup); false with err. */
bool tctl_oip_global(char *err, size_t errlen);
void tctl_oip_global_end(void);
/* A client for POST URL/v2/models/MODEL/infer of in (every output asked for as binary data);
 * NULL with err. url: http://HOST:PORT. */
tctl_oip *tctl_oip_open(const char *url, const char *model, const tctl_inputs *in, long timeout_ms, char *err,
			size_t errlen);
/* Send it once and read the whole answer: true on 200, else false with why. */
bool tctl_oip_infer(tctl_oip *o, char *why, size_t whylen);
void tctl_oip_close(tctl_oip *o); /* NULL allowed */

#endif
