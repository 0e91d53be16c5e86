/* verbs.h: the tensord protocol's frontend on the loop: a request's arrival from a transport
 * channel, decoded and admitted (arrival.c), and the verb table with its handlers (verbs.c),
 * which answer at once or queue work for the executor. */
#ifndef DMN_VERBS_H
#define DMN_VERBS_H

#include "batcher.h"
#include "models.h"
#include "registry.h"
#include "request.h"
#include "stats.h"
#include "types.h"

/* ---- arrival.c ---- */
/* The ARRIVED lane: what ch received becomes a request, checked, and run or answered. */
void dmn_on_request(dmn_srv *s, dmn_chan *ch);

/* ---- verbs.c ---- */
/* Run r's verb (r->verb is known and admitted); r is answered now or later. */
void dmn_verb_run(dmn_srv *s, dmn_req *r);
/* After a drain: the stats and model.list requests that waited for the job whose replies had
 * gone out, once it is back (they then see its counters). */
void dmn_run_deferred(dmn_srv *s);

#endif
