/* sequence.c: each model's live sequences (loop thread; see sequence.h). A sequence is found by
 * its id ("n:<number>" or "s:<string>" as the key), holds a state slot of its model's current
 * version, and queues its steps in arrival order (a step runs only when it is its sequence's
 * oldest, one step at a time). It ends by a step with sequence_end (the executor frees the slot
 * after that step), by being idle past max_sequence_idle_us, by its connection closing, or by a
 * reload or unload; the last three are "killed": the slot is freed on the executor at once
 * (a DMN_J_SEQFREE job), its queued steps are answered sequence_ended with the reason, and its
 * id is remembered a while (a small ring) so a late step is told why. */
#include "sequence.h"

#include "executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOMBS 64 /* ended ids remembered per model, for the reason in a late step's answer */

struct dmn_seq {
	char key[DMN_SEQ_ID_MAX + 3];
	dmn_seqs *t;       /* NULL once killed (detached from its table) */
	int slot;          /* -1 once released */
	int64_t rows;      /* its state's rows (set by each start) */
	const dmn_chan_ops *owner; /* the connection that started it, or NULL (it outlives connections) */
	uint32_t conn;
	bool open;         /* takes steps without sequence_start */
	bool running;      /* a step of it is in the executor's batch */
	bool state_live;   /* its slot holds state on the executor */
	bool killed;
	char why[160];     /* killed: the reason */
	int nq;            /* steps queued */
	dmn_req *qhead, *qtail;
	uint64_t last;     /* its last step's arrival or end (ns) */
	struct dmn_seq *hnext, *prev, *next; /* hash chain; least recently used first */
};

struct dmn_seqs {
	const dmn_mver *ver; /* the version its slots belong to */
	int cap, live, nfree;
	int *freeslots;
	int nbuckets;
	dmn_seq **hash;
	dmn_seq *lru, *mru;
	int *pending, npending; /* slots to free on the executor */
	struct {
		char key[DMN_SEQ_ID_MAX + 3];
		char why[160];
	} tomb[TOMBS];
	int tomb_at;
	uint64_t started, ended, idle_ended;
};

static uint32_t hash_key(const char *k)
{
	uint32_t h = 2166136261u;
	for (; *k; k++)
		h = (h ^ (uint8_t)*k) * 16777619u;
	return h;
}

static void table_free(dmn_seqs *t)
{
	if (!t)
		return;
	free(t->freeslots);
	free(t->hash);
	free(t->pending);
	free(t);
}

static dmn_seqs *table_new(const dmn_mver *v)
{
	dmn_seqs *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ver = v;
	t->cap = v->max_sequences;
	t->nbuckets = 16;
	while (t->nbuckets < t->cap && t->nbuckets < (1 << 20))
		t->nbuckets *= 2;
	t->freeslots = malloc((size_t)t->cap * sizeof(int));
	t->pending = malloc((size_t)t->cap * sizeof(int));
	t->hash = calloc((size_t)t->nbuckets, sizeof(*t->hash));
	if (!t->freeslots || !t->pending || !t->hash) {
		table_free(t);
		return NULL;
	}
	for (int k = 0; k < t->cap; k++)
		t->freeslots[k] = t->cap - 1 - k;
	t->nfree = t->cap;
	return t;
}

static dmn_seq **find_ref(dmn_seqs *t, const char *key)
{
	dmn_seq **p = &t->hash[hash_key(key) & (uint32_t)(t->nbuckets - 1)];
	while (*p && strcmp((*p)->key, key))
		p = &(*p)->hnext;
	return p;
}

static void lru_unlink(dmn_seqs *t, dmn_seq *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		t->lru = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		t->mru = q->prev;
	q->prev = q->next = NULL;
}

static void touch(dmn_seq *q, uint64_t now)
{
	dmn_seqs *t = q->t;
	q->last = now;
	if (!t || t->mru == q)
		return;
	if (q->prev || q->next || t->lru == q) /* in the list (a new one is not yet) */
		lru_unlink(t, q);
	q->prev = t->mru;
	if (t->mru)
		t->mru->next = q;
	else
		t->lru = q;
	t->mru = q;
}

static void tomb_add(dmn_seqs *t, const char *key, const char *why)
{
	snprintf(t->tomb[t->tomb_at].key, sizeof(t->tomb[0].key), "%s", key);
	snprintf(t->tomb[t->tomb_at].why, sizeof(t->tomb[0].why), "%s", why);
	t->tomb_at = (t->tomb_at + 1) % TOMBS;
}

static const char *tomb_find(const dmn_seqs *t, const char *key)
{
	for (int i = 1; t && i <= TOMBS; i++) {
		int k = (t->tomb_at - i + TOMBS) % TOMBS;
		if (t->tomb[k].key[0] && !strcmp(t->tomb[k].key, key))
			return t->tomb[k].why;
	}
	return NULL;
}

/* Free the slots collected in t->pending on the executor, in one job. */
static void flush_pending(dmn_srv *s, dmn_seqs *t)
{
	if (!t->npending)
		return;
	dmn_job *j = calloc(1, sizeof(*j));
	int *slots = malloc((size_t)t->npending * sizeof(int));
	if (!j || !slots) { /* the slots' state stays until each is started again (a start replaces it) */
		free(j);
		free(slots);
		dmn_log(&s->log, DMN_LOG_ERROR, "out of memory freeing %d sequences' state", t->npending);
		t->npending = 0;
		return;
	}
	memcpy(slots, t->pending, (size_t)t->npending * sizeof(int));
	j->kind = DMN_J_SEQFREE;
	j->srv = s;
	j->ver = (dmn_mver *)t->ver;
	j->slots = slots;
	j->nslots = t->npending;
	t->npending = 0;
	dmn_exec_push(s, j);
}

/* q leaves its table: out of the hash and the LRU list, its slot released (its state freed on
 * the executor when it holds any and the version still serves: a replaced one frees all). */
static void detach(dmn_seqs *t, dmn_seq *q, bool version_serves)
{
	dmn_seq **p = find_ref(t, q->key);
	if (*p == q)
		*p = q->hnext;
	lru_unlink(t, q);
	if (q->slot >= 0) {
		if (q->state_live && version_serves)
			t->pending[t->npending++] = q->slot;
		t->freeslots[t->nfree++] = q->slot;
	}
	q->slot = -1;
	q->t = NULL;
	t->live--;
	t->ended++;
}

/* q has no step queued or running and takes none without a start (its end step ran or was
 * answered without running, or it was killed): freed, its slot's state with it. */
static void maybe_free(dmn_srv *s, dmn_seq *q)
{
	if (q->nq || q->running || (q->t && q->open))
		return;
	dmn_seqs *t = q->t;
	if (t) {
		tomb_add(t, q->key, "ended by its sequence_end request");
		detach(t, q, true);
		flush_pending(s, t);
	}
	free(q);
}

/* q ends now with why (idle, closed, reload): its queued steps are answered when the batcher
 * reaches them. */
static void seq_kill(dmn_srv *s, dmn_seqs *t, dmn_seq *q, bool version_serves, const char *why)
{
	snprintf(q->why, sizeof(q->why), "%s", why);
	tomb_add(t, q->key, why);
	q->killed = true;
	q->open = false;
	detach(t, q, version_serves);
	maybe_free(s, q);
}

/* The id as a key; false with err when it is not one. */
static bool seq_key(const cJSON *id, char *key, size_t keylen, char *err, size_t errlen)
{
	if (cJSON_IsString(id)) {
		size_t n = strlen(id->valuestring);
		if (!n || n > DMN_SEQ_ID_MAX) {
			snprintf(err, errlen, "sequence_id: a string of 1 to %d bytes, or an integer from 1", DMN_SEQ_ID_MAX);
			return false;
		}
		snprintf(key, keylen, "s:%s", id->valuestring);
		return true;
	}
	int64_t n;
	if (!proto_json_int(id, 1, INT64_C(1) << 53, &n)) {
		snprintf(err, errlen, "sequence_id: an integer in [1, 2^53], or a string of 1 to %d bytes", DMN_SEQ_ID_MAX);
		return false;
	}
	snprintf(key, keylen, "n:%lld", (long long)n);
	return true;
}

/* The key as the client wrote it, for messages. */
static const char *shown(const char *key)
{
	return key + 2;
}

static bool flag(const cJSON *j, const char *name, bool *out, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
	if (v && !cJSON_IsBool(v)) {
		snprintf(err, errlen, "%s: true or false", name);
		return false;
	}
	*out = v && cJSON_IsTrue(v);
	return true;
}

tsd_status dmn_seq_admit(dmn_srv *s, dmn_model *m, dmn_req *r, char *err, size_t errlen)
{
	const cJSON *j = r->pm.json, *id = cJSON_GetObjectItemCaseSensitive(j, "sequence_id");
	bool start, end, state;
	if (!flag(j, "sequence_start", &start, err, errlen) || !flag(j, "sequence_end", &end, err, errlen) ||
	    !flag(j, "sequence_state", &state, err, errlen))
		return TSD_BAD_REQUEST;
	r->seq = NULL;
	if (!id) {
		if (start || end || state)
			return dmn_bad(err, errlen, TSD_BAD_REQUEST, "sequence_start, sequence_end, sequence_state: need a sequence_id");
		return TSD_OK;
	}
	const dmn_mver *v = m->cur;
	char key[DMN_SEQ_ID_MAX + 3];
	if (!seq_key(id, key, sizeof(key), err, errlen))
		return TSD_BAD_REQUEST;
	tsd_status st0 = dmn_seq_model_ok(m, r, err, errlen);
	if (st0 != TSD_OK)
		return st0;
	if (m->seqs && m->seqs->ver != v) /* a version swap it was not told of: never, but never serve stale slots */
		dmn_seqs_reset(s, m, "the model was reloaded");
	if (!m->seqs && !(m->seqs = table_new(v)))
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory for the sequences of \"%s\"", m->name);
	dmn_seqs *t = m->seqs;
	dmn_seq *q = *find_ref(t, key);
	if (!start) {
		if (!q || !q->open) {
			const char *why = q ? "ended by its sequence_end request" : tomb_find(t, key);
			return dmn_bad(err, errlen, TSD_SEQUENCE_ENDED, "sequence %s of model \"%s\": %s%s", shown(key), m->name,
				       why ? why : "not live (never started, or ended long ago)",
				       "; a new one starts with sequence_start");
		}
		if (r->rows != q->rows)
			return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH,
				       "sequence %s of model \"%s\" holds state for %lld rows; this step has %lld", shown(key),
				       m->name, (long long)q->rows, (long long)r->rows);
	}
	if (!q) {
		if (!t->nfree)
			return dmn_bad(err, errlen, TSD_BUSY, "model \"%s\" has %d live sequences (max_sequences)", m->name, t->live);
		if (!(q = calloc(1, sizeof(*q))))
			return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory for a sequence");
		snprintf(q->key, sizeof(q->key), "%s", key);
		q->t = t;
		q->slot = t->freeslots[--t->nfree];
		q->rows = r->rows;
		if (!v->seq_outlive && r->chan && strcmp(r->chan->ops->name, "http") && strcmp(r->chan->ops->name, "grpc")) {
			q->owner = r->chan->ops;
			q->conn = r->chan->conn;
		}
		dmn_seq **p = find_ref(t, key);
		q->hnext = *p;
		*p = q;
		t->live++;
		t->started++;
		touch(q, r->t_arrive);
	}
	r->seq = q;
	r->seq_start = start;
	r->seq_end = end;
	r->seq_state = state;
	return TSD_OK;
}

tsd_status dmn_seq_model_ok(const dmn_model *m, const dmn_req *r, char *err, size_t errlen)
{
	if (m->cur->nstate || !cJSON_GetObjectItemCaseSensitive(r->pm.json, "sequence_id"))
		return TSD_OK;
	return dmn_bad(err, errlen, TSD_BAD_REQUEST,
		       "sequence_id: model \"%s\" keeps no state (load it with \"sequence\": {\"state\": [...]})", m->name);
}

uint64_t dmn_seq_implicit(const dmn_mver *v, const dmn_req *r)
{
	uint64_t mask = 0;
	bool seq = cJSON_GetObjectItemCaseSensitive(r->pm.json, "sequence_id") != NULL;
	for (int k = 0; seq && k < v->nstate; k++)
		mask |= UINT64_C(1) << v->state[k].in;
	return mask;
}

void dmn_seq_abandon(dmn_srv *s, dmn_req *r)
{
	(void)s;
	dmn_seq *q = r->seq;
	r->seq = NULL;
	if (!q || !q->t || q->open || q->nq || q->running)
		return; /* a live sequence: the refused step changes nothing */
	dmn_seqs *t = q->t; /* made for this start: forgotten, as if never started */
	detach(t, q, false);
	t->started--;
	t->ended--;
	free(q);
}

void dmn_seq_link(dmn_srv *s, dmn_req *r)
{
	(void)s;
	dmn_seq *q = r->seq;
	r->seq_next = NULL;
	if (q->qtail)
		q->qtail->seq_next = r;
	else
		q->qhead = r;
	q->qtail = r;
	q->nq++;
	if (q->t) {
		if (r->seq_start) {
			q->open = true;
			q->rows = r->rows;
		}
		if (r->seq_end)
			q->open = false;
		touch(q, r->t_arrive);
	}
}

void dmn_seq_unlink(dmn_srv *s, dmn_req *r)
{
	dmn_seq *q = r->seq;
	dmn_req **p = &q->qhead, *prev = NULL;
	while (*p && *p != r) {
		prev = *p;
		p = &(*p)->seq_next;
	}
	if (!*p)
		return;
	*p = r->seq_next;
	if (q->qtail == r)
		q->qtail = prev;
	r->seq_next = NULL;
	q->nq--;
	if (q->running) /* going into the batch (dmn_seq_dispatched came first) */
		return;
	r->seq = NULL; /* answered without running */
	maybe_free(s, q);
}

bool dmn_seq_ready(const dmn_req *r, const char **why)
{
	const dmn_seq *q = r->seq;
	*why = NULL;
	if (!q)
		return true;
	if (q->killed) {
		*why = q->why;
		return false;
	}
	return q->qhead == r && !q->running;
}

void dmn_seq_dispatched(dmn_srv *s, dmn_req *r)
{
	(void)s;
	dmn_seq *q = r->seq;
	q->running = true;
	r->seq_slot = q->slot;
	q->state_live = !r->seq_end;
}

void dmn_seq_done(dmn_srv *s, dmn_req *r)
{
	dmn_seq *q = r->seq;
	if (!q)
		return;
	r->seq = NULL;
	q->running = false;
	touch(q, eng_now_ns());
	maybe_free(s, q);
}

void dmn_seqs_sweep(dmn_srv *s, dmn_model *m, uint64_t now, uint64_t *next)
{
	dmn_seqs *t = m->seqs;
	if (!t || !m->cur || t->ver != m->cur)
		return;
	uint64_t idle = (uint64_t)t->ver->seq_idle_us * 1000u;
	while (t->lru && now - t->lru->last >= idle) {
		dmn_seq *q = t->lru;
		if (q->nq || q->running) { /* waiting in the queue is not idle */
			touch(q, now);
			continue;
		}
		char why[160];
		snprintf(why, sizeof(why), "ended after %lld us idle (max_sequence_idle_us)", (long long)t->ver->seq_idle_us);
		t->idle_ended++;
		seq_kill(s, t, q, true, why);
	}
	flush_pending(s, t);
	if (t->lru && t->lru->last + idle < *next)
		*next = t->lru->last + idle;
}

void dmn_seqs_closed(dmn_srv *s, const dmn_chan_ops *ops, uint32_t conn)
{
	for (int i = 0; i < s->nmodels; i++) {
		dmn_model *m = s->models[i];
		dmn_seqs *t = m->seqs;
		if (!t)
			continue;
		bool serves = t->ver == m->cur;
		for (dmn_seq *q = t->lru, *n; q; q = n) {
			n = q->next;
			if (q->owner == ops && q->conn == conn)
				seq_kill(s, t, q, serves, "ended: the connection that started it closed");
		}
		flush_pending(s, t);
	}
}

void dmn_seqs_reset(dmn_srv *s, dmn_model *m, const char *why)
{
	dmn_seqs *t = m->seqs;
	if (!t)
		return;
	bool serves = t->ver == m->cur;
	while (t->lru)
		seq_kill(s, t, t->lru, serves, why);
	flush_pending(s, t);
	m->seqs = m->cur && m->cur->nstate ? table_new(m->cur) : NULL; /* the ended ids' reasons carry over */
	if (m->seqs) {
		memcpy(m->seqs->tomb, t->tomb, sizeof(t->tomb));
		m->seqs->tomb_at = t->tomb_at;
	}
	table_free(t);
}

cJSON *dmn_seqs_json(const dmn_model *m)
{
	const dmn_seqs *t = m->seqs;
	if (!m->cur || !m->cur->nstate)
		return NULL;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "live", t ? t->live : 0);
	cJSON_AddNumberToObject(o, "max", m->cur->max_sequences);
	cJSON_AddNumberToObject(o, "started", t ? (double)t->started : 0);
	cJSON_AddNumberToObject(o, "ended", t ? (double)t->ended : 0);
	cJSON_AddNumberToObject(o, "idle_ended", t ? (double)t->idle_ended : 0);
	return o;
}

void dmn_seqs_free(dmn_model *m)
{
	dmn_seqs *t = m->seqs;
	if (!t)
		return;
	while (t->lru) {
		dmn_seq *q = t->lru;
		lru_unlink(t, q);
		free(q);
	}
	table_free(t);
	m->seqs = NULL;
}
