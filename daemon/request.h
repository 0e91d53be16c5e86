/* request.h: the requests layer (request.c, loop thread): a request made from what a channel
 * received, answered once back through that channel, counted, freed; the clients table. */
#ifndef DMN_REQUEST_H
#define DMN_REQUEST_H

#include "types.h"
#include "util.h"

/* A request for what ch received (ch->msg taken), its client found or made (NULL when out of
 * memory: the caller refuses it); NULL when out of memory (then ch receives again). */
dmn_req *dmn_req_new(dmn_srv *s, dmn_chan *ch);
/* Answer r: its prepared reply, or an error from st/err; then free r. */
void dmn_finish(dmn_srv *s, dmn_req *r);
/* Answer r with st and a formatted message. Frees r. */
void dmn_fail(dmn_srv *s, dmn_req *r, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Answer r OK with extra's fields (taken) and n tensors. Frees r. */
void dmn_reply_ok(dmn_srv *s, dmn_req *r, cJSON *extra, const proto_out *ts, int n);
/* Drop r without an answer (its client is gone). Frees r. */
void dmn_drop(dmn_srv *s, dmn_req *r);
/* After the loop ended: free r (a request of a job that came back too late), nothing sent. */
void dmn_req_free_lost(dmn_req *r);

/* A connection closed: its client marked gone; NULL when it had nothing in flight (it is then
 * forgotten), else the client, held: drop or mark its requests, then dmn_client_put. */
dmn_client *dmn_client_closed(dmn_srv *s, const dmn_chan_ops *ops, uint32_t conn);
void dmn_client_put(dmn_srv *s, dmn_client *c); /* one request fewer in flight; NULL allowed */
/* After the loop ended: the spare requests and every client. */
void dmn_requests_free(dmn_srv *s);

#endif
