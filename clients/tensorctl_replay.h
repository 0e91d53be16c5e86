/* tensorctl_replay.h: what replay's pipeline (tensorctl_replay.c: files, the ordered writer)
 * and its workers (tensorctl_replay_batch.c: parse, request, format) share. */
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
} tctl_replay;

/* One request's rows: consecutive good lines of one model. */
typedef struct tctl_run {
	const tctl_model *m;
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

#endif
