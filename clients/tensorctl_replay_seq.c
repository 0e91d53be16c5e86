/* tensorctl_replay_seq.c: replay's sequence steps (log lines with a sequence_id): each a request
 * of its own, sent in log order per sequence, chunk after chunk (a turn passed from each chunk
 * to the next), steps of different sequences in flight together on the worker's connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorctl_replay.h"

#define SEQ_WINDOW   32 /* steps in flight per worker: under the daemon's client_inflight_max (64) */
#define SEQ_NAME_MAX 128

bool tctl_seq_key(tctl_span id, char *key, char *err, size_t errlen)
{
	cJSON *j = cJSON_ParseWithLength(id.p, id.n);
	bool ok = false;
	if (cJSON_IsString(j)) {
		size_t n = strlen(j->valuestring);
		if ((ok = n >= 1 && n <= SEQ_NAME_MAX))
			snprintf(key, TCTL_SEQ_KEY, "s%s", j->valuestring);
	} else if (cJSON_IsNumber(j)) {
		double v = j->valuedouble;
		if ((ok = v >= 1 && v <= 9007199254740992.0 && v == (double)(long long)v))
			snprintf(key, TCTL_SEQ_KEY, "n%lld", (long long)v);
	}
	cJSON_Delete(j);
	if (!ok)
		snprintf(err, errlen,
			 "sequence_id: an integer in [1, 2^53] or a string of 1 to %d bytes",
			 SEQ_NAME_MAX);
	return ok;
}

/* ---- the turn: chunk i's steps go once every chunk before it has had its answers ---- */

static void wait_turn(tctl_replay *rp, const tctl_chunk *ck)
{
	pthread_mutex_lock(&rp->mu);
	while (rp->seq_turn != ck->index)
		pthread_cond_wait(&rp->seq, &rp->mu);
	pthread_mutex_unlock(&rp->mu);
}

/* ck is done with its steps: the turn moves past it and every later chunk already done. */
static void pass_turn(tctl_replay *rp, tctl_chunk *ck)
{
	pthread_mutex_lock(&rp->mu);
	ck->seq_done = true;
	while (rp->seq_turn < rp->next_fill && rp->slots[rp->seq_turn % rp->nslots].seq_done)
		rp->seq_turn++;
	pthread_cond_broadcast(&rp->seq);
	pthread_mutex_unlock(&rp->mu);
}

/* ---- the steps ---- */

static tsd_status submit(tctl_worker *w, tctl_run *u)
{
	tsd_tensor ts[TCTL_MAX_TENSORS];
	uint8_t *tmp[TCTL_MAX_TENSORS] = {0};
	cJSON *h = tctl_run_header(w->rp, u);
	int n = h ? tctl_run_tensors(u, ts, tmp) : -1;
	tsd_status s =
		n < 0 ? TSD_OUT_OF_MEMORY : tsd_client_submit(w->c, h, ts, n, NULL, NULL, &u->call);
	cJSON_Delete(h); /* the request is encoded by the submit */
	for (int i = 0; i < u->m->nin; i++)
		free(tmp[i]);
	return s;
}

/* Wait for u's answer. Busy is asked again at once, this being its sequence's only step in
 * flight (but not a start refused for max_sequences: the steps that would end others come
 * after it in the log). */
static void complete(tctl_worker *w, tctl_chunk *ck, tctl_run *u)
{
	tsd_status s;
	const char *why = NULL;
	for (int attempt = 0;; attempt++) {
		tsd_call_wait(u->call, -1);
		s = tsd_call_take(u->call, &u->reply);
		why = tsd_call_error(u->call);
		bool again = s == TSD_BUSY && attempt < 2000 && u->reply &&
			     !strstr(tsd_reply_error(u->reply), "max_sequences");
		if (!again)
			break;
		tsd_call_free(u->call);
		u->call = NULL;
		tsd_reply_free(u->reply);
		u->reply = NULL;
		struct timespec d = {0, (attempt < 10 ? 1 : 20) * 1000000L};
		nanosleep(&d, NULL);
		if ((s = submit(w, u)) != TSD_OK) {
			why = tsd_client_error(w->c);
			break;
		}
	}
	char msg[256];
	snprintf(msg, sizeof(msg), "%s", why ? why : "no reply");
	tsd_call_free(u->call);
	u->call = NULL;
	tctl_run_finish(u, s, msg, ck);
}

/* The chunk's steps in order: one per sequence in flight, up to SEQ_WINDOW of them. */
static void send_steps(tctl_worker *w, tctl_chunk *ck, int nruns)
{
	tctl_run *fifo[SEQ_WINDOW];
	int head = 0, n = 0;
	for (int r = 0; r < nruns && !ck->fatal; r++) {
		tctl_run *u = &w->runs[r];
		if (!u->seq_key[0])
			continue;
		for (;;) { /* room, and no step of its sequence in flight */
			bool clash = false;
			for (int k = 0; k < n && !clash; k++)
				clash = !strcmp(fifo[(head + k) % SEQ_WINDOW]->seq_key, u->seq_key);
			if (!clash && n < SEQ_WINDOW)
				break;
			complete(w, ck, fifo[head]);
			head = (head + 1) % SEQ_WINDOW;
			n--;
		}
		if (ck->fatal)
			break;
		tsd_status s = submit(w, u);
		if (s != TSD_OK) { /* nothing was sent */
			tctl_run_finish(u, s, tsd_client_error(w->c), ck);
			continue;
		}
		fifo[(head + n++) % SEQ_WINDOW] = u;
	}
	for (; n; n--, head = (head + 1) % SEQ_WINDOW)
		complete(w, ck, fifo[head]);
}

void tctl_seq_chunk(tctl_worker *w, tctl_chunk *ck, int nruns, bool skip)
{
	bool any = false;
	for (int r = 0; r < nruns && !any; r++)
		any = w->runs[r].seq_key[0] != '\0';
	if (any && !skip) {
		wait_turn(w->rp, ck);
		send_steps(w, ck, nruns);
	}
	pass_turn(w->rp, ck);
}
