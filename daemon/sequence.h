/* sequence.h: the sequences layer (sequence.c, loop thread): each model's live sequences by id,
 * their steps in arrival order, their state slots on the executor (exec_state.c), idle ends,
 * connection ends, reload ends, and the named answers for a sequence that is not live
 * (docs/PROTOCOL.md, "Sequences"). The batcher calls it; it never calls the batcher. */
#ifndef DMN_SEQUENCE_H
#define DMN_SEQUENCE_H

#include "types.h"
#include "util.h"

/* An infer request's sequence fields (sequence_id, sequence_start, sequence_end, sequence_state)
 * read and checked against m's current version: r->seq and its flags set (a new sequence made
 * for a start), or r->seq NULL for a plain request. Not OK: the status and err (unknown or ended
 * sequence, rows unlike its state's, max_sequences reached, a bad field). */
tsd_status dmn_seq_admit(dmn_srv *s, dmn_model *m, dmn_req *r, char *err, size_t errlen);
/* A request naming a sequence for a model without state: bad_request saying so (checked before
 * its inputs, which then lack the state). */
tsd_status dmn_seq_model_ok(const dmn_model *m, const dmn_req *r, char *err, size_t errlen);
/* The inputs of v that r must not carry (the state inputs, bit q for input q) when it names a
 * sequence (sequence_id); 0 for a plain request. */
uint64_t dmn_seq_implicit(const dmn_mver *v, const dmn_req *r);
/* r was not queued after all (refused): a sequence its admission made is forgotten. */
void dmn_seq_abandon(dmn_srv *s, dmn_req *r);
/* r entered, or left, its model's queue. Leaving may end and free its sequence. */
void dmn_seq_link(dmn_srv *s, dmn_req *r);
void dmn_seq_unlink(dmn_srv *s, dmn_req *r);
/* Whether r may go into the batch being formed: its sequence's oldest step, none running. When r's
 * sequence was ended meanwhile, false with *why its reason (then answer it sequence_ended). */
bool dmn_seq_ready(const dmn_req *r, const char **why);
/* r goes into a batch (before it leaves the queue): its slot set, its sequence running. */
void dmn_seq_dispatched(dmn_srv *s, dmn_req *r);
/* r's batch came back: its sequence may take its next step (or end). */
void dmn_seq_done(dmn_srv *s, dmn_req *r);
/* End m's sequences idle longer than their limit; the next idle end into *next (ns). */
void dmn_seqs_sweep(dmn_srv *s, dmn_model *m, uint64_t now, uint64_t *next);
/* A connection closed: the sequences it started end (unless their model lets them outlive it). */
void dmn_seqs_closed(dmn_srv *s, const dmn_chan_ops *ops, uint32_t conn);
/* m's version changed or m was unloaded: every sequence ends with why. */
void dmn_seqs_reset(dmn_srv *s, dmn_model *m, const char *why);
/* m's sequences as a stats object (live, max, started, ended, idle_ended), or NULL when none. */
cJSON *dmn_seqs_json(const dmn_model *m);
/* After the loop ended: m's table, and the sequences left. */
void dmn_seqs_free(dmn_model *m);

#endif
