/* server.h: the top of the daemon's layers (server.c): its life from start to exit. The
 * layers, lowest first (docs/ARCHITECTURE.md, "The daemon"): config, log, metrics and util;
 * inbox; transport; types; exec; registry; request; batcher; models; stats; verbs and http;
 * server. A file includes only its own layer's header and lower ones. */
#ifndef DMN_SERVER_H
#define DMN_SERVER_H

#include "batcher.h"
#include "executor.h"
#include "http.h"
#include "inbox.h"
#include "models.h"
#include "registry.h"
#include "request.h"
#include "transport.h"
#include "types.h"
#include "util.h"
#include "verbs.h"

/* Run the daemon with cfg (taken); returns the process exit code. */
int dmn_serve(dmn_config *cfg, int argc, char *const *argv);

#endif
