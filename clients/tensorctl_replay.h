/* tensorctl_replay.h: what replay's pipeline (tensorctl_replay.c: files, the ordered writer),
 * its workers (tensorctl_replay_batch.c: parse, request, format) and their sequence steps
 * (tensorctl_replay_seq.c: in log order per sequence, chunk after chunk) share. */
#ifndef TCTL_REPLAY_H
#define TCTL_REPLAY_H

#include <pthread.h>

#include "tensorctl_jsonl.h"

enum { TCTL_SLOT_EMPTY, TCTL_SLOT_READY, TCTL_SLOT_TAKEN, TCTL_SLOT_DONE };

typedef struct tctl_chunk {
	const char *p, *end; /* the lines' text */
	size_t nlines;
	tctl_buf out; /* one line per input line */
	size_t nerr;
	uint8_t *lerr; /* per line: 1 when it is an error line */
	int state;
	int fatal; /* an exit status when a request got no reply: nothing of it is written */
	char why[256];
	size_t index;  /* its place among the chunks (the fill count) */
	bool seq_done; /* its sequence steps were answered (or it has none): the next may send */
} tctl_chunk;

typedef struct tctl_replay {
	const tctl_model *ms;
	int nms;
	int batch;	      /* --batch, 0: the model's */
	const char *priority; /* --priority (default bulk) */
	const char *url;
	int timeout_ms;
	tctl_chunk *slots;
	size_t nslots;
	size_t next_fill, next_take, next_write;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	bool quit;
	bool drop; /* stopping: chunks taken from now on are marked done without any work */
	size_t seq_turn;    /* the chunk whose sequence steps may go now (earlier ones are done) */
	pthread_cond_t seq; /* seq_turn moved */
} tctl_replay;

#define TCTL_SEQ_KEY 131 /* 'n' or 's', then the id's digits or its string (128 bytes at most) */

/* One request's rows: consecutive good lines of one model, or one line that is a step of a
 * sequence (seq_key set: sent alone, its state inputs left to the daemon). */
typedef struct tctl_run {
	const tctl_model *m;
	char seq_key[TCTL_SEQ_KEY]; /* "" for a batch of plain lines */
	bool seq_start, seq_end, seq_state;
	tsd_call *call; /* a sequence step in flight */
	size_t rows, cap;
	uint8_t *buf[TCTL_MAX_TENSORS]; /* [cap, row_numel] per input */
	tsd_reply *reply;
	const tsd_tensor *outs[TCTL_MAX_TENSORS];
	tsd_status st;
	char msg[256];
} tctl_run;

/* A line's fate: an error now (run < 0) or row `row` of run `run`. */
typedef struct tctl_rline {
	tctl_span id;
	int run;
	size_t row;
	tsd_status st;
	char msg[160];
} tctl_rline;

typedef struct tctl_worker {
	tctl_replay *rp;
	pthread_t th;
	tsd_client *c;
	tctl_rline *lines;
	tctl_run *runs;
	size_t cap; /* lines and runs */
	uint8_t *row[TCTL_MAX_TENSORS];
	uint8_t *scratch; /* a transposed input or a gathered output row */
	size_t scratch_cap;
} tctl_worker;

/* A worker thread: takes ready chunks, does them, marks them done, until rp->quit. */
void *tctl_replay_worker(void *arg);

/* A run's request header (verb, model, priority; a sequence step's fields); NULL: no memory. */
cJSON *tctl_run_header(const tctl_replay *rp, const tctl_run *u);
/* The inputs of u that go in its request (a sequence step's state inputs are the daemon's). */
uint64_t tctl_run_implicit(const tctl_run *u);
/* u's input tensors into ts (rows stacked at each input's batch axis; a transposed copy into
 * tmp[k], freed by the caller); the count, or -1 when out of memory. */
int tctl_run_tensors(tctl_run *u, tsd_tensor *ts, uint8_t **tmp);
/* u's request has been answered s (u->reply, NULL when no reply came: the chunk is fatal, why
 * saying what happened): its status, message and outputs (a sequence step's state outputs only
 * with sequence_state). */
void tctl_run_finish(tctl_run *u, tsd_status s, const char *why, tctl_chunk *ck);

/* A log line's sequence_id (its JSON text) as a key: 'n' and the integer's digits (1 to 2^53)
 * or 's' and the string (1 to 128 bytes); false with the reason in err. */
bool tctl_seq_key(tctl_span id, char *key, char *err, size_t errlen);
/* The chunk's sequence steps (runs with seq_key), in order, after every earlier chunk's: waits
 * its turn, sends them (one step per sequence in flight, others alongside), passes the turn.
 * With skip (the chunk failed or is dropped) it only passes the turn. */
void tctl_seq_chunk(tctl_worker *w, tctl_chunk *ck, int nruns, bool skip);

#endif
