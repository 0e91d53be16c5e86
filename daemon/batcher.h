/* batcher.h: the batcher layer (batcher.c, loop thread): per-model queues of infer requests,
 * the control queue (loads, realize, train.step, model.save), what the executor runs next, a
 * batch's bookkeeping when it comes back, and a closed connection's requests. */
#ifndef DMN_BATCHER_H
#define DMN_BATCHER_H

#include "executor.h"
#include "registry.h"
#include "request.h"
#include "types.h"

/* Queue an infer request (checked) for m; may answer it (busy, superseded others). */
void dmn_enqueue(dmn_srv *s, dmn_model *m, dmn_req *r);
void dmn_dequeue(dmn_srv *s, dmn_req *r); /* out of its model queue */
void dmn_ctl_push(dmn_srv *s, dmn_job *j); /* queue a control job (taken) */
/* True while r's client has a compile left in its realize budget (config realize_compiles_per_s,
 * realize_compile_burst); else r is answered busy, naming the keys, and false. */
bool dmn_realize_budget(dmn_srv *s, dmn_req *r);
/* Run what can run: expire timeouts, pick the next job for the executor (or run it on the
 * loop: it then comes back on the DONE lane at once), arm the timer. */
void dmn_dispatch(dmn_srv *s);
/* An INFER, TRAIN, SAVE or REALIZE job came back: counters, histograms, its requests
 * answered (the job itself is the caller's). */
void dmn_batch_done(dmn_srv *s, dmn_job *j);
/* Mark c's requests in the running job as gone. */
void dmn_mark_gone(dmn_srv *s, dmn_client *c);
/* A transport's connection closed: its queued requests dropped, its running ones marked. */
void dmn_on_closed(dmn_srv *s, const dmn_chan_ops *ops, uint32_t conn);
/* Answer every queued request with st (draining, unload). m NULL: every model. */
void dmn_flush_queues(dmn_srv *s, dmn_model *m, tsd_status st, const char *msg);
/* After the loop ended: control jobs that never ran. */
void dmn_batcher_free(dmn_srv *s);

#endif
