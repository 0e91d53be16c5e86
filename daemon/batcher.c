/* batcher.c: what runs next on the executors (loop thread). Per model, infer requests wait in
 * one FIFO per priority; a batch is ready when it is full, when its oldest request has waited
 * the model's delay, or at once for realtime requests. Control jobs (loads, realize, train.step,
 * model.save) wait in one FIFO. The executor runs one job at a time, and the next is the ready
 * one of highest priority, oldest first: a realtime request waits behind at most the batch that
 * was running when it came. Realize jobs skip it: they go to the realize worker, one at a time,
 * in arrival order, each while its client's compile budget lasts (else `busy`). Expired
 * requests are answered `timeout` here, never computed.
 * The wake-up for the next deadline is a timerfd polled by the loop (microseconds; libuv's own
 * timers count milliseconds). A job the batcher runs on the loop itself, and a load it
 * abandons, go back the way every finished job does: the inbox's DONE lane. */
#include "batcher.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "sequence.h"
#include "shm_refs.h"

void dmn_dequeue(dmn_srv *s, dmn_req *r)
{
	dmn_model *m = r->model;
	if (r->prev)
		r->prev->next = r->next;
	else
		m->head[r->prio] = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		m->tail[r->prio] = r->prev;
	r->prev = r->next = NULL;
	m->queued--;
	m->queued_rows -= r->rows;
	if (r->seq)
		dmn_seq_unlink(s, r);
}

void dmn_enqueue(dmn_srv *s, dmn_model *m, dmn_req *r)
{
	m->c.requests++;
	if (r->latest_only) /* per client, or per sequence for a sequence's steps */
		for (int p = 0; p < DMN_NPRIO; p++)
			for (dmn_req *o = m->head[p], *n; o; o = n) {
				n = o->next;
				if (o->latest_only && (r->seq ? o->seq == r->seq && !o->seq_end : o->client == r->client && !o->seq)) {
					r->seq_start |= o->seq_start; /* the replaced step's start (a reset) still applies */
					dmn_dequeue(s, o);
					m->c.superseded++;
					dmn_fail(s, o, TSD_SUPERSEDED, "replaced by a newer latest_only request for %s",
						 m->name);
				}
			}
	if (m->queued >= m->cur->queue_max) {
		m->c.busy++;
		dmn_seq_abandon(s, r);
		dmn_fail(s, r, TSD_BUSY, "model %s has %d requests queued (queue_max)", m->name, m->queued);
		return;
	}
	r->model = m;
	r->prev = m->tail[r->prio];
	r->next = NULL;
	if (r->prev)
		r->prev->next = r;
	else
		m->head[r->prio] = r;
	m->tail[r->prio] = r;
	m->queued++;
	m->queued_rows += r->rows;
	if (r->seq)
		dmn_seq_link(s, r);
}

void dmn_ctl_push(dmn_srv *s, dmn_job *j)
{
	if (j->model && j->kind != DMN_J_LOAD)
		j->model->refs++;
	j->next = NULL;
	if (s->ctl_tail)
		s->ctl_tail->next = j;
	else
		s->ctl_head = j;
	s->ctl_tail = j;
	s->ctl_len++;
}

/* Take j out of the control queue (prev is the job before it, or NULL). */
static void ctl_unlink(dmn_srv *s, dmn_job *prev, dmn_job *j)
{
	if (prev)
		prev->next = j->next;
	else
		s->ctl_head = j->next;
	if (s->ctl_tail == j)
		s->ctl_tail = prev;
	j->next = NULL;
	s->ctl_len--;
}

/* A control job that will not run: its request answered (or dropped), the job freed. */
static void ctl_abandon(dmn_srv *s, dmn_job *j, tsd_status st, const char *msg)
{
	dmn_req *r = j->nreq ? j->reqs[0] : NULL;
	if (j->kind == DMN_J_LOAD) {
		j->st = st;
		snprintf(j->err, sizeof(j->err), "%s", msg);
		dmn_inbox_deliver(s->inbox, DMN_LANE_DONE, &j->in); /* a failed load: the models layer's bookkeeping and the reply */
		return;
	}
	j->nreq = 0;
	if (r && r->client && r->client->gone)
		dmn_drop(s, r);
	else if (r)
		dmn_fail(s, r, st, "%s", msg);
	if (j->model)
		dmn_model_release(s, j->model);
	dmn_job_free(j);
}

/* A train.step's request checked again when its model was replaced while it waited (the new
 * version may not train, or take other inputs): TSD_OK, or why not into why. */
static tsd_status train_recheck(dmn_job *j, char *why, size_t len)
{
	const dmn_mver *v = j->model->cur;
	dmn_req *r = j->reqs[0];
	if (r->ver == v->version)
		return TSD_OK;
	if (!v->trainable) {
		snprintf(why, len, "the model was replaced while this waited, by a version loaded without \"train\"");
		return TSD_BAD_REQUEST;
	}
	char err[200];
	int64_t rows;
	tsd_status st = dmn_check_inputs(v, &r->pm, true, 0, &rows, err, sizeof(err));
	if (st != TSD_OK) {
		snprintf(why, len, "the model was replaced while this waited: %s", err);
		return st;
	}
	r->ver = v->version;
	r->rows = rows;
	return TSD_OK;
}

void dmn_flush_queues(dmn_srv *s, dmn_model *only, tsd_status st, const char *msg)
{
	for (int i = 0; i < s->nmodels; i++) {
		dmn_model *m = s->models[i];
		if (only && m != only)
			continue;
		for (int p = 0; p < DMN_NPRIO; p++)
			while (m->head[p]) {
				dmn_req *r = m->head[p];
				dmn_dequeue(s, r);
				m->c.cancelled += st == TSD_CANCELLED;
				dmn_fail(s, r, st, "%s", msg);
			}
	}
	for (dmn_job *j = s->ctl_head, *prev = NULL, *n; j; j = n) {
		n = j->next;
		if (only && j->model != only) {
			prev = j;
			continue;
		}
		ctl_unlink(s, prev, j);
		ctl_abandon(s, j, st, msg);
	}
}

void dmn_mark_gone(dmn_srv *s, dmn_client *c)
{
	dmn_job *run[2] = {s->cur_job, s->rz_job};
	for (int i = 0; i < 2; i++)
		for (int k = 0; run[i] && k < run[i]->nreq; k++)
			if (run[i]->reqs[k]->client == c)
				atomic_store(&run[i]->reqs[k]->gone, true);
}

/* ---- realize: each client's compile budget, the realize worker's queue ---- */

/* c's bucket refilled to now: realize_compiles_per_s a second, at most realize_compile_burst. */
static void budget_refill(const dmn_srv *s, dmn_client *c, uint64_t now)
{
	double burst = (double)s->cfg.realize_compile_burst;
	if (!c->rz_at)
		c->rz_tokens = burst;
	else if (now > c->rz_at)
		c->rz_tokens = fmin(burst, c->rz_tokens + s->cfg.realize_compiles_per_s * (double)(now - c->rz_at) / 1e9);
	c->rz_at = now;
}

bool dmn_realize_budget(dmn_srv *s, dmn_req *r)
{
	dmn_client *c = r->client;
	if (!c || s->cfg.realize_compiles_per_s <= 0)
		return true;
	budget_refill(s, c, eng_now_ns());
	if (c->rz_tokens >= 1)
		return true;
	s->realize_over_budget++;
	dmn_fail(s, r, TSD_BUSY,
		 "realize: this client's compile budget is spent (realize_compiles_per_s %g, realize_compile_burst %lld); "
		 "one compile is back in %.0f ms",
		 s->cfg.realize_compiles_per_s, (long long)s->cfg.realize_compile_burst,
		 ceil((1 - c->rz_tokens) / s->cfg.realize_compiles_per_s * 1e3));
	return false;
}

/* A realize job came back: what it compiled is taken from its client's budget. */
static void budget_charge(dmn_srv *s, dmn_job *j)
{
	dmn_client *c = j->nreq ? j->reqs[0]->client : NULL;
	if (!c || s->cfg.realize_compiles_per_s <= 0 || !j->compiles)
		return;
	budget_refill(s, c, eng_now_ns());
	c->rz_tokens -= (double)j->compiles;
}

/* The first control job for the realize worker (realize true) or the models' executor; its
 * predecessor in the queue into *prev. */
static dmn_job *ctl_first(dmn_srv *s, bool realize, dmn_job **prev)
{
	*prev = NULL;
	for (dmn_job *j = s->ctl_head; j; *prev = j, j = j->next)
		if ((j->kind == DMN_J_REALIZE) == realize)
			return j;
	return NULL;
}

/* Hand the oldest realize job to the realize worker when it is idle; a job whose client's
 * budget is spent (by its earlier ones, since it was queued) is answered busy instead. */
static void dispatch_realize(dmn_srv *s, uint64_t now)
{
	dmn_job *prev, *j;
	while (!s->rz_job && (j = ctl_first(s, true, &prev))) {
		ctl_unlink(s, prev, j);
		if (!dmn_realize_budget(s, j->reqs[0])) {
			j->nreq = 0; /* answered */
			dmn_job_free(j);
			continue;
		}
		j->reqs[0]->t_dispatch = now;
		s->rz_job = j;
		dmn_exec_push(s, j);
	}
}

void dmn_on_closed(dmn_srv *s, const dmn_chan_ops *ops, uint32_t conn)
{
	dmn_seqs_closed(s, ops, conn);
	dmn_client *c = dmn_client_closed(s, ops, conn);
	if (!c)
		return;
	/* queued requests are dropped now; running ones are marked, and a batch made only of
	 * them is cancelled by the executor's abort hook */
	for (int i = 0; i < s->nmodels; i++) {
		dmn_model *m = s->models[i];
		for (int p = 0; p < DMN_NPRIO; p++)
			for (dmn_req *r = m->head[p], *n; r; r = n) {
				n = r->next;
				if (r->client == c) {
					dmn_dequeue(s, r);
					m->c.cancelled++;
					dmn_drop(s, r);
				}
			}
	}
	dmn_mark_gone(s, c);
	dmn_client_put(s, c);
}

static bool expired(const dmn_req *r, uint64_t now)
{
	return r->deadline && now >= r->deadline;
}

/* Answer the queued requests whose deadline passed; the earliest deadline left into *next. */
static void expire(dmn_srv *s, uint64_t now, uint64_t *next)
{
	for (int i = 0; i < s->nmodels; i++) {
		dmn_model *m = s->models[i];
		for (int p = 0; p < DMN_NPRIO && m->queued; p++)
			for (dmn_req *r = m->head[p], *n; r; r = n) {
				n = r->next;
				if (expired(r, now)) {
					dmn_dequeue(s, r);
					m->c.timeouts++;
					dmn_fail(s, r, TSD_TIMEOUT, "timed out after %.3f ms in the queue of %s",
						 (double)(now - r->t_arrive) / 1e6, m->name);
				} else if (r->deadline && r->deadline < *next) {
					*next = r->deadline;
				}
			}
	}
	for (dmn_job *j = s->ctl_head, *prev = NULL, *n; j; j = n) {
		n = j->next;
		dmn_req *r = j->nreq ? j->reqs[0] : NULL;
		bool gone = r && r->client && r->client->gone && j->kind != DMN_J_LOAD;
		if (r && (gone || expired(r, now))) {
			ctl_unlink(s, prev, j);
			ctl_abandon(s, j, TSD_TIMEOUT, "timed out in the queue");
			continue;
		}
		if (r && r->deadline && r->deadline < *next)
			*next = r->deadline;
		prev = j;
	}
}

/* The oldest request of m's queues and the head of the most urgent non-empty one. */
static dmn_req *model_head(const dmn_model *m, uint64_t *oldest)
{
	dmn_req *h = NULL;
	*oldest = UINT64_MAX;
	for (int p = 0; p < DMN_NPRIO; p++)
		if (m->head[p]) {
			if (!h)
				h = m->head[p];
			if (m->head[p]->t_arrive < *oldest)
				*oldest = m->head[p]->t_arrive;
		}
	return h;
}

static int bucket_for(const dmn_mver *v, int64_t rows)
{
	for (int k = 0; k < v->nbuckets; k++)
		if (v->buckets[k] >= rows)
			return v->buckets[k];
	return v->batch_max;
}

/* Take a batch from m's queues: priority order, oldest first, while the rows fit. */
static dmn_job *form_batch(dmn_srv *s, dmn_model *m, uint64_t now)
{
	dmn_mver *v = m->cur;
	dmn_job *j = calloc(1, sizeof(*j));
	dmn_req **reqs = calloc((size_t)v->batch_max, sizeof(*reqs));
	if (!j || !reqs) {
		free(j);
		free(reqs);
		return NULL;
	}
	int64_t rows = 0;
	bool full = false;
	int kind = -1; /* a batch is all sequence steps (1) or none (0): the state comes from the slots or the requests */
	for (int p = 0; p < DMN_NPRIO && !full; p++)
		for (dmn_req *r = m->head[p], *n; r && !full; r = n) {
			n = r->next;
			const char *why;
			if (!dmn_seq_ready(r, &why)) {
				if (why) { /* its sequence was ended while this waited */
					char msg[256];
					snprintf(msg, sizeof(msg), "sequence of model \"%s\" %s", m->name, why);
					dmn_dequeue(s, r);
					m->c.errors++;
					dmn_fail(s, r, TSD_SEQUENCE_ENDED, "%s", msg);
				}
				continue; /* a later step of a sequence: after its earlier one */
			}
			if (kind >= 0 && kind != (r->seq != NULL))
				continue;
			if (r->ver != v->version) { /* queued before a swap: check against this version */
				char err[256];
				int64_t b;
				tsd_status st = dmn_check_inputs(v, &r->pm, false, dmn_seq_implicit(v, r), &b, err, sizeof(err));
				if (st == TSD_OK)
					st = dmn_shm_outputs(r, v, err, sizeof(err));
				if (st != TSD_OK) {
					dmn_dequeue(s, r);
					m->c.errors++;
					dmn_fail(s, r, st, "the model was replaced while this waited: %s", err);
					continue;
				}
				r->ver = v->version;
			}
			if (rows + r->rows > v->batch_max) {
				full = true;
				break;
			}
			if (r->seq)
				dmn_seq_dispatched(s, r); /* before it leaves the queue: its sequence is running */
			kind = r->seq != NULL;
			dmn_dequeue(s, r);
			r->t_dispatch = now;
			reqs[j->nreq++] = r;
			rows += r->rows;
			full = rows == v->batch_max;
		}
	if (!j->nreq) {
		free(j);
		free(reqs);
		return NULL;
	}
	j->kind = DMN_J_INFER;
	j->srv = s;
	j->model = m;
	j->ver = v;
	j->reqs = reqs;
	j->bucket = v->batched ? bucket_for(v, rows) : 1;
	j->prio = reqs[0]->prio;
	m->refs++;
	return j;
}

static void arm(dmn_srv *s, uint64_t at)
{
	if (at == UINT64_MAX) {
		if (s->timer_at) {
			struct itimerspec off = {0};
			timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &off, NULL);
			s->timer_at = 0;
		}
		return;
	}
	if (s->timer_at == at)
		return;
	struct itimerspec it = {.it_value = {.tv_sec = (time_t)(at / 1000000000u), .tv_nsec = (long)(at % 1000000000u)}};
	if (!it.it_value.tv_sec && !it.it_value.tv_nsec)
		it.it_value.tv_nsec = 1;
	timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &it, NULL);
	s->timer_at = at;
}

/* A job small enough to run on the loop's thread (config loop_run_max_us): a realtime infer
 * whose bucket took at most that long the last time it ran (never before it has been timed).
 * It saves the hand-over to the executor and back, two thread wake-ups: most of a tiny model's
 * round trip; the loop is blocked no longer than about one such wake-up. */
static bool run_here_ok(const dmn_srv *s, const dmn_job *j)
{
	if (j->kind != DMN_J_INFER || j->prio != DMN_PRIO_REALTIME || !j->ver || !s->cfg.loop_run_max_us)
		return false;
	for (int k = 0; k < j->ver->nbuckets; k++)
		if (j->ver->buckets[k] == j->bucket)
			return j->ver->bucket_ns[k] && j->ver->bucket_ns[k] <= (uint64_t)s->cfg.loop_run_max_us * 1000u;
	return false;
}

void dmn_dispatch(dmn_srv *s)
{
	uint64_t now = eng_now_ns(), next = UINT64_MAX, ran_here_ns = 0;
	expire(s, now, &next);
	for (int i = 0; i < s->nmodels; i++)
		if (s->models[i]->seqs)
			dmn_seqs_sweep(s, s->models[i], now, &next);
	dispatch_realize(s, now);
	while (!s->exec_busy) {
		dmn_model *best = NULL;
		int best_prio = DMN_NPRIO;
		uint64_t best_t = UINT64_MAX;
		for (int i = 0; i < s->nmodels; i++) {
			dmn_model *m = s->models[i];
			uint64_t oldest;
			dmn_req *h = m->queued && m->cur ? model_head(m, &oldest) : NULL;
			if (!h)
				continue;
			dmn_mver *v = m->cur;
			uint64_t due = oldest + (uint64_t)v->delay_us * 1000u;
			bool ready = h->prio == DMN_PRIO_REALTIME || !v->batched || m->queued_rows >= v->batch_max ||
				     now >= due || s->draining;
			if (!ready) {
				if (due < next)
					next = due;
				continue;
			}
			if (h->prio < best_prio || (h->prio == best_prio && oldest < best_t)) {
				best = m;
				best_prio = h->prio;
				best_t = oldest;
			}
		}
		dmn_job *j = NULL, *cprev;
		dmn_job *c = ctl_first(s, false, &cprev);
		if (c && (c->prio < best_prio || (c->prio == best_prio && c->t_arrive <= best_t))) {
			ctl_unlink(s, cprev, c);
			if (c->kind != DMN_J_LOAD && c->model && (c->model->removed || !c->model->cur)) {
				ctl_abandon(s, c, TSD_UNKNOWN_MODEL, "the model was unloaded");
				continue;
			}
			char why[256];
			tsd_status st;
			if (c->kind == DMN_J_TRAIN && (st = train_recheck(c, why, sizeof(why))) != TSD_OK) {
				ctl_abandon(s, c, st, why);
				continue;
			}
			if (c->kind == DMN_J_TRAIN || c->kind == DMN_J_SAVE)
				c->ver = c->model->cur;
			j = c;
		} else if (best) {
			j = form_batch(s, best, now);
			if (!j) {
				if (best->queued) { /* out of memory: try again shortly */
					next = now + 1000000u;
					break;
				}
				continue; /* every request in it failed its check */
			}
		} else {
			break;
		}
		for (int k = 0; k < j->nreq; k++)
			j->reqs[k]->t_dispatch = now;
		s->exec_busy = true;
		s->cur_job = j;
		s->job_t0 = now;
		/* at most about loop_run_max_us of such runs per wake-up: the loop has its inbox to see to */
		if (ran_here_ns <= (uint64_t)s->cfg.loop_run_max_us * 1000u && run_here_ok(s, j) && dmn_exec_run_here(s, j)) {
			j->model->c.loop_batches++;
			dmn_inbox_deliver(s->inbox, DMN_LANE_DONE, &j->in); /* as if it had come back from the executor */
			uint64_t t = eng_now_ns();
			ran_here_ns += t - now;
			now = t;
			continue;
		}
		dmn_exec_push(s, j);
	}
	arm(s, next);
}

void dmn_batch_done(dmn_srv *s, dmn_job *j)
{
	dmn_model *m = j->model;
	uint64_t now = eng_now_ns();
	if (j->kind == DMN_J_INFER) {
		int64_t rows = 0;
		for (int k = 0; k < j->nreq; k++)
			rows += j->reqs[k]->rows;
		m->c.batches++;
		m->c.rows += (uint64_t)rows;
		for (int k = 0; k < j->ver->nbuckets && j->t_end > j->t_start; k++)
			if (j->ver->buckets[k] == j->bucket)
				j->ver->bucket_ns[k] = j->t_end - j->t_start;
		m->c.padded_rows += (uint64_t)(j->bucket - rows);
		dmn_hist_observe(&s->hist.batch_size, (double)rows);
		dmn_hist_observe(&m->hist.batch_size, (double)rows);
	} else if (j->kind == DMN_J_REALIZE) {
		if (s->rz_job == j)
			s->rz_job = NULL;
		budget_charge(s, j);
	} else if (j->kind == DMN_J_TRAIN && j->st == TSD_OK) {
		m->c.train_steps++;
		j->ver->steps++; /* the version's own count (model.list "train_steps"; the executor's step) */
	}
	if (j->t_end > j->t_start) {
		dmn_hist_observe(&s->hist.compute_us, (double)(j->t_end - j->t_start) / 1e3);
		if (m)
			dmn_hist_observe(&m->hist.compute_us, (double)(j->t_end - j->t_start) / 1e3);
	}
	for (int k = 0; k < j->nreq; k++) {
		dmn_req *r = j->reqs[k];
		if (j->kind == DMN_J_INFER) {
			if (r->st == TSD_OK)
				m->c.ok++;
			else if (r->st == TSD_TIMEOUT)
				m->c.timeouts++;
			else if (r->st == TSD_CANCELLED)
				m->c.cancelled++;
			else
				m->c.errors++;
		}
		if (j->kind == DMN_J_INFER)
			dmn_seq_done(s, r);
		dmn_hist_observe(&s->hist.queue_us, (double)(r->t_dispatch - r->t_arrive) / 1e3);
		dmn_hist_observe(&s->hist.total_us, (double)(now - r->t_arrive) / 1e3);
		if (m) {
			dmn_hist_observe(&m->hist.queue_us, (double)(r->t_dispatch - r->t_arrive) / 1e3);
			dmn_hist_observe(&m->hist.total_us, (double)(now - r->t_arrive) / 1e3);
		}
		dmn_finish(s, r);
	}
	j->nreq = 0;
}

void dmn_batcher_free(dmn_srv *s)
{
	for (dmn_job *j = s->ctl_head, *n; j; j = n) { /* never ran (a failed start) */
		n = j->next;
		if (j->kind == DMN_J_LOAD)
			dmn_mver_free(j->ver);
		dmn_job_free(j);
	}
	s->ctl_head = s->ctl_tail = NULL;
	s->ctl_len = 0;
}
