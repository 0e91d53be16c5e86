/* tensorctl_replay_batch.c: replay's worker threads: a chunk of log lines parsed into batches
 * (consecutive lines of one model), each sent as one bulk infer, and sequence steps (one line
 * each, sent by tensorctl_replay_seq.c), the rows formatted back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorctl_replay.h"

static bool scratch_fit(tctl_worker *w, size_t n)
{
	if (n <= w->scratch_cap)
		return true;
	uint8_t *p = realloc(w->scratch, n);
	if (!p)
		return false;
	w->scratch = p;
	w->scratch_cap = n;
	return true;
}

static size_t run_cap(const tctl_replay *rp, const tctl_model *m, size_t left)
{
	size_t cap = !m->batched			     ? 1
		     : rp->batch && rp->batch < m->batch_max ? (size_t)rp->batch
							     : (size_t)m->batch_max;
	return cap < left ? cap : left;
}

uint64_t tctl_run_implicit(const tctl_run *u)
{
	return u->seq_key[0] ? u->m->state_in : 0;
}

int tctl_run_tensors(tctl_run *u, tsd_tensor *ts, uint8_t **tmp)
{
	const tctl_model *m = u->m;
	uint64_t implicit = tctl_run_implicit(u);
	int n = 0;
	for (int i = 0; i < m->nin; i++) {
		const tctl_port *pt = &m->in[i];
		if (implicit >> i & 1)
			continue;
		size_t es = tsd_dtype_size(pt->dtype);
		tsd_tensor *t = &ts[n++];
		*t = (tsd_tensor){.name = pt->name, .dtype = pt->dtype, .ndim = pt->ndim};
		memcpy(t->shape, pt->shape, sizeof(pt->shape));
		t->data = u->buf[i];
		if (pt->batch_axis < 0)
			continue;
		t->shape[pt->batch_axis] = (int64_t)u->rows;
		if (pt->outer == 1)
			continue;
		/* [rows, outer, inner] -> [outer, rows, inner] */
		uint8_t *x = malloc(u->rows * pt->row_numel * es + 1);
		if (!x)
			return -1;
		for (size_t r = 0; r < u->rows; r++)
			for (size_t o = 0; o < pt->outer; o++)
				memcpy(x + (o * u->rows + r) * pt->inner * es,
				       u->buf[i] + (r * pt->row_numel + o * pt->inner) * es,
				       pt->inner * es);
		tmp[i] = x;
		t->data = x;
	}
	return n;
}

cJSON *tctl_run_header(const tctl_replay *rp, const tctl_run *u)
{
	cJSON *h = cJSON_CreateObject();
	bool ok = h && cJSON_AddStringToObject(h, "verb", "infer") &&
		  cJSON_AddStringToObject(h, "model", u->m->name) &&
		  cJSON_AddStringToObject(h, "priority", rp->priority);
	const char *id = u->seq_key + 1;
	if (ok && u->seq_key[0])
		ok = (u->seq_key[0] == 'n'
			      ? cJSON_AddNumberToObject(h, "sequence_id", strtod(id, NULL)) != NULL
			      : cJSON_AddStringToObject(h, "sequence_id", id) != NULL) &&
		     (!u->seq_start || cJSON_AddTrueToObject(h, "sequence_start")) &&
		     (!u->seq_end || cJSON_AddTrueToObject(h, "sequence_end")) &&
		     (!u->seq_state || cJSON_AddTrueToObject(h, "sequence_state"));
	if (!ok) {
		cJSON_Delete(h);
		return NULL;
	}
	return h;
}

void tctl_run_finish(tctl_run *u, tsd_status s, const char *why, tctl_chunk *ck)
{
	const tctl_model *m = u->m;
	u->st = s;
	if (!u->reply && s != TSD_OUT_OF_MEMORY) {
		ck->fatal = tctl_exit_for(s, false);
		snprintf(ck->why, sizeof(ck->why), "%s: %s", tsd_status_name(s),
			 why ? why : "no reply");
		return;
	}
	if (s != TSD_OK) {
		snprintf(u->msg, sizeof(u->msg), "%s",
			 u->reply ? tsd_reply_error(u->reply) : "out of memory");
		return;
	}
	/* a step's state outputs stay in the daemon unless asked for */
	uint64_t hidden = u->seq_key[0] && !u->seq_state ? m->state_out : 0;
	for (int o = 0; o < m->nout; o++) {
		const tctl_port *pt = &m->out[o];
		const tsd_tensor *t = tsd_reply_find(u->reply, pt->name);
		u->outs[o] = NULL;
		if (!t && hidden >> o & 1)
			continue;
		bool ok = t && t->dtype == pt->dtype && t->ndim == pt->ndim &&
			  (pt->batch_axis < 0 || t->shape[pt->batch_axis] == (int64_t)u->rows);
		for (int d = 0; ok && d < pt->ndim && pt->batch_axis >= 0; d++)
			ok = d == pt->batch_axis || t->shape[d] == pt->shape[d];
		if (!ok) {
			u->st = TSD_INTERNAL;
			snprintf(u->msg, sizeof(u->msg),
				 "output %s: not as model.list describes it", pt->name);
			return;
		}
		u->outs[o] = t;
	}
}

/* Send run u (a batch of plain lines) and wait for its reply; busy is retried (bulk yields). */
static void run_send(tctl_worker *w, tctl_run *u, tctl_chunk *ck)
{
	tsd_tensor ts[TCTL_MAX_TENSORS];
	uint8_t *tmp[TCTL_MAX_TENSORS] = {0};
	cJSON *h = tctl_run_header(w->rp, u);
	int n = h ? tctl_run_tensors(u, ts, tmp) : -1;
	tsd_status s = TSD_OUT_OF_MEMORY;
	for (int attempt = 0; n >= 0; attempt++) {
		s = tsd_client_call(w->c, h, ts, n, &u->reply);
		if (s != TSD_BUSY || attempt == 2000)
			break;
		tsd_reply_free(u->reply);
		u->reply = NULL;
		struct timespec d = {0, (attempt < 10 ? 1 : 20) * 1000000L};
		nanosleep(&d, NULL);
	}
	cJSON_Delete(h);
	for (int i = 0; i < u->m->nin; i++)
		free(tmp[i]);
	tctl_run_finish(u, s, tsd_client_error(w->c), ck);
}

/* Line l's output line appended to ck->out. */
static void line_format(tctl_worker *w, tctl_chunk *ck, const tctl_rline *l)
{
	tctl_buf *b = &ck->out;
	const tctl_run *u = l->run >= 0 ? &w->runs[l->run] : NULL;
	tsd_status st = u ? u->st : l->st;
	tctl_buf_put(b, "{", 1);
	if (l->id.p) {
		tctl_buf_put(b, "\"id\":", 5);
		tctl_buf_put(b, l->id.p, l->id.n);
		tctl_buf_put(b, ",", 1);
	}
	if (st != TSD_OK) {
		ck->nerr++;
		ck->lerr[l - w->lines] = 1;
		tctl_buf_puts(b, "\"error\":\"");
		tctl_buf_puts(b, tsd_status_name(st));
		tctl_buf_puts(b, "\",\"message\":");
		tctl_jsonl_string(b, u ? u->msg : l->msg);
		tctl_buf_put(b, "}\n", 2);
		return;
	}
	tctl_buf_puts(b, "\"outputs\":{");
	bool first = true;
	for (int o = 0; o < u->m->nout; o++) {
		const tctl_port *pt = &u->m->out[o];
		const tsd_tensor *t = u->outs[o];
		if (!t) /* a sequence step's state, kept by the daemon */
			continue;
		size_t es = tsd_dtype_size(t->dtype);
		int64_t dims[TSD_MAX_DIMS];
		int nd = 0;
		for (int d = 0; d < t->ndim; d++)
			if (d != pt->batch_axis)
				dims[nd++] = t->shape[d];
		const uint8_t *src = t->data;
		if (pt->batch_axis >= 0 && pt->outer == 1) {
			src += l->row * pt->inner * es;
		} else if (pt->batch_axis >= 0) {
			if (!scratch_fit(w, pt->row_numel * es)) {
				b->oom = true;
				return;
			}
			for (size_t x = 0; x < pt->outer; x++)
				memcpy(w->scratch + x * pt->inner * es,
				       src + (x * u->rows + l->row) * pt->inner * es,
				       pt->inner * es);
			src = w->scratch;
		}
		if (!first)
			tctl_buf_put(b, ",", 1);
		first = false;
		tctl_jsonl_string(b, pt->name);
		tctl_buf_put(b, ":", 1);
		tctl_jsonl_row(b, t->dtype, src, dims, nd);
	}
	tctl_buf_put(b, "}}\n", 3);
}

/* The row parsed into w->row appended to run u as its row u->rows (its buffers made with the
 * first row; the daemon's inputs of a sequence step have none). */
static void run_add_row(tctl_worker *w, tctl_chunk *ck, tctl_run *u)
{
	const tctl_model *m = u->m;
	uint64_t implicit = tctl_run_implicit(u);
	for (int i = 0; i < m->nin && !ck->out.oom; i++) {
		size_t rb = m->in[i].row_numel * tsd_dtype_size(m->in[i].dtype);
		if (implicit >> i & 1)
			continue;
		if (!u->buf[i] && !(u->buf[i] = malloc(u->cap * rb + 1))) {
			ck->out.oom = true;
			return;
		}
		memcpy(u->buf[i] + u->rows * rb, w->row[i], rb);
	}
}

/* Parse, send and format one chunk: its batches of plain lines as they fill, then its sequence
 * steps when their turn comes. */
static void chunk_do(tctl_worker *w, tctl_chunk *ck)
{
	tctl_replay *rp = w->rp;
	int nruns = 0, cur = -1;
	const char *p = ck->p;
	char err[160], key[TCTL_SEQ_KEY];
	ck->out.n = 0;
	ck->out.oom = false;
	ck->nerr = 0;
	ck->fatal = 0;
	for (size_t k = 0; k < ck->nlines; k++) {
		const char *nl = memchr(p, '\n', (size_t)(ck->end - p));
		const char *e = nl ? nl : ck->end;
		tctl_rline *l = &w->lines[k];
		tctl_line ln;
		l->run = -1;
		l->id = (tctl_span){0};
		l->st = TSD_BAD_REQUEST;
		const tctl_model *m = NULL;
		if (!tctl_jsonl_scan(p, e, &ln, err, sizeof(err))) {
			snprintf(l->msg, sizeof(l->msg), "%s", err);
		} else if (l->id = ln.id,
			   !(m = tctl_model_find(rp->ms, rp->nms, ln.model.p, ln.model.n))) {
			l->st = TSD_UNKNOWN_MODEL;
			snprintf(l->msg, sizeof(l->msg), "model %.*s is not loaded",
				 (int)(ln.model.n < 64 ? ln.model.n : 64), ln.model.p);
		} else if (ln.seq_id.p && !tctl_seq_key(ln.seq_id, key, err, sizeof(err))) {
			snprintf(l->msg, sizeof(l->msg), "%s", err);
		} else if (!tctl_jsonl_inputs(ln.inputs, m, ln.seq_id.p ? m->state_in : 0,
					      (void *const *)w->row, err, sizeof(err))) {
			l->st = TSD_SHAPE_MISMATCH;
			snprintf(l->msg, sizeof(l->msg), "%s", err);
			if (strstr(err, "malformed") || strstr(err, "not an input") ||
			    strstr(err, "not a number") || strstr(err, "missing") ||
			    strstr(err, "twice") || strstr(err, "not a value") ||
			    strstr(err, "daemon holds"))
				l->st = TSD_BAD_REQUEST;
		} else if (ln.seq_id.p) { /* a sequence step: a run of its own, sent later */
			tctl_run *u = &w->runs[nruns];
			memset(u, 0, sizeof(*u));
			u->m = m;
			memcpy(u->seq_key, key, sizeof(key));
			u->seq_start = ln.seq_start;
			u->seq_end = ln.seq_end;
			u->seq_state = ln.seq_state;
			u->cap = 1;
			run_add_row(w, ck, u);
			u->rows = 1;
			l->run = nruns++;
			l->row = 0;
		} else {
			if (cur < 0 || w->runs[cur].m != m ||
			    w->runs[cur].rows == w->runs[cur].cap) {
				if (cur >= 0)
					run_send(w, &w->runs[cur], ck);
				tctl_run *u = &w->runs[cur = nruns++];
				memset(u, 0, sizeof(*u));
				u->m = m;
				u->cap = run_cap(rp, m, ck->nlines - k);
			}
			tctl_run *u = &w->runs[cur];
			l->run = cur;
			l->row = u->rows;
			run_add_row(w, ck, u);
			u->rows++;
		}
		p = nl ? nl + 1 : ck->end;
		if (ck->fatal || ck->out.oom)
			break;
	}
	if (cur >= 0 && !ck->fatal && !ck->out.oom)
		run_send(w, &w->runs[cur], ck);
	tctl_seq_chunk(w, ck, nruns, ck->fatal || ck->out.oom);
	memset(ck->lerr, 0, ck->nlines);
	for (size_t k = 0; k < ck->nlines && !ck->fatal && !ck->out.oom; k++)
		line_format(w, ck, &w->lines[k]);
	if (ck->out.oom && !ck->fatal) {
		ck->fatal = TCTL_EXIT_IO;
		snprintf(ck->why, sizeof(ck->why), "out of memory");
	}
	for (int r = 0; r < nruns; r++) {
		tsd_reply_free(w->runs[r].reply);
		for (int i = 0; i < w->runs[r].m->nin; i++)
			free(w->runs[r].buf[i]);
	}
}

void *tctl_replay_worker(void *arg)
{
	tctl_worker *w = arg;
	tctl_replay *rp = w->rp;
	pthread_mutex_lock(&rp->mu);
	for (;;) {
		while (!rp->quit && rp->next_take == rp->next_fill)
			pthread_cond_wait(&rp->work, &rp->mu);
		if (rp->quit)
			break;
		tctl_chunk *ck = &rp->slots[rp->next_take++ % rp->nslots];
		ck->state = TCTL_SLOT_TAKEN;
		bool drop = rp->drop;
		pthread_mutex_unlock(&rp->mu);
		if (drop) {
			ck->out.n = 0; /* the writer discards it */
			tctl_seq_chunk(w, ck, 0, true);
		} else if (w->c) {
			chunk_do(w, ck);
		} else {
			ck->fatal = TCTL_EXIT_TRANSPORT;
			snprintf(ck->why, sizeof(ck->why), "cannot connect to %s", rp->url);
			tctl_seq_chunk(w, ck, 0, true);
		}
		pthread_mutex_lock(&rp->mu);
		ck->state = TCTL_SLOT_DONE;
		pthread_cond_broadcast(&rp->done);
	}
	pthread_mutex_unlock(&rp->mu);
	return NULL;
}
